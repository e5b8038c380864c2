// Query batches over long rows (sm_90 and later; FAST, and EXACT over f32
// rows): a tensor-core GEMM whose epilogue selects, for rows whose queries
// do not fit in registers (the short-row kernel's layout).
// - A block computes tiles of 128 store rows x 112 queries. One producer
//   thread streams each tile as 128-byte slabs of K: the store rows' slab
//   and the queries' slab side by side in one stage (TMA tensor copies,
//   128-byte swizzle, zero fill past the store, the queries and the row).
//   The queries' slabs come from L2, where the whole batch stays.
// - Eight consumer warps each hold a 32 x 56 block of the tile's dot
//   products in registers over all of K. FAST on sm_90a: each warpgroup
//   issues two m64 x n56 warpgroup MMAs a k-step, both operands read from
//   the stage through shared-memory descriptors (1000q x 1M x 768 f32 on an
//   H100: 7.9 ms against 9.6 with the warp MMAs). Otherwise (EXACT, whose
//   split operands live in registers, and devices without sm_90a code):
//   2 x 7 warp MMA tiles, 14 MMAs per five and a half ldmatrix per k-step.
// - The epilogue filters keys against per-query thresholds held in
//   registers; the few that pass go to a per-query queue in shared memory,
//   and after a block-wide vote the warp that owns a query (14 per warp)
//   merges its queue into the query's sorted list. Tiles where nothing
//   passes (nearly all, once the lists fill) cost one vote.
// - Thresholds are shared between the chunks of a query through device
//   memory, as in the short-row kernel.
// - EXACT: split-TF32 MMAs (warp_k_step) choose the candidates.
// The chunk lists are merged and re-scored exactly afterwards, as for the
// other batch paths.
#include <algorithm>
#include <cstdlib>
#include <cuda/ptx>

#include "batch/chunk_list.cuh"
#include "batch/fused_chunks.h"
#include "batch/fused_wide.h"
#include "batch/mma_frag.cuh"
#include "batch/sample_bound.h"
#include "batch/stage_barriers.cuh"
#include "batch/wgmma.cuh"
#include "device/device_caps.h"
#include "device/env_knob.h"
#include "device/tensor_map.h"
#include "select/overflow_rank.cuh"

namespace mnemo::cuda {

namespace {

namespace ptx = ::cuda::ptx;

constexpr int kConsumers = 8;
constexpr int kThreads = (kConsumers + 1) * 32;  // the consumers and one producer warp
constexpr uint32_t kStages = 4;
constexpr uint32_t kRows = 128;                  // store rows per tile
constexpr uint32_t kQueries = kWideTileQueries;  // queries per block: 14 n-tiles of 8
constexpr uint32_t kASlab = kRows * 128, kBSlab = kQueries * 128;
constexpr uint32_t kStageBytes = kASlab + kBSlab;  // both 1024-byte multiples, as the swizzle requires
constexpr int kMT = 2;                             // m-tiles (16 rows) per warp
constexpr int kNT = 7;                             // n-tiles (8 queries) per warp
constexpr uint32_t kWarpRows = kMT * 16, kWarpQueries = kNT * 8;
[[maybe_unused]] constexpr uint32_t kOwned = kQueries / kConsumers;  // lists each warp keeps
static_assert(kWarpRows * 4 == kRows && kWarpQueries * 2 == kQueries, "8 warps as 4 row groups x 2 query groups");

// Shared memory in bytes: the stages, each stage's slot terms, the full and
// empty barriers, the lists [queries][kc], their fill counts, the block's
// thresholds, the queues' fill counts and the queues [queries][kRows] of
// keys and of rows in the tile. The base is rounded up to 1024 bytes in the
// kernel (hence the slack).
struct WideLayout {
  size_t terms, bars, lists, counts, sth, fill, qkey, qrow, bytes;
  __host__ __device__ explicit WideLayout(uint32_t kc) {
    terms = static_cast<size_t>(kStages) * kStageBytes;
    bars = terms + static_cast<size_t>(kStages) * kRows * 8;
    lists = bars + 2 * kStages * 8;
    counts = lists + static_cast<size_t>(kQueries) * kc * sizeof(Cand);
    sth = counts + kQueries * 4;
    fill = sth + kQueries * 4;
    qkey = fill + kQueries * 4;
    qrow = qkey + static_cast<size_t>(kQueries) * kRows * 4;
    bytes = qrow + static_cast<size_t>(kQueries) * kRows + 1024;
  }
};

// Barriers among consumer warps only (the producer never waits on them): a
// vote, and a plain barrier, over `n` threads at barrier `id`: the block's
// eight consumer warps, or one warpgroup (whose queries' queues and lists
// no other warp touches), so that one warpgroup's merges and waits leave
// the other's MMAs running. Unused where the kernel body is compiled out
// (below sm_90).
[[maybe_unused]] __device__ __forceinline__ bool consumers_any(bool v, uint32_t id, uint32_t n) {
  uint32_t r;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(r)
      : "r"(static_cast<uint32_t>(v)), "r"(id), "r"(n)
      : "memory");
  return r != 0;
}
[[maybe_unused]] __device__ __forceinline__ void consumers_sync(uint32_t id, uint32_t n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

// How the store pass reads other chunks' thresholds (at a tile's start once
// pub_slabs slabs have passed since the last read) and where it votes
// (group_votes: per warpgroup, else over the block's consumers).
struct WidePace {
  uint32_t pub_slabs;
  uint32_t group_votes;
};

// One k-step of a warp's 2 x 7 MMA tiles. SPLIT (f32 rows, EXACT
// searches): three TF32 MMAs per tile, each operand split into a TF32 high
// part and a TF32 remainder (hi*hi + hi*lo + lo*hi; the dropped lo*lo term
// and the remainders' rounding leave about 2^-21 of each product, against
// 2^-10 for one TF32 MMA), so the candidates are chosen by keys close to
// FP32 ones before the exact re-score.
template <class T, bool SPLIT>
__device__ __forceinline__ void warp_k_step(float (&acc)[kMT][kNT][4], const uint32_t (&a)[kMT][4],
                                            const uint32_t (&b)[kNT][2]) {
  if constexpr (SPLIT) {
    uint32_t ah[kMT][4], al[kMT][4], bh[kNT][2], bl[kNT][2];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) split_tf32(a[i][c], ah[i][c], al[i][c]);
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) split_tf32(b[j][c], bh[j][c], bl[j][c]);
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        Mma<float>::mma(acc[i][j], al[i], bh[j]);
        Mma<float>::mma(acc[i][j], ah[i], bl[j]);
        Mma<float>::mma(acc[i][j], ah[i], bh[j]);
      }
  } else {
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int j = 0; j < kNT; ++j) Mma<T>::mma(acc[i][j], a[i], b[j]);
  }
}

