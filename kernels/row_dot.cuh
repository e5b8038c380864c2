// The inner loop shared by the scan kernels: one warp reads one stored row
// with 16-byte loads and accumulates, for up to QB queries held in shared
// memory, either the dot product or the squared distance. After the call
// every lane holds the full sums (xor-shuffle reduction).
#pragma once

#include "search_kernels.h"
#include "vec_load.cuh"

namespace mnemo::cuda {

// NVEC: 16-byte vectors per row when known at compile time (0 = runtime).
template <class T, bool L2, int NVEC, int QB>
__device__ __forceinline__ void row_sums(const unsigned char* row, const float* qs, uint64_t ld, int lane,
                                         float (&acc)[QB]) {
  constexpr int V = Vec16<T>::kElems;
#pragma unroll
  for (int q = 0; q < QB; ++q) acc[q] = 0.0f;
  const uint32_t nvec = static_cast<uint32_t>(ld / V);
  auto body = [&](uint32_t idx) {
    float x[V];
    Vec16<T>::load(row + static_cast<size_t>(idx) * 16, x);
#pragma unroll
    for (int q = 0; q < QB; ++q) {
      const float* qv = qs + q * ld + idx * V;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        if (L2) {
          const float d = x[e] - qv[e];
          acc[q] = fmaf(d, d, acc[q]);
        } else {
          acc[q] = fmaf(x[e], qv[e], acc[q]);
        }
      }
    }
  };
  if (NVEC > 0) {
    constexpr int NV = (NVEC + 31) / 32;
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      const int idx = v * 32 + lane;
      if (NVEC % 32 == 0 || idx < NVEC) body(idx);
    }
  } else {
    for (uint32_t idx = lane; idx < nvec; idx += 32) body(idx);
  }
#pragma unroll
  for (int q = 0; q < QB; ++q)
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc[q] += __shfl_xor_sync(kFullMask, acc[q], off);
}

// The goodness key of a slot from its raw sum, or NaN when excluded.
__device__ __forceinline__ float make_key(const StoreRef& s, uint32_t slot, float sum, float qnorm) {
  float key;
  if (s.metric == KeyMetric::l2) {
    key = -(s.apply_bias ? sum - s.biases[slot] : sum);
  } else {
    float v = sum;
    if (s.metric == KeyMetric::cosine) {
      const float xn = s.norms[slot];
      v = (qnorm == 0.0f || xn == 0.0f) ? 0.0f : sum / (qnorm * xn);
    }
    key = s.apply_bias ? v + s.biases[slot] : v;
  }
  return key;
}

__device__ __forceinline__ bool slot_live(const StoreRef& s, uint32_t slot) {
  if (s.all_live) return true;
  if (s.ids[slot] == ~0ull) return false;
  return !s.allow || ((s.allow[slot >> 6] >> (slot & 63)) & 1ull);
}

}  // namespace mnemo::cuda
