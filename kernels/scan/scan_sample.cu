// A starting bound for the single-pass scans (scan_topk.cu, bulk_scan.cu)
// over long lists: the keys of rows spread evenly over the store, then each
// query's kc-th largest of them (sample_bound.cu's selection). Sampled rows
// are distinct live rows, so at least kc rows of the store rank at or above
// the bound, and a row below it cannot reach the top kc: the scan never
// offers it. Without a bound a warp's shared-memory list of 100 takes most
// of the rows it reads as inserts (a warp reads a few hundred rows of a
// 1 GB store); with one, about kc * slots / count rows are offered in all.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "batch/sample_bound.h"
#include "device/env_knob.h"
#include "scan/row_dot.cuh"
#include "scan/scan_tail.cuh"

namespace mnemo::cuda {

namespace {

// Keys of sampled row j = floor(j * slots / count), for up to 4 queries,
// summed exactly as the scan with LPR lanes a row sums them (row_sums, same
// order of operations: the same bits), NaN for rows that are not live.
// Block 0 zeroes the bounds, which the selection after it raises.
// QB: 1 for one query (a quarter of the shared memory and the sums), else
// 4. Rows of more than 32 vectors are read four vectors a lane at a time:
// one at a time, a 4096-wide f16 row was a chain of 16 loads a lane (29.7
// us for 1,024 rows on the H200, 6% of DRAM).
template <class T, bool L2, int LPR, int QB>
__global__ void __launch_bounds__(kScanThreads)
    sample_keys_kernel(StoreRef s, const float* __restrict__ queries, const float* __restrict__ qnorms, uint32_t nq,
                       uint32_t count, float* __restrict__ keys, unsigned* __restrict__ bound) {
  constexpr int RPW = 32 / LPR, U = LPR == 32 ? 4 : 1;
  extern __shared__ __align__(16) float qs[];
  if (blockIdx.x == 0 && threadIdx.x < nq) bound[threadIdx.x] = 0;
  for (uint64_t i = threadIdx.x; i < QB * s.ld; i += kScanThreads) qs[i] = i / s.ld < nq ? queries[i] : 0.0f;
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, grp = lane / LPR, sub = lane % LPR;
  const auto* base = static_cast<const unsigned char*>(s.vectors);
  const size_t row_bytes = s.ld * sizeof(T);
  const uint32_t stride = gridDim.x * kScanWarps * RPW;
  for (uint32_t j0 = (blockIdx.x * kScanWarps + warp) * RPW; j0 < count; j0 += stride) {
    const uint32_t j = j0 + grp;
    const bool have = j < count;
    const uint32_t slot = have ? static_cast<uint32_t>(static_cast<uint64_t>(j) * s.slots / count) : 0u;
    const SlotMeta m = slot_meta<true>(s, slot);
    const unsigned char* rows[1] = {base + slot * row_bytes};
    float acc[1][QB];
    row_sums<T, L2, 0, QB, 1, LPR, U>(rows, qs, s.ld, sub, acc);
    if (!have || sub != 0) continue;
#pragma unroll
    for (int q = 0; q < QB; ++q)
      if (q < static_cast<int>(nq))
        keys[static_cast<uint64_t>(q) * count + j] =
            m.live ? key_of<true>(s, acc[0][q], qnorms[q], m) : __int_as_float(0x7fc00000);
  }
}

template <class T, bool L2>
void launch_typed(const StoreRef& s, const float* q, const float* qn, uint32_t nq, uint32_t count, int lanes,
                  float* keys, unsigned* bound, unsigned blocks, cudaStream_t st) {
  const int qb = nq == 1 ? 1 : 4;
  const size_t smem = qb * s.ld * sizeof(float);
  auto go = [&](auto kernel) {
    if (smem > 48 * 1024)
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
            "sample smem");
    kernel<<<blocks, kScanThreads, smem, st>>>(s, q, qn, nq, count, keys, bound);
  };
  auto by_lanes = [&](auto qbc) {
    constexpr int QB = decltype(qbc)::value;
    switch (lanes) {
      case 4: go(sample_keys_kernel<T, L2, 4, QB>); break;
      case 8: go(sample_keys_kernel<T, L2, 8, QB>); break;
      case 16: go(sample_keys_kernel<T, L2, 16, QB>); break;
      default: go(sample_keys_kernel<T, L2, 32, QB>); break;
    }
  };
  qb == 1 ? by_lanes(std::integral_constant<int, 1>{}) : by_lanes(std::integral_constant<int, 4>{});
}

}  // namespace

