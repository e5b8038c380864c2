// The write sequence of the crash test, shared by the child that runs it and
// the parent that checks what survived: op i depends only on (seed, i), and a
// plain model says what the store holds after any prefix of it.
#pragma once

#include <mnemo.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <new>
#include <vector>

#include "aligned_vec.h"  // cli/

namespace crash {

constexpr uint64_t kDim = 8;
constexpr uint64_t kUniverse = 48;  // ids 1..kUniverse

template <class T>
using AVec = cli::AVec<T>;

enum class Kind { add, remove, set_bias, checkpoint };
struct Op {
  Kind kind;
  AVec<uint64_t> ids;
  AVec<float> values;  // add: [ids x kDim] small integers; set_bias: [ids]
};

inline uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline Op op_at(uint64_t seed, uint64_t i) {
  uint64_t r = mix(seed * 1000003u + i);
  auto next = [&](uint64_t n) {
    r = mix(r);
    return r % n;
  };
  Op op;
  const uint64_t pick = next(100);
  op.kind = pick < 50 ? Kind::add : pick < 75 ? Kind::remove : pick < 95 ? Kind::set_bias : Kind::checkpoint;
  if (op.kind == Kind::checkpoint) return op;
  const uint64_t n = 1 + next(3);
  while (op.ids.size() < n) {  // distinct ids
    const uint64_t id = 1 + next(kUniverse);
    bool seen = false;
    for (uint64_t x : op.ids) seen |= x == id;
    if (!seen) op.ids.push_back(id);
  }
  if (op.kind == Kind::add)
    for (uint64_t j = 0; j < n * kDim; ++j) op.values.push_back(static_cast<float>(static_cast<int>(next(9)) - 4));
  if (op.kind == Kind::set_bias)
    for (uint64_t j = 0; j < n; ++j) op.values.push_back(static_cast<float>(static_cast<int>(next(21)) - 10));
  return op;
}

// Runs op on a store; set_bias on an absent id is refused (NOT_FOUND) and
// changes nothing, which the model mirrors.
inline mnemo_status run_op(mnemo_store* s, const Op& op) {
  switch (op.kind) {
    case Kind::add: return mnemo_store_add(s, op.ids.data(), op.values.data(), MNEMO_DTYPE_F32, op.ids.size());
    case Kind::remove: return mnemo_store_remove(s, op.ids.data(), op.ids.size(), nullptr);
    case Kind::set_bias: {
      const mnemo_status st = mnemo_store_set_bias(s, op.ids.data(), op.values.data(), op.ids.size());
      return st == MNEMO_E_NOT_FOUND ? MNEMO_OK : st;
    }
    case Kind::checkpoint: return mnemo_store_checkpoint(s);
  }
  return MNEMO_E_INTERNAL;
}

struct Entry {
  std::vector<float> v;
  float bias = 0.0f;
  bool operator==(const Entry& o) const { return v == o.v && bias == o.bias; }
};
using Model = std::map<uint64_t, Entry>;

inline void apply(Model& m, const Op& op) {
  switch (op.kind) {
    case Kind::add:
      for (size_t i = 0; i < op.ids.size(); ++i)
        m[op.ids[i]].v.assign(op.values.begin() + i * kDim, op.values.begin() + (i + 1) * kDim);
      break;
    case Kind::remove:
      for (uint64_t id : op.ids) m.erase(id);
      break;
    case Kind::set_bias: {
      for (uint64_t id : op.ids)
        if (!m.count(id)) return;
      for (size_t i = 0; i < op.ids.size(); ++i) m[op.ids[i]].bias = op.values[i];
      break;
    }
    case Kind::checkpoint: break;
  }
}

// The streaming-save crash test: rows 1..rows start as base_row(id); op i
// overwrites row save_op_id(i) (distinct for i < rows) with save_op_row(i).
inline void base_row(uint64_t id, float* v) {
  for (uint64_t d = 0; d < kDim; ++d) v[d] = static_cast<float>((id + d) % 17 + 1);
}
inline uint64_t save_op_id(uint64_t i, uint64_t rows) { return 1 + (i * 7919) % rows; }
inline void save_op_row(uint64_t i, float* v) {
  for (uint64_t d = 0; d < kDim; ++d) v[d] = -static_cast<float>(i % 13 + 1 + d);
}

}  // namespace crash
