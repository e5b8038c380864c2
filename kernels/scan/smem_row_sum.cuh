// One row in shared memory against the query in registers, for the scans
// that stage rows through shared memory (bulk_scan.cu, gather_scan.cu).
#pragma once

#include <cstdint>

#include "device/vec_load.cuh"
#include "search/search_kernels.h"

namespace mnemo::cuda {

// Dot product or squared distance of a row of nvec 16-byte vectors with the
// query in registers (qr[v]: vector v * 32 + lane), reduced across the
// warp: row_sums' order of operations (vector lane, lane + 32, ...; then
// the xor shuffles), so the sums have the register-fed scans' bits. WHOLE:
// every lane holds a vector at each of the NV steps (nvec = 32 * NV), so
// no lane tests its index.
template <class T, bool L2, int NV, bool WHOLE = false>
__device__ __forceinline__ float smem_row_sum(const unsigned char* row, const float (&qr)[NV][Vec16<T>::kElems],
                                              uint32_t nvec, int lane) {
  constexpr int V = Vec16<T>::kElems;
  float acc = 0.0f;
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    const uint32_t idx = v * 32 + lane;
    if (WHOLE || idx < nvec) {
      float x[V];
      Vec16<T>::load_shared(row + static_cast<size_t>(idx) * 16, x);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        if (L2) {
          const float d = x[e] - qr[v][e];
          acc = fmaf(d, d, acc);
        } else {
          acc = fmaf(x[e], qr[v][e], acc);
        }
      }
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(kFullMask, acc, off);
  return acc;
}

}  // namespace mnemo::cuda
