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
// exact) back into a model: vectors by get, metadata by get_meta, and the
// biases once more from searches with and without them, which must agree.
// Returns false when a call fails or the two readings of a bias differ.
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
  if (out.empty()) return true;
  crash::AVec<uint64_t> ids(out.size());
  crash::AVec<double> times(out.size());
  crash::AVec<float> importance(out.size()), biases(out.size());
  size_t at = 0;
  for (const auto& kv : out) ids[at++] = kv.first;
  if (mnemo_store_get_meta(s, ids.data(), ids.size(), times.data(), importance.data(), biases.data()) != MNEMO_OK)
    return why = mnemo_last_error(), false;
  at = 0;
  for (auto& kv : out) {
    if (biases[at] != kv.second.bias)
      return why = "get_meta and search disagree on the bias of id " + std::to_string(kv.first), false;
    kv.second.time = times[at];
    kv.second.importance = importance[at++];
  }
  return true;
}

inline std::string describe(const crash::Model& m) {
  std::string s = std::to_string(m.size()) + " ids:";
  char buf[96];
  for (const auto& [id, e] : m) {
    std::snprintf(buf, sizeof buf, " %llu(b=%g t=%.1f i=%g)", static_cast<unsigned long long>(id), e.bias, e.time,
                  e.importance);
    s += buf;
  }
  return s;
}

}  // namespace dt
