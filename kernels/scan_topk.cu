// One pass over the resident store per group of up to 4 queries, fused with
// top-k selection: scores never go to device memory. Each warp keeps its own
// list in shared memory; at the end warp 0 merges the block's lists and the
// block writes k candidates per query.
#include <algorithm>

#include "row_dot.cuh"

namespace mnemo::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

struct ScanSmem {
  // Shared-memory layout: queries [QB][ld] f32, then lists [warps][QB][k], then counts.
  static size_t bytes(int qb, uint64_t ld, uint32_t k) {
    return qb * ld * 4 + static_cast<size_t>(kWarps) * qb * k * sizeof(Cand) + kWarps * qb * sizeof(int);
  }
};

template <class T, bool L2, int NVEC, int QB>
__global__ void __launch_bounds__(kThreads)
    scan_topk_kernel(StoreRef s, const float* __restrict__ queries, const float* __restrict__ qnorms, uint32_t nq,
                     uint32_t k, Cand* __restrict__ cand) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* qs = reinterpret_cast<float*>(smem);
  Cand* lists = reinterpret_cast<Cand*>(qs + QB * s.ld);
  int* counts = reinterpret_cast<int*>(lists + kWarps * QB * k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  for (uint64_t i = threadIdx.x; i < QB * s.ld; i += kThreads) {
    const uint64_t q = i / s.ld;
    qs[i] = q < nq ? queries[i] : 0.0f;
  }
  __syncthreads();

  WarpList wl[QB];
  float qn[QB];
#pragma unroll
  for (int q = 0; q < QB; ++q) {
    wl[q] = WarpList{lists + (warp * QB + q) * k, static_cast<int>(k), 0};
    qn[q] = q < static_cast<int>(nq) ? qnorms[q] : 0.0f;
  }
  const size_t row_bytes = s.ld * sizeof(T);
  const auto* base = static_cast<const unsigned char*>(s.vectors);
  const uint32_t stride = gridDim.x * kWarps;
  // R rows per step (rows past the end re-read the first and are not
  // offered), slot metadata loaded ahead of the rows. Measured on the H200:
  // two rows beat one; four were slower for f16 at 768 (0.69 vs 0.52 ms).
  constexpr int R = 2;
  for (uint32_t row = blockIdx.x * kWarps + warp; row < s.slots; row += R * stride) {
    uint32_t slot[R];
    SlotMeta m[R];
    const unsigned char* rows[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint32_t x = row + r * stride;
      slot[r] = x < s.slots ? x : row;
      m[r] = slot_meta(s, slot[r]);
      m[r].live = m[r].live && x < s.slots;
      rows[r] = base + slot[r] * row_bytes;
    }
    float acc[R][QB];
    row_sums<T, L2, NVEC, QB, R>(rows, qs, s.ld, lane, acc);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (!m[r].live) continue;
#pragma unroll
      for (int q = 0; q < QB; ++q) {
        if (q >= static_cast<int>(nq)) break;
        const float key = key_of(s.metric, acc[r][q], qn[q], m[r]);
        if (wl[q].admits(key, slot[r], s.ids)) wl[q].insert(key, slot[r], s.ids, lane);
      }
    }
  }
  if (lane == 0)
    for (int q = 0; q < QB; ++q) counts[warp * QB + q] = wl[q].n;
  __syncthreads();
  if (warp != 0) return;
  for (int q = 0; q < static_cast<int>(nq) && q < QB; ++q) {
    WarpList& m = wl[q];
    for (int w = 1; w < kWarps; ++w) {
      const Cand* other = lists + (w * QB + q) * k;
      const int n = counts[w * QB + q];
      for (int base_j = 0; base_j < n; base_j += 32) {
        const int j = base_j + lane;
        const bool has = j < n;
        const Cand c = has ? other[j] : Cand{0.0f, 0};
        m.offer(has, c.key, c.slot, s.ids, lane);
      }
    }
    Cand* out = cand + (static_cast<uint64_t>(q) * gridDim.x + blockIdx.x) * k;
    for (uint32_t j = lane; j < k; j += 32)
      out[j] = static_cast<int>(j) < m.n ? m.c[j] : Cand{__int_as_float(0x7fc00000), 0xffffffffu};
  }
}

template <class T, bool L2, int QB>
__global__ void __launch_bounds__(kThreads)
    score_rows_kernel(StoreRef s, const float* __restrict__ queries, const float* __restrict__ qnorms, uint32_t nq,
                      float* __restrict__ keys) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* qs = reinterpret_cast<float*>(smem);
  for (uint64_t i = threadIdx.x; i < QB * s.ld; i += kThreads) qs[i] = i / s.ld < nq ? queries[i] : 0.0f;
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const size_t row_bytes = s.ld * sizeof(T);
  const auto* base = static_cast<const unsigned char*>(s.vectors);
  for (uint32_t row = blockIdx.x * kWarps + warp; row < s.slots; row += gridDim.x * kWarps) {
    const SlotMeta m = slot_meta(s, row);
    const unsigned char* rows[1] = {base + row * row_bytes};
    float acc[1][QB];
    row_sums<T, L2, 0, QB, 1>(rows, qs, s.ld, lane, acc);
    if (lane < QB && lane < static_cast<int>(nq)) {
      float v = acc[0][0];
#pragma unroll
      for (int q = 1; q < QB; ++q)
        if (lane == q) v = acc[0][q];
      keys[static_cast<uint64_t>(lane) * s.slots + row] =
          m.live ? key_of(s.metric, v, qnorms[lane], m) : __int_as_float(0x7fc00000);
    }
  }
}

