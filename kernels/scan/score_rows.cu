// Exact keys of every slot for up to 4 queries a pass, written to
// keys[q][slot]: the large-k selection, exact similarity matrices and
// activation rankings read them. The inner loop and its order of operations
// are the fused scan's (row_dot.cuh), so a key here has the bits the scan
// would give; like the scan, each warp reads two rows a step (four for
// rows of up to 64 vectors) with the row length known at compile time for
// the common widths, which keeps a dozen 16-byte loads in flight per lane
// (one row a step with a run-time trip count ran 8% under the scan's
// bandwidth at 1M x 768 f32). Rows of up to 16 vectors are read by groups
// of LPR lanes, 32 / LPR rows a warp at once, as the short-row scan reads
// them (same bits, row_dot.cuh), by a kernel of their own for plain keys
// (score_short_kernel) and by the generic loop for activation rankings.
#include <algorithm>
#include <type_traits>

#include "device/device_caps.h"
#include "device/env_knob.h"
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
  // Rows of up to 64 vectors with the trip count compiled in (16-bit rows
  // of 384 and 512) read four rows a step: at two a lane had three or four
  // loads in flight (one query over 1 GiB of 384-wide f16 at k = 1000 ran
  // at 48% of the floor), and four queries reread their slices from shared
  // memory for every two rows.
  constexpr int R = NVEC > 0 && NVEC <= 64 && LPR == 32 ? 4 : 2;
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

// Rows of at most LPR vectors (LPR < 32): lane l of a group reads vector l
// of its row, so its slice of each query is fixed and stays in registers
// (the generic loop above reads it from shared memory for every row: four
// queries' slices cost as many shared-memory bytes as the rows' global
// ones), and each lane keeps R rows' loads in flight, all issued before any
// is used. Same order of operations as row_sums with one vector a lane,
// hence the same bits. Measured on the H200 (1 GiB of f16 rows, k = 1000,
// GPU ms of the whole search, the generic loop -> this kernel, a process
// each): one query over 64 / 128-wide rows 0.575 -> 0.443 / 0.543 -> 0.421,
// four queries 0.891 -> 0.754 / 0.975 -> 0.674. Its pass runs at 67% of
// DRAM for one query (Nsight Compute); steps of consecutive rows with an L2
// prefetch of the next step measured no faster.
template <class T, bool L2, int QB, int LPR, int R>
__global__ void __launch_bounds__(kThreads)
    score_short_kernel(StoreRef s, const float* __restrict__ queries, const float* __restrict__ qnorms, uint32_t nq,
                       float* __restrict__ keys) {
  static_assert(LPR >= QB && LPR < 32, "a group's lane q writes query q's key");
  constexpr int V = Vec16<T>::kElems;
  constexpr int RPW = 32 / LPR;
  const int warp = threadIdx.x / 32, grp = threadIdx.x % 32 / LPR, lane = threadIdx.x % LPR;
  const uint32_t nvec = static_cast<uint32_t>(s.ld / V);
  const bool mine = static_cast<uint32_t>(lane) < nvec;
  float qr[QB][V];
#pragma unroll
  for (int q = 0; q < QB; ++q)
#pragma unroll
    for (int e = 0; e < V; ++e)
      qr[q][e] = mine && static_cast<uint32_t>(q) < nq ? queries[q * s.ld + lane * V + e] : 0.0f;
  const size_t row_bytes = s.ld * sizeof(T);
  const auto* base = static_cast<const unsigned char*>(s.vectors) + static_cast<size_t>(mine ? lane : 0) * 16;
  const uint32_t stride = gridDim.x * kWarps * RPW;
  for (uint32_t row0 = (blockIdx.x * kWarps + warp) * RPW; row0 < s.slots; row0 += R * stride) {
    uint4 raw[R];
    uint32_t slot[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint32_t x = row0 + grp + r * stride;
      slot[r] = x < s.slots ? x : 0u;
      raw[r] = __ldg(reinterpret_cast<const uint4*>(base + slot[r] * row_bytes));
    }
    SlotMeta m[R];
#pragma unroll
    for (int r = 0; r < R; ++r) m[r] = slot_meta<false>(s, slot[r]);
    float acc[R][QB];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float x[V];
      Vec16<T>::widen(raw[r], x);
#pragma unroll
      for (int q = 0; q < QB; ++q) {
        acc[r][q] = 0.0f;
        if (mine) {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            if (L2) {
              const float d = x[e] - qr[q][e];
              acc[r][q] = fmaf(d, d, acc[r][q]);
            } else {
              acc[r][q] = fmaf(x[e], qr[q][e], acc[r][q]);
            }
          }
        }
#pragma unroll
        for (int off = LPR / 2; off > 0; off >>= 1) acc[r][q] += __shfl_xor_sync(kFullMask, acc[r][q], off);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint32_t x = row0 + grp + r * stride;
      if (x >= s.slots || lane >= QB || lane >= static_cast<int>(nq)) continue;
      float v = acc[r][0];
#pragma unroll
      for (int q = 1; q < QB; ++q)
        if (lane == q) v = acc[r][q];
      keys[static_cast<uint64_t>(lane) * s.slots + x] =
          m[r].live ? key_of<false>(s, v, qnorms[lane], m[r]) : __int_as_float(0x7fc00000);
    }
  }
}