// EMIT: long lists (candidates to out; the dense pass where out.dense is
// set), an instantiation of its own so the list kernel keeps its registers.
// MASK: each query's own filter as bits over the slots (QueryMask); a key
// whose bit is clear is NaN, so neither the lists nor the sampled bound
// ever see a row outside the query's filter. An instantiation of its own:
// the mask words held across the tile's MMAs cost the others nothing.
template <class T, bool SPLIT, bool EMIT, bool MASK = false>
__global__ void __launch_bounds__(kThreads, 1)
    fused_wide_kernel(StoreRef s, const float* __restrict__ qnorms, uint32_t nq, const float2* __restrict__ terms,
                      uint32_t kc, uint32_t chunk_slots, uint32_t chunk_rows, uint32_t slabs, Cand* __restrict__ cand,
                      uint64_t cand_stride, unsigned* __restrict__ gth, float* __restrict__ sample, WideCandidates out,
                      const __grid_constant__ CUtensorMap rows, const __grid_constant__ CUtensorMap qmap,
                      QueryMask mask, WidePace pace) {
  static_assert(!(MASK && EMIT), "masks serve the list kernel");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) & 1023)) & 1023);
  const WideLayout L(kc);
  float2* tterm = reinterpret_cast<float2*>(smem + L.terms);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L.bars);
  uint64_t* empty = full + kStages;
  Cand* lists = reinterpret_cast<Cand*>(smem + L.lists);
  int* counts = reinterpret_cast<int*>(smem + L.counts);
  float* sth = reinterpret_cast<float*>(smem + L.sth);
  int* fill = reinterpret_cast<int*>(smem + L.fill);
  float* qkey = reinterpret_cast<float*>(smem + L.qkey);
  uint8_t* qrow = smem + L.qrow;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t q0 = blockIdx.x * kQueries;
  // Chunk blockIdx.y: rows [lo, lo + chunk_slots), of which the first
  // chunk_rows (all of them, or one tile in the sampling pass).
  const uint32_t lo = blockIdx.y * chunk_slots, hi = min(s.slots, lo + min(chunk_slots, chunk_rows));
  const uint32_t tiles = (hi - lo + kRows - 1) / kRows;
  const float ninf = -__int_as_float(0x7f800000), nan = __int_as_float(0x7fc00000);
  // Long lists: candidates go to device memory (EMIT), and the dense pass
  // (every key) runs only for query tiles where a query's candidates
  // overflowed.
  // The pass serves one round of the overflowed queries (WideCandidates):
  // their dense rows in counts[] (free under EMIT, whose lists are empty),
  // -1 for the others.
  if (EMIT && out.dense != nullptr) {
    bool need = false;
    for (uint32_t i = threadIdx.x; i < kQueries; i += kThreads) {
      int row = -1;
      const uint32_t q = q0 + i;
      if (q < nq && out.count[q] > out.cap) {
        const uint32_t r = overflow_rank(out.count, out.cap, q);
        if (r >= out.dense_lo && r - out.dense_lo < out.dense_rows) row = static_cast<int>(r - out.dense_lo);
      }
      counts[i] = row;
      need = need || row >= 0;
    }
    if (!__syncthreads_or(need)) return;
  }

  // Thresholds: what other chunks have published (-inf before any:
  // from_ordered_bits(0) is NaN, which fmaxf drops); NaN past nq, which
  // admits nothing.
  for (uint32_t i = threadIdx.x; i < kQueries; i += kThreads) {
    if (!EMIT) counts[i] = 0;
    fill[i] = 0;
    sth[i] = q0 + i < nq ? fmaxf(ninf, from_ordered_bits(__ldcg(gth + q0 + i))) : nan;
  }
  // Every consumer lane releases its own reads.
  if (threadIdx.x == 0) init_stage_barriers(full, empty, kStages, kConsumers * 32);
  __syncthreads();

  if (warp == kConsumers) {
    // Producer (one thread): step `it` (tile it / slabs, slab it % slabs)
    // into stage it % kStages once the consumers released what the stage
    // held before. The tile's last slab also brings its slot terms (copied
    // in pairs: the terms buffer has room for one past the last slot); the
    // consumers keep that stage until the epilogue has read them.
    if (lane != 0) return;
    uint32_t it = 0;
    for (uint32_t t = 0; t < tiles; ++t) {
      const uint32_t first = lo + t * kRows;
      const uint32_t nt = (min(kRows, hi - first) + 1) & ~1u;
      for (uint32_t sl = 0; sl < slabs; ++sl, ++it) {
        const uint32_t st = it % kStages;
        if (it >= kStages) wait_stage(empty + st, (it / kStages - 1) & 1);
        const bool last = sl + 1 == slabs;
        unsigned char* dst = smem + st * kStageBytes;
        ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, full + st,
                                       kStageBytes + (last ? nt * 8 : 0));
        const int32_t k0 = static_cast<int32_t>(sl * 128 / sizeof(T));
        const int32_t at_rows[2] = {k0, static_cast<int32_t>(first)};
        const int32_t at_queries[2] = {k0, static_cast<int32_t>(q0)};
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst, &rows, at_rows, full + st);
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst + kASlab, &qmap, at_queries, full + st);
        if (last)
          ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, tterm + st * kRows, terms + first, nt * 8,
                             full + st);
      }
    }
    return;
  }

  // Warp (wr, wq), warpgroup wq: block queries wq * 56 + [0, 56), and 32
  // rows of each tile, 16 in each m-tile i: rows i * 64 + wr * 16 + [0, 16)
  // under warpgroup MMAs (two m64 MMAs a warpgroup), wr * 32 + i * 16 +
  // [0, 16) under warp MMAs. Lane (g, t4) holds, per m-tile and n-tile,
  // rows g and g + 8 x query columns 2 t4 and 2 t4 + 1: column (j, e) is
  // query j * 8 + 2 t4 + e of the warp's.
  const int g = lane >> 2, t4 = lane & 3;
  const int wr = warp & 3, wq = warp >> 2;
  const uint32_t cq0 = wq * kWarpQueries;
  // The vote's and the merges' barriers: per warpgroup (ids 1 + wq and 3 +
  // wq) or over all eight consumer warps (ids 1 and 2).
  const uint32_t vote_id = pace.group_votes ? 1 + wq : 1, sync_id = pace.group_votes ? 3 + wq : 2;
  const uint32_t vote_n = pace.group_votes ? 128 : kConsumers * 32;
  // Split TF32 needs its operands in registers: warp MMAs.
  constexpr bool kWg = MNEMO_WGMMA && !SPLIT;
  const auto tile_row = [&](int i, int h) -> uint32_t {
    return kWg ? i * 64 + wr * 16 + g + 8 * h : wr * kWarpRows + 16 * i + g + 8 * h;
  };
  float qs[kNT][2], th[kNT][2];
