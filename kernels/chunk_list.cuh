// How the fused GEMM + selection kernels hand a chunk's list over to the
// merge: cand[q][chunk][kc], best first, empty entries after.
#pragma once

#include <cstdint>

#include "warp_list.cuh"

namespace mnemo::cuda {

// The n entries of list l (sorted) and kc - n empty ones to out, by one warp.
__device__ __forceinline__ void store_chunk_list(Cand* out, const Cand* l, int n, uint32_t kc, int lane) {
  for (uint32_t j = lane; j < kc; j += 32) out[j] = static_cast<int>(j) < n ? l[j] : empty_cand();
}

}  // namespace mnemo::cuda
