// The lists of the fused GEMM + selection kernels: one warp keeps each
// query's sorted list in shared memory, holds it in registers while
// candidates go in, and hands it to the merge as cand[q][chunk][kc], best
// first, empty entries after.
#pragma once

#include <cstdint>

#include "select/warp_list.cuh"

namespace mnemo::cuda {

// The n entries of list l (sorted, n <= k <= 32) one per lane, by one warp.
// (RegList::store(l, n, lane) writes it back.)
__device__ __forceinline__ RegList load_reg_list(const Cand* l, int n, int k, int lane) {
  RegList rl = RegList::make(k);
  rl.n = n;
  if (lane < n) rl.key = l[lane].key, rl.slot = l[lane].slot;
  if (n == k)
    rl.worst_key = __shfl_sync(kFullMask, rl.key, k - 1), rl.worst_slot = __shfl_sync(kFullMask, rl.slot, k - 1);
  return rl;
}

// The n entries of list l (sorted) and kc - n empty ones to out, by one warp.
__device__ __forceinline__ void store_chunk_list(Cand* out, const Cand* l, int n, uint32_t kc, int lane) {
  for (uint32_t j = lane; j < kc; j += 32) out[j] = static_cast<int>(j) < n ? l[j] : empty_cand();
}

}  // namespace mnemo::cuda