#pragma unroll
  for (int j = 0; j < kNT; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const uint32_t ql = cq0 + j * 8 + 2 * t4 + e, q = q0 + ql;
      float sc = 1.0f;
      if (s.metric == KeyMetric::cosine) sc = q < nq && qnorms[q] != 0.0f ? 1.0f / qnorms[q] : 0.0f;
      qs[j][e] = sc;
      th[j][e] = sth[ql];
    }

  // ldmatrix row addresses. A (store rows, m-tile i): lanes 8m..8m+7 give
  // matrix m, rows 0-7 / 8-15 by m & 1, bytes 0-15 / 16-31 of the k-step by
  // m >> 1. B (queries, n-tiles 2p and 2p + 1): matrix m is n-tile 2p +
  // (m >> 1), bytes by m & 1; the seventh n-tile alone through lanes 0-15.
  // The swizzle stores 16-byte chunk c of row r at chunk c ^ (r % 8), and
  // r % 8 = lane % 8 for every address here. Over f32 rows in FAST mode the
  // words go to the TF32 MMA unrounded (the unit reads the TF32 bits of
  // each): only candidates are chosen here.
  const uint32_t sbase = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint32_t aoff[kMT], boff[4], ca[4], cb[4];
#pragma unroll
  for (int i = 0; i < kMT; ++i) aoff[i] = (wr * kWarpRows + 16 * i + ((lane >> 3) & 1) * 8 + (lane & 7)) * 128;
