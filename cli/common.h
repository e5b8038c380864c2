// What every command shares: errors, options, aligned arrays, a runtime made
// from the command line, and status checks that turn mnemo failures into
// readable errors.
#pragma once

#include <mnemo.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "aligned_vec.h"

namespace cli {

// A failure to report on stderr; the program exits with status 1.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Wrong command-line use; the program prints usage and exits with status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --name value options; flags take no value. Unknown names are an error.
class Args {
 public:
  Args(int argc, char** argv, int first, const std::vector<std::string>& known,
       const std::vector<std::string>& flags = {});
  bool has(const std::string& name) const { return v_.count(name) != 0; }
  std::string str(const std::string& name) const;  // required
  std::string str(const std::string& name, const std::string& fallback) const;
  uint64_t num(const std::string& name, uint64_t fallback) const;
  uint64_t num(const std::string& name) const;  // required

 private:
  std::map<std::string, std::string> v_;
};

// Throws Error with the function's status and mnemo_last_error().
void check(mnemo_status st, const char* what);

int32_t parse_metric(const std::string& s);
int32_t parse_dtype(const std::string& s);
int32_t parse_backend(const std::string& s);
int32_t parse_precision(const std::string& s);
const char* metric_name(int32_t m);
const char* dtype_name(int32_t d);

struct Runtime {
  mnemo_runtime* rt = nullptr;
  explicit Runtime(const Args& a);  // --backend, --precision, --threads
  Runtime(int32_t backend, int32_t precision);
  ~Runtime() { mnemo_runtime_destroy(rt); }
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  std::string describe() const;
};

struct Store {
  mnemo_store* s = nullptr;
  Store() = default;
  ~Store() { mnemo_store_destroy(s); }
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
};

double now_seconds();
bool ends_with(const std::string& s, const std::string& suffix);

}  // namespace cli
