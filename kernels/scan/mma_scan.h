// The tensor-core scan (mma_scan_kernel.cuh): the
// single-pass scan for up to four queries a pass whose MMA keys only pick
// the rows to re-score exactly, so it answers as launch_scan_topk does, bit
// for bit. Its instance sets, one per storage dtype and metric, are each
// compiled in their own translation unit (mma_scan_inst.cu.in).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "search/search_kernels.h"

namespace mnemo::cuda {

// The bound e_rel on |MMA sum - exact sum| / (|row| |query|) for rows of
// ld elements of t: the exact scan's own rounding (a lane's chain of FMAs
// and the five-step reduction), the MMA's accumulation, what the query's
// two parts leave out, with a factor of four to spare, and for f32 rows
// what TF32 leaves out of them.
float mma_scan_margin(DType t, uint64_t ld);

template <class T, bool L2>
void launch_mma_scan_typed(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t k,
                           float e_rel, Cand* cand, unsigned blocks, const ScanTail& tail, cudaStream_t st);

#define MNEMO_MMA_SCAN_TYPED(T, L2)                                                                                  \
  template void launch_mma_scan_typed<T, L2>(const StoreRef&, const float*, const float*, uint32_t, uint32_t, float, \
                                             Cand*, unsigned, const ScanTail&, cudaStream_t)

extern MNEMO_MMA_SCAN_TYPED(float, false);
extern MNEMO_MMA_SCAN_TYPED(float, true);
extern MNEMO_MMA_SCAN_TYPED(__half, false);
extern MNEMO_MMA_SCAN_TYPED(__half, true);
extern MNEMO_MMA_SCAN_TYPED(__nv_bfloat16, false);
extern MNEMO_MMA_SCAN_TYPED(__nv_bfloat16, true);

}  // namespace mnemo::cuda