#pragma unroll
  for (int p = 0; p < 3; ++p) boff[p] = kASlab + (cq0 + 16 * p + (lane >> 4) * 8 + (lane & 7)) * 128;
  boff[3] = kASlab + (cq0 + 48 + (lane & 7)) * 128;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    ca[c] = (((2 * c + (lane >> 4)) ^ (lane & 7)) & 7) * 16;
    cb[c] = (((2 * c + ((lane >> 3) & 1)) ^ (lane & 7)) & 7) * 16;
  }
  const uint32_t own0 = warp * kOwned;

  // The sampling pass's largest key per query over the lane's rows (NaN:
  // none yet), so every value it writes is the key of a distinct row.
  float smax[kNT][2];
#pragma unroll
  for (int j = 0; j < kNT; ++j) smax[j][0] = smax[j][1] = nan;
  uint32_t it = 0, next_pub = 0;
  for (uint32_t t = 0; t < tiles; ++t) {
    const uint32_t first = lo + t * kRows;
    const uint32_t n = min(kRows, hi - first);
    // Other chunks' thresholds, loaded now and applied after the tile (the
    // loads' latency hides behind its MMAs), once pace.pub_slabs slabs have
    // passed since the last read: every warp of every block reads the same
    // words, and over short rows, loaded each tile, they queued on their L2
    // lines (10.5M x 192 f16, 112 queries: their first use held 14% of the
    // stall samples, and a pass took 3.0 ms against 2.07 read every eighth
    // tile), while over long rows a tile's MMAs space them out and the
    // sooner a threshold rises the fewer keys pass. The emitting pass keeps
    // its sampled bound (nothing raises it), so it loads none. A threshold
    // read later is still a bound that every chunk holds.
    unsigned pub[kNT][2];
    const bool load_pub = !EMIT && it >= next_pub;
    if (load_pub) next_pub = it + pace.pub_slabs;
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const uint32_t q = q0 + cq0 + j * 8 + 2 * t4 + e;
        pub[j][e] = load_pub && q < nq ? __ldcg(gth + q) : 0u;
      }
    // The mask word of each m-tile's 16 rows (one aligned 32-row word:
    // tiles start at multiples of kRows) for each of the lane's queries,
    // loaded now for the epilogue.
    [[maybe_unused]] uint32_t mw[kMT][kNT][2];
    if constexpr (MASK) {
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const uint32_t q = q0 + cq0 + j * 8 + 2 * t4 + e;
            const uint64_t w = (first + tile_row(i, 0)) >> 5;
            mw[i][j][e] = q < nq ? __ldg(mask.words + w * mask.stride + q) : 0u;
          }
    }
    float acc[kMT][kNT][4];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;
    uint32_t st = 0;
    for (uint32_t sl = 0; sl < slabs; ++sl, ++it) {
      st = it % kStages;
      wait_stage(full + st, (it / kStages) & 1);
      const uint32_t base = sbase + st * kStageBytes;
      if constexpr (kWg) {
        // The warpgroup's 128 rows x 56 queries over the slab: four k-steps
        // of two m64 MMAs, both operands read from the stage as the tensor
        // copies left it; the group waits for them before the release
        // (the other warpgroup's MMAs keep the unit busy meanwhile).
        float(&d0)[28] = reinterpret_cast<float(&)[28]>(acc[0]);
        float(&d1)[28] = reinterpret_cast<float(&)[28]>(acc[1]);
        wg_pin(d0);
        wg_pin(d1);
        wg_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          const uint64_t b = wg_desc(base + kASlab + cq0 * 128 + ks * 32);
          Wgmma<T>::mma(d0, wg_desc(base + ks * 32), b);
          Wgmma<T>::mma(d1, wg_desc(base + 64 * 128 + ks * 32), b);
        }
        wg_commit();
        wg_wait<0>();
        wg_pin(d0);
        wg_pin(d1);
      } else {
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          uint32_t a[kMT][4], b[kNT][2];
#pragma unroll
          for (int i = 0; i < kMT; ++i) ldsm4(a[i][0], a[i][1], a[i][2], a[i][3], base + aoff[i] + ca[ks]);
#pragma unroll
          for (int p = 0; p < 3; ++p)
            ldsm4(b[2 * p][0], b[2 * p][1], b[2 * p + 1][0], b[2 * p + 1][1], base + boff[p] + cb[ks]);
          ldsm2(b[6][0], b[6][1], base + boff[3] + cb[ks]);
          warp_k_step<T, SPLIT>(acc, a, b);
        }
      }
      // This lane has read the stage: release it, except the last slab's,
      // whose terms the epilogue reads.
      if (sl + 1 < slabs) (void)ptx::mbarrier_arrive(empty + st);
    }

    // Keys: fmaf(dot * qscale, a, b) with the slot's terms; rows past the
    // chunk get b = NaN (never admitted, whatever their bits give).
    const float2* m = tterm + st * kRows;
    float sa[kMT][2], sb[kMT][2];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t r = tile_row(i, h);
        const float2 ab = m[r];
        sa[i][h] = ab.x;
        sb[i][h] = r < n ? ab.y : nan;
      }
    (void)ptx::mbarrier_arrive(empty + st);
    // Accumulator x is m-tile i, n-tile j, row half h, column e.
    bool any = false;
