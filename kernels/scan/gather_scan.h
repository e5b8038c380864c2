// The staged gather (gather_scan.cu): per-query lists of slots (a filter's
// matches) read through asynchronous copies into shared memory, in place
// of the span scan's register-fed loads, for long lists.
#pragma once

#include <cstdint>

#include "search/search_kernels.h"

namespace mnemo::cuda {

// Whether it serves lists of kc entries over s: f32, f16 or bf16 rows of
// at most 1 KB in 16-byte aligned rows, on sm_80 and later
// (MNEMO_GATHER_STAGED=0 turns it off, for measuring and testing the span
// scan).
bool gather_scan_usable(const StoreRef& s, uint32_t kc);

// launch_scan_spans' contract for tables of slots (sp.slots and sp.bounds
// set): grid (blocks, nq), query y reads slots[bounds[y].x .. + bounds[y].y).
// With one query the grid is held to the blocks resident at once. Returns
// the blocks a query used (cand holds nq x blocks x kc entries).
unsigned launch_gather_scan(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t kc,
                            Cand* cand, unsigned blocks, const ScanTail& tail, const ScanSpans& sp, cudaStream_t st);

}  // namespace mnemo::cuda
