// Helpers of the durability tests: a scratch folder, whole-file reads and
// writes, and what a store holds read back into the crash test's model.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "crash_ops.h"

namespace dt {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mnemo_durable_XXXXXX";
    std::vector<char> t(tmpl.begin(), tmpl.end());
    t.push_back('\0');
    const char* p = mkdtemp(t.data());
    path_ = p ? p : "";
  }
  ~TempDir() { clear(), rmdir(path_.c_str()); }
  void clear() const {
    if (DIR* d = opendir(path_.c_str())) {
      while (const dirent* e = readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") std::remove((path_ + "/" + n).c_str());
      }
      closedir(d);
    }
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline void spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Reads a store of the crash test's shape (ids 1..kUniverse, dot metric,
// small-integer vectors and biases, so scores and score differences are
// exact) back into a model. Returns false when a call fails.
inline bool read_back(const mnemo_store* s, crash::Model& out, std::string& why) {
  out.clear();
  crash::AVec<float> v(crash::kDim);
  for (uint64_t id = 1; id <= crash::kUniverse; ++id) {
    const mnemo_status st = mnemo_store_get(s, id, v.data());
    if (st == MNEMO_E_NOT_FOUND) continue;
    if (st != MNEMO_OK) return why = mnemo_last_error(), false;
    out[id].v.assign(v.begin(), v.end());
  }
  uint64_t n = 0;
  if (mnemo_store_count(s, &n) != MNEMO_OK || n != out.size()) return why = "count disagrees with get", false;
  // Biases: score with bias minus score without, both exact integers.
  crash::AVec<float> q(crash::kDim);
  for (uint64_t j = 0; j < crash::kDim; ++j) q[j] = static_cast<float>(j + 1);
  const uint64_t k = crash::kUniverse;
  crash::AVec<uint64_t> ids0(k), ids1(k);
  crash::AVec<float> sc0(k), sc1(k);
  mnemo_search_options o = mnemo_search_options_default();
  if (mnemo_store_search(s, q.data(), 1, k, &o, ids0.data(), sc0.data()) != MNEMO_OK)
    return why = mnemo_last_error(), false;
  o.apply_bias = 1;
  if (mnemo_store_search(s, q.data(), 1, k, &o, ids1.data(), sc1.data()) != MNEMO_OK)
    return why = mnemo_last_error(), false;
  std::map<uint64_t, float> plain;
  for (uint64_t i = 0; i < k && ids0[i] != MNEMO_NO_ID; ++i) plain[ids0[i]] = sc0[i];
  for (uint64_t i = 0; i < k && ids1[i] != MNEMO_NO_ID; ++i) {
    auto it = out.find(ids1[i]);
    if (it == out.end() || !plain.count(ids1[i])) return why = "search returned an id get does not know", false;
    it->second.bias = sc1[i] - plain[ids1[i]];
  }
  return true;
}

inline std::string describe(const crash::Model& m) {
  std::string s = std::to_string(m.size()) + " ids:";
  for (const auto& [id, e] : m) s += " " + std::to_string(id) + "(b=" + std::to_string(e.bias) + ")";
  return s;
}

}  // namespace dt