#pragma unroll
    for (int x = 0; x < kMT * kNT * 4; ++x) {
      const int i = x / (kNT * 4), j = x / 4 % kNT, h = x / 2 % 2, e = x % 2;
      float& k = acc[i][j][2 * h + e];
      k = fmaf(k * qs[j][e], sa[i][h], sb[i][h]);
      if constexpr (MASK) {
        if (!((mw[i][j][e] >> (tile_row(i, h) & 31)) & 1u)) k = nan;
      }
      any = any || k >= th[j][e];
    }
    if (EMIT && out.dense != nullptr) {
      // Every key of the tile's rows of the chunk, for the overflowed queries'
      // exact selection.
#pragma unroll
      for (int x = 0; x < kMT * kNT * 4; ++x) {
        const int i = x / (kNT * 4), j = x / 4 % kNT, h = x / 2 % 2, e = x % 2;
        const uint32_t r = tile_row(i, h);
        const int row = counts[cq0 + j * 8 + 2 * t4 + e];
        if (r < n && row >= 0) out.dense[static_cast<uint64_t>(row) * s.slots + first + r] = acc[i][j][2 * h + e];
      }
      continue;
    }
    if (sample) {
      // Sampling pass (the chunk's first tiles): per query, the largest key
      // of each lane's four rows of every tile, written after the last.
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e)
#pragma unroll
          for (int r = 0; r < 2 * kMT; ++r) smax[j][e] = fmaxf(smax[j][e], acc[r / 2][j][2 * (r % 2) + e]);
      continue;
    }
    // Keys at or above their query's threshold into its queue (at most one
    // per row of the tile, so a queue never overflows).
    if (__any_sync(kFullMask, any)) {
#pragma unroll
      for (int x = 0; x < kMT * kNT * 4; ++x) {
        const int i = x / (kNT * 4), j = x / 4 % kNT, h = x / 2 % 2, e = x % 2;
        const float k = acc[i][j][2 * h + e];
        if (k >= th[j][e]) {
          const uint32_t ql = cq0 + j * 8 + 2 * t4 + e;
          const int at = atomicAdd(fill + ql, 1);
          qkey[ql * kRows + at] = k;
          qrow[ql * kRows + at] = static_cast<uint8_t>(tile_row(i, h));
        }
      }
    }
    if (consumers_any(any, vote_id, vote_n)) {
      if constexpr (EMIT) {
        // Each warp appends the queues of the queries it owns to their
        // candidates in device memory: one atomic per query reserves the
        // room (lane u for owned query u), then the warp copies each queue.
        const uint32_t ql_l = own0 + lane;
        const int c = lane < static_cast<int>(kOwned) ? fill[ql_l] : 0;
        const uint32_t base = c > 0 ? atomicAdd(out.count + q0 + ql_l, static_cast<uint32_t>(c)) : 0u;
        for (uint32_t u = 0; u < kOwned; ++u) {
          const int cu = __shfl_sync(kFullMask, c, u);
          const uint32_t bu = __shfl_sync(kFullMask, base, u);
          const uint32_t ql = own0 + u;
          const uint64_t o = static_cast<uint64_t>(q0 + ql) * out.cap;
          for (int j = lane; j < cu; j += 32)
            if (bu + j < out.cap) {
              out.keys[o + bu + j] = qkey[ql * kRows + j];
              out.slots[o + bu + j] = first + qrow[ql * kRows + j];
            }
        }
        __syncwarp();
        if (c > 0) fill[ql_l] = 0;
      } else {
        // Each warp merges the queues of the queries it owns into their
        // lists (held one entry per lane meanwhile) and raises their block
        // thresholds.
        for (uint32_t u = 0; u < kOwned; ++u) {
          const uint32_t ql = own0 + u;
          const int c = fill[ql];
          if (c == 0) continue;
          Cand* l = lists + ql * kc;
          RegList rl = load_reg_list(l, counts[ql], static_cast<int>(kc), lane);
          for (int b0 = 0; b0 < c; b0 += 32) {
            const int j = b0 + lane;
            const bool has = j < c;
            const float k = has ? qkey[ql * kRows + j] : 0.0f;
            const uint32_t slot = first + (has ? qrow[ql * kRows + j] : 0u);
            rl.offer(has, k, slot, s.ids, lane);
          }
          // Its warp barrier also orders every lane's read of the queue's
          // count before lane 0 clears it.
          rl.store(l, rl.n, lane);
          if (lane == 0) {
            counts[ql] = rl.n;
            fill[ql] = 0;
            if (rl.n == static_cast<int>(kc)) {
              atomicMax(gth + q0 + ql, ordered_bits(rl.worst_key));
              sth[ql] = fmaxf(sth[ql], rl.worst_key);
            }
          }
        }
      }
      consumers_sync(sync_id, vote_n);
      if constexpr (!EMIT) {
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) th[j][e] = fmaxf(th[j][e], sth[cq0 + j * 8 + 2 * t4 + e]);
      }
    }
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) th[j][e] = fmaxf(th[j][e], from_ordered_bits(pub[j][e]));
  }

  if (sample) {
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const uint32_t q = q0 + cq0 + j * 8 + 2 * t4 + e;
        if (q < nq) sample[static_cast<uint64_t>(q) * gridDim.y * 32 + blockIdx.y * 32 + wr * 8 + g] = smax[j][e];
      }
    return;
  }
  if constexpr (!EMIT) {
    // The owned lists (best first, empty entries after) as this chunk's.
    for (uint32_t u = 0; u < kOwned; ++u) {
      const uint32_t ql = own0 + u, q = q0 + ql;
      if (q >= nq) break;
      store_chunk_list(cand + static_cast<uint64_t>(q) * cand_stride + static_cast<uint64_t>(blockIdx.y) * kc,
                       lists + static_cast<size_t>(ql) * kc, counts[ql], kc, lane);
    }
  }
