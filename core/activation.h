// The activation formulas of a search, shared by the CPU backend and the
// CUDA kernels so both compute a memory's key with the same operations:
//   key = w_rel * rel + extra,  extra = w_rec * rec + w_imp * imp (+ bias)
// where rel is the relevance key (similarity, or -squared distance) and
// rec = 2^(-(now - t) / half_life). The age is taken in f64 (times are
// seconds since an epoch: f32 would lose minutes), the power in f32.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define MNEMO_HD __host__ __device__ __forceinline__
#else
#define MNEMO_HD inline
#endif

namespace mnemo {

// 2^(-(now - t) * inv_half_life); a time at or after `now` counts as now.
// inv_half_life = 0 (an infinite half-life) gives 1 for every memory.
MNEMO_HD float recency(double now, double t, double inv_half_life) {
  const double age = now - t;
  // An infinite half-life never decays, even when the age overflows to inf.
  if (!(age > 0.0) || inv_half_life == 0.0) return 1.0f;
  return exp2f(static_cast<float>(-age * inv_half_life));
}

// The memory terms of a key, in this order on every backend.
MNEMO_HD float activation_extra(float w_rec, float rec, float w_imp, float imp, float bias) {
  return fmaf(w_imp, imp, fmaf(w_rec, rec, bias));
}

// Min-max scaling to [0, 1]; every candidate gets 0.5 when the range is empty.
MNEMO_HD float min_max(float x, float lo, float hi) { return hi > lo ? (x - lo) / (hi - lo) : 0.5f; }

}  // namespace mnemo