uint32_t scan_sample_count(const StoreRef& s, uint32_t kc, uint32_t queries, bool costly_offers) {
  static const bool off = env_int("MNEMO_SCAN_SAMPLE", 1) == 0;
  // Register lists (k <= 32) admit cheaply and their tail bounds itself,
  // unless an offer costs a re-score (the tensor-core scan): then a
  // smaller sample (its selection is the sampling's larger part) still
  // leaves a few offers a warp.
  if (off || (kc <= 32 && !costly_offers)) return 0;
  // One row in 128: the sample reads under 1% of the store, and about
  // 128 * kc rows are offered to the lists. Stores under 512 * kc rows
  // are not sampled (their lists see few rows each). MNEMO_SCAN_SAMPLE_DIV
  // sets another share (one row in N, for measuring).
  static const uint32_t div = static_cast<uint32_t>(env_positive("MNEMO_SCAN_SAMPLE_DIV", 128));
  // Long lists' samples are capped, the cap set by what an offer costs
  // against a sampled row. One query: 16,384 (an offer costs about 0.15
  // ns, a sampled row 0.7; at 32,768 and 57,344 one query over 8.4M rows
  // of 64 x f16, k = 100, took 8 and 24 us longer on the H200). Several
  // queries a pass: as many as the selection holds (57,344 on H100 and
  // H200): their scans hold two blocks an SM and an offer stalls them
  // longer. Four queries at k = 100 over 1 GB, H200, against 16,384: 64 x
  // f16 0.613 ms against 0.775, 128 x f16 0.522 against 0.649, 32 x f16
  // 1.08 against 2.34, 64 x bf16 0.623 against 0.798; over 4 GB of 64 x
  // f16 1.83 against 2.63. MNEMO_SCAN_SAMPLE_MAX sets the cap (for
  // measuring).
  static const int forced_cap = env_int("MNEMO_SCAN_SAMPLE_MAX", 0);
  const uint32_t most = sample_bound_most();
  const uint32_t cap_long = forced_cap > 0 ? static_cast<uint32_t>(forced_cap) : queries > 1 ? most : 16384u;
  // At most `most`, so the selection always holds it.
  const uint32_t count = std::min({s.slots / div, kc <= 32 ? 4096u : cap_long, most});
  return count < 4 * kc ? 0 : count;
}

void launch_scan_sample(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t kc,
                        uint32_t count, int lanes, float* keys, unsigned* bound, cudaStream_t st) {
  const unsigned rows_a_block = kScanWarps * (32 / lanes);
  const unsigned blocks = std::max(1u, (count + rows_a_block - 1) / rows_a_block);
  const bool l2 = s.metric == KeyMetric::l2;
  switch (s.dtype) {
    case DType::f16:
      (l2 ? launch_typed<__half, true> : launch_typed<__half, false>)(s, queries, qnorms, nq, count, lanes, keys, bound,
                                                                      blocks, st);
      break;
    case DType::bf16:
      (l2 ? launch_typed<__nv_bfloat16, true> : launch_typed<__nv_bfloat16, false>)(s, queries, qnorms, nq, count,
                                                                                    lanes, keys, bound, blocks, st);
      break;
    default:
      (l2 ? launch_typed<float, true> : launch_typed<float, false>)(s, queries, qnorms, nq, count, lanes, keys, bound,
                                                                    blocks, st);
      break;
  }
  MNEMO_CUDA_LAUNCHED("sample_keys_kernel");
  launch_sample_bound(keys, count, nq, kc, bound, st);
}

}  // namespace mnemo::cuda