#else
  // Launched only on sm_90 and later (fused_wide_usable).
  __trap();
#endif
}

// Whether the sampling pass runs first (MNEMO_FUSED_WIDE_SAMPLE=0 turns it
// off, for measuring).
bool sampling_on() {
  static const bool on = env_int("MNEMO_FUSED_WIDE_SAMPLE", 1) != 0;
  return on;
}

// Rows per chunk for `chunks` chunks (whole tiles), and whether the
// sampling pass runs over chunks of per rows: chunks of at least four
// tiles, and the 32 samples of each in the bound kernel's shared memory
// (beside its 1 KB histogram).
uint32_t chunk_rows(uint32_t slots, unsigned chunks) { return ceil_div(ceil_div(slots, chunks), kRows) * kRows; }
bool samples(uint32_t slots, uint32_t per) {
  return sampling_on() && per >= 4 * kRows && sample_bound_fits(ceil_div(slots, per) * 32);
}
// Rows of each chunk the sampling pass reads: 1 / MNEMO_FUSED_WIDE_SAMPLE_DIV
// of its tiles (8 unless set), at least one. A bound from a share f of the
// store's rows lets about kc / f keys a query through afterwards. From one
// tile a chunk, 99.7% of the tiles of 10.5M x 192 f16 admitted keys of
// some of 112 queries, and the merges and their block-wide waits took half
// of the kernel's time (H200: 3.39 ms; 2.63 with 1/16 sampled). 1 GB of
// f16, 1000 queries, k = 10, at 1/8, 1/16 and one tile: 200 wide 6.73 /
// 7.34 / 8.14 ms, 768 wide 3.52 / 3.63 / 3.96. Where admissions were not
// what held a pass back, the larger pass costs more than it saves: 100
// queries over 200 x f32, 0.785 -> 0.841 ms.
uint32_t sample_rows(uint32_t per) {
  static const uint32_t div = static_cast<uint32_t>(env_positive("MNEMO_FUSED_WIDE_SAMPLE_DIV", 8));
  return std::max<uint32_t>(1, per / kRows / div) * kRows;
}

// MNEMO_FUSED_WIDE_PUB_SLABS (slabs of 128 bytes between threshold reads;
// 24 unless set: every eighth tile over 192 x f16, every tile from 1536 x
// f16) and MNEMO_FUSED_WIDE_GROUP_VOTES=0 (the block-wide vote) bring back
// the earlier forms (a read every tile: 1), for measuring. The votes per
// warpgroup: 112 queries over 10.5M x 192 f16 2.07 -> 1.90 ms, 1000 queries
// 16.25 -> 15.27 ms, 1000 over 1 GB of 384 x f16 4.58 -> 4.42 ms.
WidePace wide_pace() {
  static const WidePace p{static_cast<uint32_t>(env_positive("MNEMO_FUSED_WIDE_PUB_SLABS", 24)),
                          env_int("MNEMO_FUSED_WIDE_GROUP_VOTES", 1) != 0 ? 1u : 0u};
  return p;
}

