// The inner loop shared by the scan kernels: one warp reads one stored row
// with 16-byte loads and accumulates, for up to QB queries held in shared
// memory, either the dot product or the squared distance. After the call
// every lane holds the full sums (xor-shuffle reduction).
#pragma once

#include "core/activation.h"
#include "device/vec_load.cuh"
#include "search/search_kernels.h"

namespace mnemo::cuda {

// NVEC: 16-byte vectors per row when known at compile time (0 = runtime).
// R rows are read together so a warp keeps R rows of loads in flight.
// LPR: lanes reading one row (a power of two up to 32). Below 32 the warp
// reads 32 / LPR rows at once, lanes g * LPR .. g * LPR + LPR - 1 reading
// group g's rows: `lane` is then the lane's index in its group and the sums
// are reduced within the group (short rows keep every lane busy). With
// LPR at least the row's vectors, as the scans choose it, each lane holds
// the same partial sum as with 32 lanes (vector `lane`, or +0), and the
// 32-lane reduction's extra steps add +0 to it (a partial that starts at +0
// is never -0): the sums have the same bits whatever LPR, so a row's key is
// the same in every kernel.
// U: with the row length known at run time only, a lane issues U vectors'
// loads at a time (U loads in flight on one long row; the order of the
// sums is unchanged).
template <class T, bool L2, int NVEC, int QB, int R = 1, int LPR = 32, int U = 1>
__device__ __forceinline__ void row_sums(const unsigned char* (&rows)[R], const float* qs, uint64_t ld, int lane,
                                         float (&acc)[R][QB]) {
  static_assert(LPR >= 1 && LPR <= 32 && (LPR & (LPR - 1)) == 0, "lanes per row: a power of two");
  constexpr int V = Vec16<T>::kElems;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int q = 0; q < QB; ++q) acc[r][q] = 0.0f;
  const uint32_t nvec = static_cast<uint32_t>(ld / V);
  // The sums of vector idx of each row, its values in x.
  auto add = [&](uint32_t idx, const float(&x)[R][V]) {
#pragma unroll
    for (int q = 0; q < QB; ++q) {
      const float* qv = qs + q * ld + idx * V;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float qe = qv[e];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (L2) {
            const float d = x[r][e] - qe;
            acc[r][q] = fmaf(d, d, acc[r][q]);
          } else {
            acc[r][q] = fmaf(x[r][e], qe, acc[r][q]);
          }
        }
      }
    }
  };
  auto body = [&](uint32_t idx) {
    float x[R][V];
#pragma unroll
    for (int r = 0; r < R; ++r) Vec16<T>::load(rows[r] + static_cast<size_t>(idx) * 16, x[r]);
    add(idx, x);
  };
  if constexpr (NVEC > 0) {
    constexpr int NV = (NVEC + LPR - 1) / LPR;
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      const int idx = v * LPR + lane;
      if (NVEC % LPR == 0 || idx < NVEC) body(idx);
    }
  } else {
    uint32_t idx = lane;
    if constexpr (U > 1) {
      // U vectors' loads issued before their sums, in the same order.
      for (; idx + (U - 1) * LPR < nvec; idx += U * LPR) {
        float x[U][R][V];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int r = 0; r < R; ++r) Vec16<T>::load(rows[r] + static_cast<size_t>(idx + u * LPR) * 16, x[u][r]);
#pragma unroll
        for (int u = 0; u < U; ++u) add(idx + u * LPR, x[u]);
      }
    }
    for (; idx < nvec; idx += LPR) body(idx);
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int q = 0; q < QB; ++q)
#pragma unroll
      for (int off = LPR / 2; off > 0; off >>= 1) acc[r][q] += __shfl_xor_sync(kFullMask, acc[r][q], off);
}

// What a scan needs to know of one slot, loaded before its row so the
// loads overlap.
struct SlotMeta {
  bool live;
  float norm, norm2;  // norm2: squared norm, for L2 by expansion
  float bias;         // the bias, or with activation the memory terms (extra)
};

// Slot is searchable: live and allowed.
__device__ __forceinline__ bool slot_live(const StoreRef& s, uint32_t slot) {
  return s.all_live || (s.ids[slot] != ~0ull && (!s.allow || ((s.allow[slot >> 6] >> (slot & 63)) & 1ull)));
}

// A slot's memory terms over `bias`: the CPU's activation_extra_of, with the
// same operations. slot_meta forms them inline; launch_activation_terms
// ahead of the scan (StoreRef::act_in_bias). One function, so both give the
// same bits.
__device__ __forceinline__ float slot_extra(const StoreRef& s, uint32_t slot, float bias) {
  return activation_extra(s.w_rec, recency(s.now, s.times[slot], s.inv_half_life), s.w_imp, s.importance[slot], bias);
}

// ACT = false compiles the plain key alone (the fused scan's instances for
// plain searches keep their registers); true reads s.act at run time.
template <bool ACT = true>
__device__ __forceinline__ SlotMeta slot_meta(const StoreRef& s, uint32_t slot) {
  SlotMeta m;
  m.live = slot_live(s, slot);
  const float nrm = s.metric != KeyMetric::dot ? s.norms[slot] : 0.0f;
  m.norm = nrm;
  m.norm2 = nrm * nrm;
  m.bias = s.apply_bias ? s.biases[slot] : 0.0f;
  if (ACT && s.act && !s.act_in_bias) m.bias = slot_extra(s, slot, m.bias);
  return m;
}

// The goodness key from a raw sum and the slot's preloaded metadata: the
// relevance key (similarity, or -squared distance) plus the bias, or with
// activation fmaf(w_rel, relevance, extra) as the CPU's key_of.
template <bool ACT = true>
__device__ __forceinline__ float key_of(const StoreRef& s, float sum, float qnorm, const SlotMeta& m) {
  const bool act = ACT && s.act;
  if (s.metric == KeyMetric::l2) return act ? fmaf(s.w_rel, -sum, m.bias) : -(sum - m.bias);
  float v = sum;
  if (s.metric == KeyMetric::cosine) v = (qnorm == 0.0f || m.norm == 0.0f) ? 0.0f : sum / (qnorm * m.norm);
  return act ? fmaf(s.w_rel, v, m.bias) : v + m.bias;
}

}  // namespace mnemo::cuda
