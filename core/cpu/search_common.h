// What the streaming and the GEMM search paths share: the score-to-key rule
// and the writing of one query's results. Both paths compute a row's key
// with simd::score_rows, so they return identical results.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../activation.h"
#include "../backend.h"
#include "../topk.h"
#include "simd_kernels.h"

namespace mnemo::cpu {

// The f32 norm of a query, as both paths use it for cosine.
inline float query_norm(const float* q, uint64_t dim) { return std::sqrt(simd::sumsq(q, DType::f32, dim)); }

// Slot is searchable: live and allowed.
inline bool slot_live(const StoreView& s, const SearchArgs& a, uint64_t slot) {
  return s.ids[slot] != kNoId && (!a.allow || ((a.allow[slot >> 6] >> (slot & 63)) & 1u));
}

// The relevance key of a slot from its raw score (dot product, or squared
// L2 distance): larger is better.
inline float relevance_key(const StoreView& s, uint64_t slot, float raw, float qn) {
  if (s.metric == Metric::l2sq) return -raw;
  if (s.metric == Metric::cosine) {
    const float xn = s.norms[slot];
    return (qn == 0.0f || xn == 0.0f) ? 0.0f : raw / (qn * xn);
  }
  return raw;
}

// The memory terms of the activation keys of slots [first, first + n)
// (simd::activation_extras): every CPU path takes them from this kernel,
// so the streaming and GEMM paths agree bit for bit.
inline void activation_extras_of(const StoreView& s, const SearchArgs& a, uint64_t first, uint64_t n, float* out) {
  const Activation& act = a.act;
  simd::activation_extras(s.times + first, s.importance + first, a.apply_bias ? s.biases + first : nullptr, n, act.now,
                          1.0 / act.half_life, act.w_rec, act.w_imp, out);
}

inline float activation_extra_of(const StoreView& s, const SearchArgs& a, uint64_t slot) {
  float e;
  activation_extras_of(s, a, slot, 1, &e);
  return e;
}

// The top-k key of a slot from its raw score (dot product, or squared L2
// distance): larger is better. Activation here is the plain one; normalised
// searches take their own path (activation_search.cpp).
inline float key_of(const StoreView& s, const SearchArgs& a, uint64_t slot, float raw, float qn) {
  if (a.act.on) return fmaf(a.act.w_rel, relevance_key(s, slot, raw, qn), activation_extra_of(s, a, slot));
  if (s.metric == Metric::l2sq) {
    float d = raw;
    if (a.apply_bias) d -= s.biases[slot];
    return -d;
  }
  float v = relevance_key(s, slot, raw, qn);
  if (a.apply_bias) v += s.biases[slot];
  return v;
}

// key_of of a plain search (no activation) for n consecutive slots from
// their raw scores: the same operations in the same order, so the same bits,
// in loops the compiler vectorises. Dead slots get keys too; callers test
// liveness only for keys that reach their list.
inline void plain_keys(const StoreView& s, const SearchArgs& a, uint64_t first, uint64_t n, const float* raw, float qn,
                       float* out) {
  const float* bias = a.apply_bias ? s.biases + first : nullptr;
  if (s.metric == Metric::l2sq) {
    if (bias)
      for (uint64_t r = 0; r < n; ++r) out[r] = -(raw[r] - bias[r]);
    else
      for (uint64_t r = 0; r < n; ++r) out[r] = -raw[r];
    return;
  }
  if (s.metric == Metric::cosine) {
    const float* xn = s.norms + first;
    if (qn == 0.0f) {
      for (uint64_t r = 0; r < n; ++r) out[r] = 0.0f;
    } else {
      // The division for every lane and the zero-norm rule as a mask of
      // its bits (+0.0f is all zeros): no branch, so the loop vectorises.
      for (uint64_t r = 0; r < n; ++r) {
        const float x = xn[r], v = raw[r] / (qn * x);
        uint32_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        bits &= 0u - static_cast<uint32_t>(x != 0.0f);
        std::memcpy(out + r, &bits, sizeof bits);
      }
    }
  } else {
    for (uint64_t r = 0; r < n; ++r) out[r] = raw[r];
  }
  if (bias)
    for (uint64_t r = 0; r < n; ++r) out[r] += bias[r];
}

inline void write_results(std::vector<Hit> hits, const SearchArgs& a, uint64_t qi, Metric metric) {
  uint64_t* ids = a.ids + qi * a.k;
  float* scores = a.scores + qi * a.k;
  const uint64_t m = std::min<uint64_t>(hits.size(), a.k);
  for (uint64_t j = 0; j < m; ++j) {
    ids[j] = hits[j].id;
    scores[j] = metric == Metric::l2sq ? -hits[j].key : hits[j].key;
  }
  for (uint64_t j = m; j < a.k; ++j) {
    ids[j] = kNoId;
    scores[j] = std::numeric_limits<float>::quiet_NaN();
  }
}

// Scores slots [lo, hi) for queries q[0..m) (norms qn) into tops[0..m)
// (cpu_search.cpp).
void scan_range(const StoreView& s, const SearchArgs& a, const float* q, uint64_t m, const float* qn, uint64_t lo,
                uint64_t hi, TopK* tops);

// A run of candidate slots [lo, hi).
struct Span {
  uint64_t lo, hi;
};

// One piece of GEMM work: slots [lo, hi) against the m queries listed
// (null: queries 0 .. m-1, every query of the search).
struct GemmItem {
  uint64_t lo, hi;
  const uint32_t* queries;
  uint64_t m;
};
// [lo, hi) cut into the GEMM path's tiles, each for the same queries.
std::vector<GemmItem> gemm_tiles(uint64_t lo, uint64_t hi, const uint32_t* queries, uint64_t m);
// The GEMM path (gemm_search.cpp): sgemm tiles, candidates re-scored. With
// a plan, each query's candidates are the slots of the items naming it (an
// index's probed lists); without, every slot for every query.
void gemm_search(const SearchArgs& a, int threads, const std::vector<GemmItem>* plan = nullptr);
// Normalised activation (activation_search.cpp): every candidate's
// relevance kept per query, ranges taken, then keys and selection.
void normalized_search(const SearchArgs& a, int threads);
// The same for one query group whose candidates are the live, allowed slots
// of `spans` (queries q0 .. q0 + m).
void normalized_group(const SearchArgs& a, uint64_t q0, uint64_t m, const std::vector<Span>& spans, int threads);
// A search over an inverted-file index (ivf_search.cpp): the coarse step on
// `self`, then each query's probed lists and the hot tier (batch: through
// the GEMM path, list by list).
void ivf_search(Backend& self, const SearchArgs& a, int threads, bool batch);
// Query qi's candidate spans: its probed lists (lists [nq x nprobe], list
// numbers; out-of-range entries skipped) and the hot tier, empty ones left out.
std::vector<Span> probe_spans(const IvfProbe& p, uint64_t slots, const uint64_t* lists, uint64_t qi);

}  // namespace mnemo::cpu
