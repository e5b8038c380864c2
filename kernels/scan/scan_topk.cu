// The fused scan's entry point: picks the instance set for the store's
// dtype and metric (each built in its own translation unit, generated from
// scan_topk_inst.cu.in) and sizes the grid.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "device/env_knob.h"
#include "scan/scan_tail.cuh"
#include "scan/scan_topk.h"

namespace mnemo::cuda {

unsigned scan_blocks(const StoreRef& s, unsigned sm_count) {
  // Four blocks per SM fill the machine (five fit by registers); small
  // stores still get at least two blocks per SM while each warp keeps four
  // rows (two steps of two), since the last block's merge of the block
  // lists is cheap (the bound filter drops most entries unread).
  // MNEMO_SCAN_MIN_ROWS: rows per warp at least (for measuring).
  static const unsigned min_rows = static_cast<unsigned>(env_positive("MNEMO_SCAN_MIN_ROWS", 4));
  const unsigned want = sm_count * 4;
  const unsigned by_rows = ceil_div(std::max<uint32_t>(s.slots, 1), kScanWarps * min_rows);
  return std::max(1u, std::min(want, by_rows));
}

int scan_lanes(const StoreRef& s) {
  static const bool off = env_int("MNEMO_SCAN_SHORT", 1) == 0;
  const uint64_t nvec = s.ld * dtype_size(s.dtype) / 16;
  if (off || nvec > 32) return 0;
  return nvec <= 4 ? 4 : nvec <= 8 ? 8 : nvec <= 16 ? 16 : 32;
}

namespace {

// Short rows: the instances of scan_short_<dtype>_<metric>.cu.
void launch_short(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t k, Cand* cand,
                  unsigned blocks, const ScanTail& tail, int lanes, cudaStream_t st) {
  const bool l2 = s.metric == KeyMetric::l2;
  switch (s.dtype) {
    case DType::f16:
      (l2 ? launch_scan_short_typed<__half, true>
          : launch_scan_short_typed<__half, false>)(s, queries, qnorms, nq, k, cand, blocks, tail, lanes, st);
      break;
    case DType::bf16:
      (l2 ? launch_scan_short_typed<__nv_bfloat16, true>
          : launch_scan_short_typed<__nv_bfloat16, false>)(s, queries, qnorms, nq, k, cand, blocks, tail, lanes, st);
      break;
    default:
      (l2 ? launch_scan_short_typed<float, true>
          : launch_scan_short_typed<float, false>)(s, queries, qnorms, nq, k, cand, blocks, tail, lanes, st);
      break;
  }
}

}  // namespace

unsigned launch_scan_topk(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t k,
                          Cand* cand, unsigned blocks_wanted, const ScanTail& tail, cudaStream_t st) {
  const unsigned blocks = std::max(1u, blocks_wanted);
  const int lanes = scan_lanes(s);
  if (lanes > 0) {
    launch_short(s, queries, qnorms, nq, k, cand, blocks, tail, lanes, st);
    MNEMO_CUDA_LAUNCHED("scan_topk_kernel (short rows)");
    return blocks;
  }
  const bool l2 = s.metric == KeyMetric::l2;
  switch (s.dtype) {
    case DType::f16:
      (l2 ? launch_scan_typed<__half, true> : launch_scan_typed<__half, false>)(s, queries, qnorms, nq, k, cand, blocks,
                                                                                tail, st);
      break;
    case DType::bf16:
      (l2 ? launch_scan_typed<__nv_bfloat16, true> : launch_scan_typed<__nv_bfloat16, false>)(s, queries, qnorms, nq, k,
                                                                                              cand, blocks, tail, st);
      break;
    default:
      (l2 ? launch_scan_typed<float, true> : launch_scan_typed<float, false>)(s, queries, qnorms, nq, k, cand, blocks,
                                                                              tail, st);
      break;
  }
  MNEMO_CUDA_LAUNCHED("scan_topk_kernel");
  return blocks;
}

unsigned launch_scan_spans(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t k,
                           Cand* cand, unsigned blocks_wanted, const ScanTail& tail, const ScanSpans& sp,
                           cudaStream_t st) {
  const unsigned blocks = std::max(1u, blocks_wanted);
  const bool l2 = s.metric == KeyMetric::l2;
  switch (s.dtype) {
    case DType::f16:
      (l2 ? launch_scan_spans_typed<__half, true> : launch_scan_spans_typed<__half, false>)(s, queries, qnorms, nq, k,
                                                                                            cand, blocks, tail, sp, st);
      break;
    case DType::bf16:
      (l2 ? launch_scan_spans_typed<__nv_bfloat16, true>
          : launch_scan_spans_typed<__nv_bfloat16, false>)(s, queries, qnorms, nq, k, cand, blocks, tail, sp, st);
      break;
    default:
      (l2 ? launch_scan_spans_typed<float, true> : launch_scan_spans_typed<float, false>)(s, queries, qnorms, nq, k,
                                                                                          cand, blocks, tail, sp, st);
      break;
  }
  MNEMO_CUDA_LAUNCHED("scan_topk_kernel (spans)");
  return blocks;
}

}  // namespace mnemo::cuda
