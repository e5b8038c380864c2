// Where a query whose candidates overflowed their compact list (count above
// cap) keeps its dense key row: the rows are numbered by the overflowed
// queries' order, so a dense buffer of a few rows serves a batch of any
// size in rounds (fused_wide.h, compact_select.h).
#pragma once

#include <cstdint>

namespace mnemo::cuda {

// The number of queries before q whose count is above cap. Only overflowed
// queries ask, which is rare: a plain loop over the counts.
__device__ __forceinline__ uint32_t overflow_rank(const uint32_t* __restrict__ count, uint32_t cap, uint32_t q) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < q; ++i) r += count[i] > cap;
  return r;
}

}  // namespace mnemo::cuda
