// Exact selection over candidates gathered per query (select_large.cu): for
// the long-row kernel's long lists, whose candidates are already few.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "select/warp_list.cuh"

namespace mnemo::cuda {

// Per query q, the k best of its count[q] candidates (keys and slots at
// q * cap), or of its whole row dense[q][0..n) where count[q] > cap; ties
// by the smaller id, NaN keys never chosen. out [nq][k] is ordered (key
// descending, id ascending) for k <= 1024, else unordered (padding after:
// key NaN, slot UINT32_MAX). temp: compact_select_temp_bytes.
size_t compact_select_temp_bytes(uint32_t nq, uint32_t k);
void launch_compact_select(const float* dense, uint32_t nq, uint32_t n, uint32_t k, const uint64_t* ids,
                           const float* keys, const uint32_t* slots, const uint32_t* count, uint32_t cap, Cand* out,
                           void* temp, cudaStream_t st);

}  // namespace mnemo::cuda