// At most the blocks the SMs hold at once (registers, shared memory), and
// no more than `wanted`: each block's rows are fixed at launch, so a block
// past the wave would run after it.
template <class K>
unsigned wave_grid(K kernel, size_t smem, unsigned sm_count, unsigned wanted) {
  const int resident = resident_grid(reinterpret_cast<const void*>(kernel), kThreads, smem, smem);
  return std::max(1u, std::min(wanted, resident > 0 ? static_cast<unsigned>(resident) : sm_count));
}

// MNEMO_SCORE_SHORT=0 sends short rows to the generic loop (for measuring).
bool score_short_on() {
  static const bool on = env_int("MNEMO_SCORE_SHORT", 1) != 0;
  return on;
}

template <class T, bool L2, int QB, bool ACT>
void launch_width(const StoreRef& s, const float* q, const float* qn, uint32_t n, float* out, unsigned blocks,
                  unsigned sm_count, cudaStream_t st) {
  const size_t smem = QB * s.ld * 4;
  auto go = [&](auto kernel) {
    // Four queries' instances hold two or three blocks an SM (wave_grid
    // raises the shared-memory limit past 48 KB).
    const unsigned grid = wave_grid(kernel, smem, sm_count, blocks);
    kernel<<<grid, kThreads, smem, st>>>(s, q, qn, n, out);
  };
  constexpr int V = Vec16<T>::kElems;
  // Short rows: groups of lanes (plain keys; activation rankings keep a
  // warp a row, fewer instances).
  const int lanes = ACT ? 0 : scan_lanes(s);
  if constexpr (!ACT) {
    if (lanes > 0 && lanes < 32 && score_short_on()) {
      // Four queries' slices and accumulators take the registers of four
      // rows in flight; one query's leave room for eight.
      constexpr int R = QB == 1 ? 8 : 4;
      auto go_short = [&](auto lpr) {
        constexpr int LPR = decltype(lpr)::value;
        // Each warp at least two steps of R rows a group.
        const uint64_t rows_per_block = static_cast<uint64_t>(kWarps) * (32 / LPR) * R * 2;
        const auto by_rows = static_cast<unsigned>((s.slots + rows_per_block - 1) / rows_per_block);
        const auto kernel = score_short_kernel<T, L2, QB, LPR, R>;
        kernel<<<wave_grid(kernel, 0, sm_count, by_rows), kThreads, 0, st>>>(s, q, qn, n, out);
      };
      if (lanes == 4) return go_short(std::integral_constant<int, 4>{});
      if (lanes == 8) return go_short(std::integral_constant<int, 8>{});
      return go_short(std::integral_constant<int, 16>{});
    }
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
        n == 1 ? launch_width<T, L2, 1, true>(s, q, qnorms + q0, n, out, blocks, sm_count, st)
               : launch_width<T, L2, 4, true>(s, q, qnorms + q0, n, out, blocks, sm_count, st);
      else
        n == 1 ? launch_width<T, L2, 1, false>(s, q, qnorms + q0, n, out, blocks, sm_count, st)
               : launch_width<T, L2, 4, false>(s, q, qnorms + q0, n, out, blocks, sm_count, st);
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
