// Exact keys of every slot for up to 4 queries a pass, written to
// keys[q][slot]: the large-k selection, exact similarity matrices and
// activation rankings read them. The inner loop and its order of operations
// are the fused scan's (row_dot.cuh), so a key here has the bits the scan
// would give; like the scan, each warp reads two rows a step with the row
// length known at compile time for the common widths, which keeps a dozen
// 16-byte loads in flight per lane (one row a step with a run-time trip
// count ran 8% under the scan's bandwidth at 1M x 768 f32). Rows of up to
// 16 vectors are read by groups of LPR lanes, 32 / LPR rows a warp at once,
// as the short-row scan reads them (same bits, row_dot.cuh): a whole warp
// on a 128-byte row left three lanes in four idle and reduced over all 32.
#include <algorithm>
#include <type_traits>

#include "scan/row_dot.cuh"
#include "scan/scan_tail.cuh"

namespace mnemo::cuda {

namespace {

constexpr int kWarps = kScanWarps;
constexpr int kThreads = kScanThreads;

template <class T, bool L2, int NVEC, int QB, bool ACT, int LPR = 32>
__global__ void __launch_bounds__(kThreads)
    score_rows_kernel(StoreRef s, const float* __restrict__ queries, const float* __restrict__ qnorms, uint32_t nq,
                      float* __restrict__ keys) {
  static_assert(LPR >= QB, "a group's lane q writes query q's key");
  constexpr int RPW = 32 / LPR;  // rows a warp reads at once
  extern __shared__ __align__(16) unsigned char smem[];
  float* qs = reinterpret_cast<float*>(smem);
  for (uint64_t i = threadIdx.x; i < QB * s.ld; i += kThreads) qs[i] = i / s.ld < nq ? queries[i] : 0.0f;
  __syncthreads();
  const int warp = threadIdx.x / 32, grp = threadIdx.x % 32 / LPR, lane = threadIdx.x % LPR;
  const size_t row_bytes = s.ld * sizeof(T);
  const auto* base = static_cast<const unsigned char*>(s.vectors);
  const uint32_t stride = gridDim.x * kWarps * RPW;
  // Rows past the end re-read the store's first row and are not written
  // (a group's loop runs as long as its warp's: the reduction's shuffles
  // take every lane).
  constexpr int R = 2;
  for (uint32_t row0 = (blockIdx.x * kWarps + warp) * RPW; row0 < s.slots; row0 += R * stride) {
    const uint32_t row = row0 + grp;
    uint32_t slot[R];
    bool have[R];
    SlotMeta m[R];
    const unsigned char* rows[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint32_t x = row + r * stride;
      have[r] = x < s.slots;
      slot[r] = have[r] ? x : 0u;
      m[r] = slot_meta<ACT>(s, slot[r]);
      rows[r] = base + slot[r] * row_bytes;
    }
    float acc[R][QB];
    row_sums<T, L2, NVEC, QB, R, LPR>(rows, qs, s.ld, lane, acc);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      // Lane q writes query q's key (every lane holds every sum).
      if (!have[r] || lane >= QB || lane >= static_cast<int>(nq)) continue;
      float v = acc[r][0];
#pragma unroll
      for (int q = 1; q < QB; ++q)
        if (lane == q) v = acc[r][q];
      keys[static_cast<uint64_t>(lane) * s.slots + slot[r]] =
          m[r].live ? key_of<ACT>(s, v, qnorms[lane], m[r]) : __int_as_float(0x7fc00000);
    }
  }
}

template <class T, bool L2, int QB, bool ACT>
void launch_width(const StoreRef& s, const float* q, const float* qn, uint32_t n, float* out, unsigned blocks,
                  cudaStream_t st) {
  const size_t smem = QB * s.ld * 4;
  auto go = [&](auto kernel) {
    if (smem > 48 * 1024)
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
            "score smem");
    kernel<<<blocks, kThreads, smem, st>>>(s, q, qn, n, out);
  };
  constexpr int V = Vec16<T>::kElems;
  // Short rows: groups of lanes (plain keys; activation rankings keep a
  // warp a row, fewer instances).
  const int lanes = ACT ? 0 : scan_lanes(s);
  if constexpr (!ACT) {
    if (lanes == 4) return go(score_rows_kernel<T, L2, 0, QB, ACT, 4>);
    if (lanes == 8) return go(score_rows_kernel<T, L2, 0, QB, ACT, 8>);
    if (lanes == 16) return go(score_rows_kernel<T, L2, 0, QB, ACT, 16>);
  }
  // Activation rankings keep the run-time trip count (fewer instances).
  if constexpr (ACT) {
    go(score_rows_kernel<T, L2, 0, QB, ACT>);
  } else {
    switch (s.ld) {
      case 384: go(score_rows_kernel<T, L2, 384 / V, QB, ACT>); break;
      case 512: go(score_rows_kernel<T, L2, 512 / V, QB, ACT>); break;
      case 768: go(score_rows_kernel<T, L2, 768 / V, QB, ACT>); break;
      case 1024: go(score_rows_kernel<T, L2, 1024 / V, QB, ACT>); break;
      case 1536: go(score_rows_kernel<T, L2, 1536 / V, QB, ACT>); break;
      default: go(score_rows_kernel<T, L2, 0, QB, ACT>); break;
    }
  }
}

}  // namespace

void launch_score_rows(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, float* keys,
                       unsigned sm_count, cudaStream_t st) {
  const unsigned blocks = scan_blocks(s, sm_count);
  const bool l2 = s.metric == KeyMetric::l2;
  for (uint32_t q0 = 0; q0 < nq; q0 += 4) {
    const uint32_t n = std::min<uint32_t>(4, nq - q0);
    const float* q = queries + q0 * s.ld;
    float* out = keys + static_cast<uint64_t>(q0) * s.slots;
    // One query alone does not pay for four queries' arithmetic; plain
    // searches keep the instances without activation.
    auto by_type = [&](auto t, auto l2c) {
      using T = decltype(t);
      constexpr bool L2 = decltype(l2c)::value;
      if (s.act)
        n == 1 ? launch_width<T, L2, 1, true>(s, q, qnorms + q0, n, out, blocks, st)
               : launch_width<T, L2, 4, true>(s, q, qnorms + q0, n, out, blocks, st);
      else
        n == 1 ? launch_width<T, L2, 1, false>(s, q, qnorms + q0, n, out, blocks, st)
               : launch_width<T, L2, 4, false>(s, q, qnorms + q0, n, out, blocks, st);
    };
    using L2t = std::true_type;
    using L2f = std::false_type;
    switch (s.dtype) {
      case DType::f16: l2 ? by_type(__half{}, L2t{}) : by_type(__half{}, L2f{}); break;
      case DType::bf16: l2 ? by_type(__nv_bfloat16{}, L2t{}) : by_type(__nv_bfloat16{}, L2f{}); break;
      default: l2 ? by_type(float{}, L2t{}) : by_type(float{}, L2f{}); break;
    }
    MNEMO_CUDA_LAUNCHED("score_rows_kernel");
  }
}

}  // namespace mnemo::cuda
