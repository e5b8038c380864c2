// Error codes and the exception type of the core. The numbers equal the
// public MNEMO_E_* codes (checked by a static_assert in cabi), but nothing in
// the core knows about C strings or the thread-local last error.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace mnemo {

enum class Code : int32_t {
  ok = 0,
  invalid_argument = 1,
  null_pointer = 2,
  misaligned = 3,
  overflow = 4,
  out_of_range = 5,
  non_finite = 6,
  not_sorted = 7,
  dtype = 8,
  shape = 9,
  out_of_memory = 10,
  backend_unavailable = 11,
  backend = 12,
  not_found = 13,
  io = 14,
  corrupt = 15,
  unsupported = 16,
  internal = 17,
};

class Error : public std::runtime_error {
 public:
  Error(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Code code() const noexcept { return code_; }

 private:
  Code code_;
};

[[noreturn]] inline void fail(Code code, const std::string& message) { throw Error(code, message); }

}  // namespace mnemo