// out.count set: long lists, kc candidates per query chosen from what the
// kernel writes to out (the dense pass, where out.dense is set, alone);
// otherwise the chunk lists in cand.
template <class T, bool SPLIT>
unsigned launch_typed(const StoreRef& s, const void* queries, const float* qnorms, const float2* terms, uint32_t nq,
                      uint32_t kc, unsigned chunks, Cand* cand, unsigned* gth, float* sample, const WideCandidates& out,
                      const QueryMask* mask, cudaStream_t st) {
  const bool emit = out.count != nullptr;
  const uint32_t kl = emit ? 0 : kc;  // the shared-memory lists' length
  const WideLayout L(kl);
  const QueryMask qm = mask ? *mask : QueryMask{};
  const WidePace pace = wide_pace();
  auto lists_kernel = mask ? fused_wide_kernel<T, SPLIT, false, true> : fused_wide_kernel<T, SPLIT, false>;
  auto kernel = emit ? fused_wide_kernel<T, SPLIT, true> : lists_kernel;
  // Set on every launch: the attribute belongs to each instantiation alone.
  for (auto* k : {lists_kernel, kernel})
    check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(L.bytes)),
          "fused wide-row smem");
  const uint32_t per = chunk_rows(s.slots, chunks);
  const unsigned used = ceil_div(s.slots, per);
  const uint32_t slabs = static_cast<uint32_t>(ceil_div(s.ld * sizeof(T), 128ull));
  const dim3 grid(ceil_div(nq, kQueries), used);
  const uint64_t stride = static_cast<uint64_t>(used) * kl;
  const CUtensorMap rows = row_box_map(s.vectors, s.dtype, s.ld, s.slots, kRows);
  const CUtensorMap qmap = row_box_map(queries, s.dtype, s.ld, nq, kQueries);
  if (emit && out.dense != nullptr) {
    // Blocks of query tiles without an overflowed query of the round leave
    // at once.
    kernel<<<grid, kThreads, L.bytes, st>>>(s, qnorms, nq, terms, kl, per, per, slabs, cand, stride, gth, nullptr, out,
                                            rows, qmap, qm, pace);
    MNEMO_CUDA_LAUNCHED("fused_wide_kernel (dense)");
    return used;
  }
  // Sampling pass: the first tiles of every chunk (sample_rows) give 32
  // keys of distinct rows per query, and each query starts from the kc-th
  // largest of them.
  // Without it every chunk starts from an empty list, and filling those
  // lists (about 100 admissions per query and chunk) took a third of the
  // kernel's time on the H200. The keys are this kernel's own, so the bound
  // holds exactly.
  if (samples(s.slots, per)) {
    lists_kernel<<<grid, kThreads, L.bytes, st>>>(s, qnorms, nq, terms, kl, per, sample_rows(per), slabs, cand, stride,
                                                  gth, sample, WideCandidates{}, rows, qmap, qm, pace);
    MNEMO_CUDA_LAUNCHED("fused_wide_kernel (sampling)");
    launch_sample_bound(sample, used * 32, nq, kc, gth, st);
  }
  kernel<<<grid, kThreads, L.bytes, st>>>(s, qnorms, nq, terms, kl, per, per, slabs, cand, stride, gth, nullptr, out,
                                          rows, qmap, qm, pace);
  MNEMO_CUDA_LAUNCHED("fused_wide_kernel");
  return used;
}

template <class... A>
unsigned launch_any(const StoreRef& s, bool fast, A&&... a) {
  switch (s.dtype) {
    case DType::f16: return launch_typed<__half, false>(s, a...);
    case DType::bf16: return launch_typed<__nv_bfloat16, false>(s, a...);
    default: return fast ? launch_typed<float, false>(s, a...) : launch_typed<float, true>(s, a...);
  }
}

bool wide_off() {
  // MNEMO_FUSED_WIDE=0 turns it off (for measuring against the other paths).
  static const bool off = env_int("MNEMO_FUSED_WIDE", 1) == 0;
  return off;
}

// What both list kinds need: sm_90 and tensor maps, 16-byte aligned copies
// (bases and row strides), signed 32-bit row coordinates; EXACT searches
// only over f32 rows (split TF32 keys; 16-bit rows would need the f32
// queries split into two 16-bit parts).
bool wide_usable(uint32_t slots, uint32_t kl, DType t, uint64_t ld, const void* queries, bool fast) {
  if (wide_off() || slots > 0x7fffffffu || (!fast && t != DType::f32)) return false;
  if (reinterpret_cast<uintptr_t>(queries) % 16 != 0 || ld * dtype_size(t) % 16 != 0) return false;
  if (device_major() < 9 || !tensor_maps_available()) return false;
  return WideLayout(kl).bytes <= device_smem_optin();
}

}  // namespace

bool fused_wide_usable(uint32_t slots, uint32_t kc, DType t, uint64_t ld, const void* queries, bool fast) {
  return kc > 0 && kc <= 32 && wide_usable(slots, kc, t, ld, queries, fast);
}

