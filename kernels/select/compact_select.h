// Exact selection over candidates gathered per query (select_large.cu): for
// the long-row kernel's long lists, whose candidates are already few.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "select/warp_list.cuh"

namespace mnemo::cuda {

// Per query q, the k best of its count[q] candidates (keys and slots at
// q * cap), or, where count[q] > cap, of its whole key row: ties by the
// smaller id, NaN keys never chosen. The whole rows come in rounds, so that
// a few rows of n keys serve a batch of any size: in the round from
// dense_lo, dense [dense_rows][n] holds the rows of the overflowed queries
// of overflow_rank (overflow_rank.cuh) dense_lo, dense_lo + 1, ...; the
// round from 0 also selects every compact query, and each query is written
// in exactly one round. After the last round finish_compact_select. out
// [nq][k] is ordered (key descending, id ascending) for k <= 1024, else
// unordered (padding after: key NaN, slot UINT32_MAX). temp:
// compact_select_temp_bytes, the same for every round.
size_t compact_select_temp_bytes(uint32_t nq, uint32_t k);
void launch_compact_select(const float* dense, uint32_t nq, uint32_t n, uint32_t k, const uint64_t* ids,
                           const float* keys, const uint32_t* slots, const uint32_t* count, uint32_t cap,
                           uint32_t dense_lo, uint32_t dense_rows, Cand* out, void* temp, cudaStream_t st);
void finish_compact_select(uint32_t nq, uint32_t k, Cand* out, void* temp, cudaStream_t st);

}  // namespace mnemo::cuda