// Dimension-specialised trip counts: NVEC = 16-byte vectors per row.
template <class T, bool L2, int QB>
void dispatch_scan(const StoreRef& s, const float* q, const float* qn, uint32_t nq, uint32_t k, Cand* cand,
                   unsigned blocks, size_t smem, cudaStream_t st) {
  constexpr int V = Vec16<T>::kElems;
  auto go = [&](auto kernel) {
    if (smem > 48 * 1024)
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
            "scan smem");
    kernel<<<blocks, kThreads, smem, st>>>(s, q, qn, nq, k, cand);
  };
  switch (s.ld) {
    case 384: go(scan_topk_kernel<T, L2, 384 / V, QB>); break;
    case 512: go(scan_topk_kernel<T, L2, 512 / V, QB>); break;
    case 768: go(scan_topk_kernel<T, L2, 768 / V, QB>); break;
    case 1024: go(scan_topk_kernel<T, L2, 1024 / V, QB>); break;
    case 1536: go(scan_topk_kernel<T, L2, 1536 / V, QB>); break;
    default: go(scan_topk_kernel<T, L2, 0, QB>); break;
  }
}

template <class T, bool L2>
void dispatch_qb(const StoreRef& s, const float* q, const float* qn, uint32_t nq, uint32_t k, Cand* cand,
                 unsigned blocks, cudaStream_t st) {
  const int qb = nq <= 1 ? 1 : nq <= 2 ? 2 : 4;
  const size_t smem = ScanSmem::bytes(qb, s.ld, k);
  if (qb == 1)
    dispatch_scan<T, L2, 1>(s, q, qn, nq, k, cand, blocks, smem, st);
  else if (qb == 2)
    dispatch_scan<T, L2, 2>(s, q, qn, nq, k, cand, blocks, smem, st);
  else
    dispatch_scan<T, L2, 4>(s, q, qn, nq, k, cand, blocks, smem, st);
}

}  // namespace

unsigned scan_blocks(const StoreRef& s, unsigned sm_count) {
  // Enough blocks to fill every SM several times over, but no more than
  // there are rows to give each warp a few.
  // At least 16 rows per warp: fewer blocks means fewer candidate lists to
  // merge, which is what small stores pay for.
  const unsigned want = sm_count * 4;
  const unsigned by_rows = ceil_div(std::max<uint32_t>(s.slots, 1), kWarps * 16);
  return std::max(1u, std::min(want, by_rows));
}

unsigned launch_scan_topk(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t k,
                          Cand* cand, unsigned blocks_wanted, cudaStream_t st) {
  const unsigned blocks = std::max(1u, blocks_wanted);
  const bool l2 = s.metric == KeyMetric::l2;
  switch (s.dtype) {
    case DType::f16:
      l2 ? dispatch_qb<__half, true>(s, queries, qnorms, nq, k, cand, blocks, st)
         : dispatch_qb<__half, false>(s, queries, qnorms, nq, k, cand, blocks, st);
      break;
    case DType::bf16:
      l2 ? dispatch_qb<__nv_bfloat16, true>(s, queries, qnorms, nq, k, cand, blocks, st)
         : dispatch_qb<__nv_bfloat16, false>(s, queries, qnorms, nq, k, cand, blocks, st);
      break;
    default:
      l2 ? dispatch_qb<float, true>(s, queries, qnorms, nq, k, cand, blocks, st)
         : dispatch_qb<float, false>(s, queries, qnorms, nq, k, cand, blocks, st);
      break;
  }
  MNEMO_CUDA_LAUNCHED("scan_topk_kernel");
  return blocks;
}

void launch_score_rows(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, float* keys,
                       unsigned sm_count, cudaStream_t st) {
  const unsigned blocks = scan_blocks(s, sm_count);
  const bool l2 = s.metric == KeyMetric::l2;
  for (uint32_t q0 = 0; q0 < nq; q0 += 4) {
    const uint32_t n = std::min<uint32_t>(4, nq - q0);
    const size_t smem = 4 * s.ld * 4;
    const float* q = queries + q0 * s.ld;
    float* out = keys + static_cast<uint64_t>(q0) * s.slots;
    auto go = [&](auto kernel) {
      if (smem > 48 * 1024)
        check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
              "score smem");
      kernel<<<blocks, kThreads, smem, st>>>(s, q, qnorms + q0, n, out);
    };
    switch (s.dtype) {
      case DType::f16: l2 ? go(score_rows_kernel<__half, true, 4>) : go(score_rows_kernel<__half, false, 4>); break;
      case DType::bf16:
        l2 ? go(score_rows_kernel<__nv_bfloat16, true, 4>) : go(score_rows_kernel<__nv_bfloat16, false, 4>);
        break;
      default: l2 ? go(score_rows_kernel<float, true, 4>) : go(score_rows_kernel<float, false, 4>); break;
    }
    MNEMO_CUDA_LAUNCHED("score_rows_kernel");
  }
}

}  // namespace mnemo::cuda
