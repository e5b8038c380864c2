// The fused scan's instance sets, one per storage dtype and metric (L2 or
// not). Each is compiled in its own translation unit (scan_topk_inst.cu.in)
// so that a parallel build is not serialised on one file.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "search/search_kernels.h"

namespace mnemo::cuda {

// launch_scan_topk for stores of element type T; L2: squared distance keys.
template <class T, bool L2>
void launch_scan_typed(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t k,
                       Cand* cand, unsigned blocks, const ScanTail& tail, cudaStream_t st);

// The same with a span table (launch_scan_spans): one query per CTA row.
template <class T, bool L2>
void launch_scan_spans_typed(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t k,
                             Cand* cand, unsigned blocks, const ScanTail& tail, const ScanSpans& sp, cudaStream_t st);

// The same for rows of up to 32 16-byte vectors: `lanes` (4, 8, 16 or 32,
// scan_lanes) lanes read each row.
template <class T, bool L2>
void launch_scan_short_typed(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t k,
                             Cand* cand, unsigned blocks, const ScanTail& tail, int lanes, cudaStream_t st);

#define MNEMO_SCAN_TYPED(T, L2)                                                                                  \
  template void launch_scan_typed<T, L2>(const StoreRef&, const float*, const float*, uint32_t, uint32_t, Cand*, \
                                         unsigned, const ScanTail&, cudaStream_t)
#define MNEMO_SCAN_SHORT_TYPED(T, L2)                                                                                  \
  template void launch_scan_short_typed<T, L2>(const StoreRef&, const float*, const float*, uint32_t, uint32_t, Cand*, \
                                               unsigned, const ScanTail&, int, cudaStream_t)
#define MNEMO_SCAN_SPANS_TYPED(T, L2)                                                                                  \
  template void launch_scan_spans_typed<T, L2>(const StoreRef&, const float*, const float*, uint32_t, uint32_t, Cand*, \
                                               unsigned, const ScanTail&, const ScanSpans&, cudaStream_t)

extern MNEMO_SCAN_TYPED(float, false);
extern MNEMO_SCAN_TYPED(float, true);
extern MNEMO_SCAN_TYPED(__half, false);
extern MNEMO_SCAN_TYPED(__half, true);
extern MNEMO_SCAN_TYPED(__nv_bfloat16, false);
extern MNEMO_SCAN_TYPED(__nv_bfloat16, true);
extern MNEMO_SCAN_SHORT_TYPED(float, false);
extern MNEMO_SCAN_SHORT_TYPED(float, true);
extern MNEMO_SCAN_SHORT_TYPED(__half, false);
extern MNEMO_SCAN_SHORT_TYPED(__half, true);
extern MNEMO_SCAN_SHORT_TYPED(__nv_bfloat16, false);
extern MNEMO_SCAN_SHORT_TYPED(__nv_bfloat16, true);
extern MNEMO_SCAN_SPANS_TYPED(float, false);
extern MNEMO_SCAN_SPANS_TYPED(float, true);
extern MNEMO_SCAN_SPANS_TYPED(__half, false);
extern MNEMO_SCAN_SPANS_TYPED(__half, true);
extern MNEMO_SCAN_SPANS_TYPED(__nv_bfloat16, false);
extern MNEMO_SCAN_SPANS_TYPED(__nv_bfloat16, true);

}  // namespace mnemo::cuda