// The most queries a batch takes the emitting kernel with: any number, as
// measured on the H200 (1 GB of f16, 1000 queries, against cuBLAS's score
// tiles and their selection: 64-wide rows k = 100 65.0 -> 26.3 ms, 1536-wide
// k = 100 10.2 -> 3.6 ms, k = 1000 18.8 -> 8.3 ms), now that a chunk of
// queries no longer needs a key row per query. MNEMO_WIDE_EMIT_MAX sets a
// limit (for measuring).
namespace {
uint32_t wide_emit_max_queries() {
  static const long forced = [] {
    const char* e = std::getenv("MNEMO_WIDE_EMIT_MAX");
    return e ? std::strtol(e, nullptr, 10) : -1L;
  }();
  return forced >= 0 ? static_cast<uint32_t>(std::min<long>(forced, 0xffffffffL)) : 0xffffffffu;
}
}  // namespace

bool fused_wide_emit_usable(uint32_t slots, uint32_t nq, uint32_t kc, DType t, uint64_t ld, const void* queries,
                            bool fast) {
  return kc > 32 && nq <= wide_emit_max_queries() && wide_usable(slots, 0, t, ld, queries, fast);
}

unsigned fused_wide_chunks(uint32_t slots, uint32_t nq, unsigned sm_count) {
  // MNEMO_FUSED_WIDE_WAVES sets the minimum number of waves (for measuring).
  static const unsigned waves = static_cast<unsigned>(env_positive("MNEMO_FUSED_WIDE_WAVES", 2));
  // Chunks of 4 tiles or more: a small store's batch at 16 left most SMs
  // idle (64 MB, 100 queries, k = 10, kernel ms at 16 / 8 / 4 tiles: 384
  // wide 0.284 / 0.177 / 0.179-0.191, 1536 wide 0.495 / 0.270 /
  // 0.177-0.191; 1 GB stores have two waves of longer chunks either way).
  // MNEMO_FUSED_WIDE_FILL=0: the most chunks of 4 tiles where the store is
  // too small for those waves (fused_chunk_count's fill_down), for measuring.
  static const bool fill = env_int("MNEMO_FUSED_WIDE_FILL", 1) != 0;
  return fused_chunk_count(ceil_div(nq, kQueries), slots, kRows, sm_count, waves, 4, fill);
}

size_t fused_wide_sample_bytes(uint32_t nq, unsigned chunks) { return static_cast<size_t>(nq) * chunks * 32 * 4; }

uint32_t fused_wide_emit_cap(uint32_t slots, uint32_t kc, unsigned chunks) {
  // With a sampling pass of one tile a chunk about kc keys per tile of a
  // chunk reached the bound (a sample is the largest of four rows' keys, 32
  // samples a chunk): four times that, more than a pass over more tiles
  // lets through. Without it every row is a candidate.
  const uint32_t per = chunk_rows(slots, chunks);
  if (!samples(slots, per)) return slots;
  const uint64_t want = std::max<uint64_t>(4ull * kc * (per / kRows), 16384);
  return static_cast<uint32_t>(std::min<uint64_t>(slots, (want + 31) / 32 * 32));
}

unsigned launch_fused_wide_topk(const StoreRef& s, const void* queries, const float* qnorms, const void* terms,
                                uint32_t nq, uint32_t kc, unsigned chunks, Cand* cand, unsigned* thresholds,
                                float* sample, bool fast, cudaStream_t st, const QueryMask* mask) {
  MNEMO_CUDA_CHECK(cudaMemsetAsync(thresholds, 0, static_cast<size_t>(nq) * 4, st));
  return launch_any(s, fast, queries, qnorms, static_cast<const float2*>(terms), nq, kc, chunks, cand, thresholds,
                    sample, WideCandidates{}, mask, st);
}

void launch_fused_wide_emit(const StoreRef& s, const void* queries, const float* qnorms, const void* terms, uint32_t nq,
                            uint32_t kc, unsigned chunks, unsigned* thresholds, float* sample,
                            const WideCandidates& out, bool fast, cudaStream_t st) {
  MNEMO_CUDA_CHECK(cudaMemsetAsync(thresholds, 0, static_cast<size_t>(nq) * 4, st));
  MNEMO_CUDA_CHECK(cudaMemsetAsync(out.count, 0, static_cast<size_t>(nq) * 4, st));
  WideCandidates main = out;
  main.dense = nullptr;
  launch_any(s, fast, queries, qnorms, static_cast<const float2*>(terms), nq, kc, chunks, nullptr, thresholds, sample,
             main, nullptr, st);
}

void launch_fused_wide_dense(const StoreRef& s, const void* queries, const float* qnorms, const void* terms,
                             uint32_t nq, uint32_t kc, unsigned chunks, unsigned* thresholds, const WideCandidates& out,
                             bool fast, cudaStream_t st) {
  launch_any(s, fast, queries, qnorms, static_cast<const float2*>(terms), nq, kc, chunks, nullptr, thresholds, nullptr,
             out, nullptr, st);
}

}  // namespace mnemo::cuda
