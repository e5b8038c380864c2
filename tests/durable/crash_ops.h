// The write sequence of the crash test, shared by the child that runs it and
// the parent that checks what survived: op i depends only on (seed, i), and a
// plain model says what the store holds after any prefix of it.
#pragma once

#include <mnemo.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <new>
#include <vector>

#include "aligned_vec.h"  // cli/

namespace crash {

constexpr uint64_t kDim = 8;
constexpr uint64_t kUniverse = 48;  // ids 1..kUniverse
// Times are seconds near a UNIX time of 2020, in steps of half a second:
// exact in f64, so the model compares them bit for bit.
constexpr double kEpoch = 1.6e9;

template <class T>
using AVec = cli::AVec<T>;

enum class Kind { add, remove, set_bias, checkpoint, add_memories, set_times, set_importance, touch, build_index };
struct Op {
  Kind kind;
  AVec<uint64_t> ids;
  // add, add_memories: [ids x kDim] small integers; set_bias,
  // set_importance: [ids]; touch: the query [kDim]
  AVec<float> values;
  AVec<double> times;      // add_memories (when given), set_times: [ids]
  AVec<float> importance;  // add_memories (when given): [ids], quarters
  uint64_t k = 0;          // touch: results, at most ids.size()
  double now = 0.0;        // touch: the search's now
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
  op.kind = pick < 32   ? Kind::add
            : pick < 47 ? Kind::add_memories
            : pick < 67 ? Kind::remove
            : pick < 79 ? Kind::set_bias
            : pick < 86 ? Kind::set_times
            : pick < 92 ? Kind::set_importance
            : pick < 95 ? Kind::touch
            : pick < 97 ? Kind::build_index
                        : Kind::checkpoint;
  if (op.kind == Kind::checkpoint || op.kind == Kind::build_index) return op;
  const uint64_t n = 1 + next(3);
  while (op.ids.size() < n) {  // distinct ids
    const uint64_t id = 1 + next(kUniverse);
    bool seen = false;
    for (uint64_t x : op.ids) seen |= x == id;
    if (!seen) op.ids.push_back(id);
  }
  auto small = [&](uint64_t span) {
    return static_cast<float>(static_cast<int>(next(2 * span + 1)) - static_cast<int>(span));
  };
  auto time = [&] { return kEpoch + 0.5 * static_cast<double>(next(2000000)); };
  auto quarter = [&] { return small(16) / 4.0f; };
  switch (op.kind) {
    case Kind::add:
      for (uint64_t j = 0; j < n * kDim; ++j) op.values.push_back(small(4));
      break;
    case Kind::add_memories: {
      for (uint64_t j = 0; j < n * kDim; ++j) op.values.push_back(small(4));
      const uint64_t flags = 1 + next(3);  // times, importance or both
      for (uint64_t j = 0; j < n && (flags & 1); ++j) op.times.push_back(time());
      for (uint64_t j = 0; j < n && (flags & 2); ++j) op.importance.push_back(quarter());
      break;
    }
    case Kind::set_bias:
      for (uint64_t j = 0; j < n; ++j) op.values.push_back(small(10));
      break;
    case Kind::set_times:
      for (uint64_t j = 0; j < n; ++j) op.times.push_back(time());
      break;
    case Kind::set_importance:
      for (uint64_t j = 0; j < n; ++j) op.values.push_back(quarter());
      break;
    case Kind::touch:
      for (uint64_t j = 0; j < kDim; ++j) op.values.push_back(small(2));
      op.k = 1 + next(n);
      op.now = kEpoch + 1.0e6 + static_cast<double>(i);
      break;
    default: break;
  }
  return op;
}

// The touching search of op: an activation search over the op's ids (a
// filter) whose keys are exact (small-integer dot products plus quarter
// importances, no recency weight), so the model knows which memories it
// returns and touches.
inline mnemo_search_options touch_options(const Op& op) {
  mnemo_search_options o = mnemo_search_options_default();
  o.filter_kind = MNEMO_FILTER_IDS;
  o.filter_ids = op.ids.data();
  o.filter_count = op.ids.size();
  o.activation = 1;
  o.touch = 1;
  o.w_relevance = 1.0f;
  o.w_recency = 0.0f;
  o.w_importance = 1.0f;
  o.now = op.now;
  return o;
}

// Runs op on a store; set_bias, set_times and set_importance on an absent id
// are refused (NOT_FOUND) and change nothing, which the model mirrors.
inline mnemo_status run_op(mnemo_store* s, const Op& op) {
  const uint64_t n = op.ids.size();
  auto absent_ok = [](mnemo_status st) { return st == MNEMO_E_NOT_FOUND ? MNEMO_OK : st; };
  switch (op.kind) {
    case Kind::add: return mnemo_store_add(s, op.ids.data(), op.values.data(), MNEMO_DTYPE_F32, n);
    case Kind::add_memories:
      return mnemo_store_add_memories(s, op.ids.data(), op.values.data(), MNEMO_DTYPE_F32, n,
                                      op.times.empty() ? nullptr : op.times.data(),
                                      op.importance.empty() ? nullptr : op.importance.data());
    case Kind::remove: return mnemo_store_remove(s, op.ids.data(), n, nullptr);
    case Kind::set_bias: return absent_ok(mnemo_store_set_bias(s, op.ids.data(), op.values.data(), n));
    case Kind::set_times: return absent_ok(mnemo_store_set_times(s, op.ids.data(), op.times.data(), n));
    case Kind::set_importance: return absent_ok(mnemo_store_set_importance(s, op.ids.data(), op.values.data(), n));
    case Kind::touch: {
      const mnemo_search_options o = touch_options(op);
      AVec<uint64_t> ids(op.k);
      AVec<float> scores(op.k);
      return mnemo_store_search(s, op.values.data(), 1, op.k, &o, ids.data(), scores.data());
    }
    case Kind::checkpoint: return mnemo_store_checkpoint(s);
    case Kind::build_index: {
      // A layout changes where memories lie, never what the store holds.
      mnemo_index_options o = mnemo_index_options_default();
      o.nlist = 3;
      o.background = 0;
      return mnemo_store_build_index(s, &o);
    }
  }
  return MNEMO_E_INTERNAL;
}

struct Entry {
  std::vector<float> v;
  float bias = 0.0f;
  double time = 0.0;  // last access
  float importance = 0.0f;
  bool operator==(const Entry& o) const {
    return v == o.v && bias == o.bias && time == o.time && importance == o.importance;
  }
};
using Model = std::map<uint64_t, Entry>;

// The ids a touch op returns: its present ids by key (higher first, ties to
// the smaller id), the first k of them.
inline std::vector<uint64_t> touched(const Model& m, const Op& op) {
  std::vector<std::pair<float, uint64_t>> keyed;
  for (uint64_t id : op.ids) {
    auto it = m.find(id);
    if (it == m.end()) continue;
    float dot = 0.0f;
    for (uint64_t j = 0; j < kDim; ++j) dot += op.values[j] * it->second.v[j];
    keyed.push_back({dot + it->second.importance, id});
  }
  std::sort(keyed.begin(), keyed.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::vector<uint64_t> out;
  for (size_t j = 0; j < keyed.size() && j < op.k; ++j) out.push_back(keyed[j].second);
  return out;
}

inline void apply(Model& m, const Op& op) {
  auto all_present = [&] {
    for (uint64_t id : op.ids)
      if (!m.count(id)) return false;
    return true;
  };
  switch (op.kind) {
    case Kind::add:
    case Kind::add_memories:
      // An upsert keeps what the call does not give.
      for (size_t i = 0; i < op.ids.size(); ++i) {
        Entry& e = m[op.ids[i]];
        e.v.assign(op.values.begin() + i * kDim, op.values.begin() + (i + 1) * kDim);
        if (!op.times.empty()) e.time = op.times[i];
        if (!op.importance.empty()) e.importance = op.importance[i];
      }
      break;
    case Kind::remove:
      for (uint64_t id : op.ids) m.erase(id);
      break;
    case Kind::set_bias:
      if (!all_present()) return;
      for (size_t i = 0; i < op.ids.size(); ++i) m[op.ids[i]].bias = op.values[i];
      break;
    case Kind::set_times:
      if (!all_present()) return;
      for (size_t i = 0; i < op.ids.size(); ++i) m[op.ids[i]].time = op.times[i];
      break;
    case Kind::set_importance:
      if (!all_present()) return;
      for (size_t i = 0; i < op.ids.size(); ++i) m[op.ids[i]].importance = op.values[i];
      break;
    case Kind::touch:
      for (uint64_t id : touched(m, op)) m[id].time = op.now;
      break;
    case Kind::checkpoint:
    case Kind::build_index: break;
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
