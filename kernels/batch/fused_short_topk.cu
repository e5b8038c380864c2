// Query batches in FAST mode over short rows (at most 256 bytes of 16-bit
// values or 512 bytes of f32, sm_90 and later): a tensor-core GEMM whose
// epilogue selects, built so that the MMAs, not the bookkeeping, set the
// pace.
// - Each consumer warp holds its queries' B fragments in registers for the
//   whole kernel (32 queries over 16-bit rows, 16 over f32), so a tile of
//   store rows is the only operand that moves. Over f32 rows on sm_90a the
//   queries are instead the A fragments of warpgroup MMAs (consume_wg).
// - One thread of a producer warp loads each tile with a few tensor copies
//   (TMA, 128-byte slabs of K, 128-byte swizzle: no ldmatrix bank conflicts;
//   rows past the store and K past the row read as zeros) and signals an
//   mbarrier; the consumers release stages through a second mbarrier, so no
//   block-wide barrier runs per tile. (Copying row by row with
//   cp.async.bulk kept the consumers waiting, measured: 29% of their stall
//   samples over f32 rows.)
// - A warp owns its queries' lists (k <= 32 candidates, sorted, in shared
//   memory), so admissions need no atomics and no other warp: a key enters
//   only at or above the query's current threshold, which the warp keeps in
//   registers.
// - Thresholds are shared between the blocks of a query through device
//   memory: a chunk whose list is full publishes its k-th key (no key below
//   it can reach the merged top k), and blocks that start later begin from
//   it instead of from an empty list, which is where most admissions were.
// - The blocks of the first wave have no such key to start from, so a
//   sampling pass (this kernel with Sample set) first keys the first tile of
//   every chunk, and each query starts from the kc-th largest of those keys
//   (sample_bound.h).
// The chunk lists are merged and re-scored exactly afterwards, as for the
// other FAST batch paths.
#include <algorithm>
#include <cuda/ptx>

#include "batch/chunk_list.cuh"
#include "batch/fused_chunks.h"
#include "batch/fused_short.h"
#include "batch/mma_frag.cuh"
#include "batch/sample_bound.h"
#include "batch/stage_barriers.cuh"
#include "batch/wgmma.cuh"
#include "device/device_caps.h"
#include "device/env_knob.h"
#include "device/tensor_map.h"
#include "scan/row_dot.cuh"

namespace mnemo::cuda {

namespace {

namespace ptx = ::cuda::ptx;

constexpr int kConsumers = 8;
constexpr int kThreads = (kConsumers + 1) * 32;  // the consumers and one producer warp
constexpr uint32_t kStages = 4;

// Rows per tile for KS k-steps of 32 bytes per row: a stage is 32 KB.
constexpr uint32_t tile_rows(int ks) { return ks <= 8 ? 128 : 64; }

// KS k-steps of 32 bytes per row (4, 8 or 16: whole 128-byte slabs). A
// stage is [slab][row][128 bytes], each slab 1024-byte aligned as the
// swizzle requires.
template <int KS>
struct ShortTile {
  static constexpr uint32_t kSlabs = KS / 4;
  static constexpr uint32_t kRows = tile_rows(KS);
  static constexpr uint32_t kSlabBytes = kRows * 128;
  static constexpr uint32_t kStageBytes = kSlabs * kSlabBytes;
};

// Sampled keys a chunk per query in the sampling pass: one per two rows of
// the chunk's first tile (also sizes the host's sample buffer).
constexpr uint32_t chunk_samples(int ks) { return tile_rows(ks) / 2; }
template <int KS>
constexpr uint32_t kSamples = chunk_samples(KS);

// The tiles a block scans: tile t starts at row lo + t * step and ends at
// the tile's size or `end`. A chunk's block walks the chunk's tiles; a
// sampling block walks the first tiles of chunks blockIdx.y, + gridDim.y,
// ... of the store's `chunks`.
struct TileWalk {
  uint32_t lo, step, end, tiles, chunks;
  __device__ uint32_t first(uint32_t t) const { return lo + t * step; }
};

// Queries per consumer warp (n-tiles of 8): the B fragments take 64
// registers either way.
template <class T>
constexpr int kNTiles = sizeof(T) == 4 ? 2 : 4;
// Cosine queries come divided by their norms (launch_f32_to_unit), so a key
// is one FMA from its dot product. Over 16-bit rows each query's k-steps form
// one MMA chain; over f32 rows even and odd k-steps go to separate chains,
// whose latency bounded the f32 tile. Measured on an H100, 10000q x 1M x 128:
// f16 12.90 ms scaling each key with split chains, 12.22 unit queries, 12.00
// unit queries and one chain; f32 14.47-14.59 scaling each key, 14.20-14.24
// unit queries.
template <class T>
constexpr bool kSplitChains = sizeof(T) == 4;
// Queries per block (one query tile).
template <class T>
constexpr uint32_t kBlockQueries = kConsumers* kNTiles<T> * 8;

// Shared memory in bytes: the stages, each stage's slot terms, the full and
// empty barriers, the lists [queries][kc] and their fill counts.
// The base is rounded up to 1024 bytes in the kernel (hence the slack).
struct ShortLayout {
  size_t terms, bars, lists, counts, bytes;
  __host__ __device__ ShortLayout(uint32_t rows, uint32_t stage_bytes, uint32_t queries, uint32_t kc) {
    terms = static_cast<size_t>(kStages) * stage_bytes;
    bars = terms + static_cast<size_t>(kStages) * rows * 8;
    lists = bars + 2 * kStages * 8;
    counts = lists + static_cast<size_t>(queries) * kc * sizeof(Cand);
    bytes = counts + static_cast<size_t>(queries) * 4 + 1024;
  }
};

// Offers the m-tile's admitted keys (key >= th) to the warp's lists. Query
// column (j, e) of lane (g, t) is query j * 8 + 2t + e; rows g and g + 8 of
// the m-tile are keys [j][e] and [j][2 + e]. Per query the list is held one
// entry per lane while its candidates go in, then written back.
template <int NT>
__device__ __forceinline__ void admit(const float (&key)[NT][4], float (&th)[NT][2], Cand* lists, int* counts, int kc,
                                      uint32_t slot0, const uint64_t* ids, unsigned* gth, int lane) {
  const float ninf = -__int_as_float(0x7f800000);
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const unsigned m0 = __ballot_sync(kFullMask, key[j][e] >= th[j][e]);
      const unsigned m1 = __ballot_sync(kFullMask, key[j][2 + e] >= th[j][e]);
      unsigned mq = m0 | m1;
      while (mq) {
        const int tq = (__ffs(mq) - 1) & 3;
        const unsigned sel = 0x11111111u << tq;
        mq &= ~sel;
        const int ql = j * 8 + 2 * tq + e;
        // The list one entry per lane (RegList: an insertion is a ballot and
        // two shuffles).
        Cand* l = lists + ql * kc;
        RegList rl = load_reg_list(l, counts[ql], kc, lane);
        __syncwarp();  // every lane has read the count before lane 0 rewrites it
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          unsigned c = (h ? m1 : m0) & sel;
          while (c) {
            const int src = __ffs(c) - 1;
            c &= c - 1;
            const float kk = __shfl_sync(kFullMask, key[j][2 * h + e], src);
            const uint32_t ss = slot0 + (src >> 2) + 8 * h;
            if (rl.admits(kk, ss, ids)) rl.insert(kk, ss, ids, lane);
          }
        }
        rl.store(l, rl.n, lane);
        if (lane == 0) {
          counts[ql] = rl.n;
          if (rl.n == kc) atomicMax(gth + ql, ordered_bits(rl.worst_key));
        }
        // The threshold never falls: it may already hold another chunk's.
        if ((lane & 3) == tq) th[j][e] = fmaxf(th[j][e], rl.n == kc ? rl.worst_key : ninf);
        __syncwarp();
      }
    }
}

// Warpgroup-MMA consumers (sm_90a): each warpgroup holds MB m64 blocks of
// queries as A fragments in registers (f32: one block, 64 queries; 16-bit
// rows, measured and not kept: two; a warp's 16 rows of each block, so a
// warp owns MB x 16 queries as the warp-MMA layout does),
// and streams the store tile's rows as B from the stage, 64 rows an MMA.
// Thread (warp w, lane g * 4 + t) then holds, per block i, queries g and
// g + 8 (h) of the warp's 16 x rows 8 j + 2 t + e: key d[i][4 j + 2 h + e].
// Only over f32 rows: over 16-bit rows they measured slower than the warp
// MMAs below (10000q x 1M x 128 f16 on an H100: 16.2 ms against 13.0; the
// selection, not the MMAs, sets the pace there), over f32 rows faster
// (14.5 ms against 17.3).
template <class T>
constexpr bool kShortWg = MNEMO_WGMMA && sizeof(T) == 4;
template <class T>
constexpr int kMBlocks = kNTiles<T> / 2;
template <class T>
constexpr uint32_t kGroupQueries = kMBlocks<T> * 64;

// Offers the admitted keys of a 64-row step of one query block (bit 2 j + e
// of pass[h] set where key d[4 j + 2 h + e] >= th[h]; the block's queries
// from bq0) to the warp's lists, one query at a time: the four lanes
// holding it take turns giving their keys. (A ballot per key register
// instead of the select below measured 2.8x slower over the whole kernel:
// most admissions bring one or two keys.)
[[maybe_unused]] __device__ __forceinline__ void admit_wg(const float (&d)[32], const unsigned (&pass)[2],
                                                          float (&th)[2], Cand* lists, int* counts, int kc,
                                                          uint32_t bq0, uint32_t q0, uint32_t slot0,
                                                          const uint64_t* ids, unsigned* gth, int lane) {
  const float ninf = -__int_as_float(0x7f800000);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    unsigned groups = __ballot_sync(kFullMask, pass[h] != 0);
    while (groups) {
      const int gq = (__ffs(groups) - 1) >> 2;
      groups &= ~(0xfu << (4 * gq));
      const uint32_t bq = bq0 + gq + 8 * h;
      Cand* l = lists + static_cast<size_t>(bq) * kc;
      RegList rl = load_reg_list(l, counts[bq], kc, lane);
      __syncwarp();  // every lane has read the count before lane 0 rewrites it
#pragma unroll
      for (int tq = 0; tq < 4; ++tq) {
        const int src = 4 * gq + tq;
        unsigned c = __shfl_sync(kFullMask, pass[h], src);
        while (c) {
          const int x = __ffs(c) - 1;
          c &= c - 1;
          // Every lane picks its key x (a register index must be known at
          // compile time); lane src's goes round.
          float mine = 0.0f;
#pragma unroll
          for (int y = 0; y < 16; ++y)
            if (y == x) mine = d[4 * (y >> 1) + 2 * h + (y & 1)];
          const float kk = __shfl_sync(kFullMask, mine, src);
          const uint32_t ss = slot0 + 8 * (x >> 1) + 2 * tq + (x & 1);
          if (rl.admits(kk, ss, ids)) rl.insert(kk, ss, ids, lane);
        }
      }
      rl.store(l, rl.n, lane);
      if (lane == 0) {
        counts[bq] = rl.n;
        if (rl.n == kc) atomicMax(gth + q0 + bq, ordered_bits(rl.worst_key));
      }
      // The threshold never falls: it may already hold another chunk's.
      if ((lane >> 2) == gq) th[h] = fmaxf(th[h], rl.n == kc ? rl.worst_key : ninf);
      __syncwarp();
    }
  }
}

// The consumer warps' part of fused_short_kernel under warpgroup MMAs.
template <class T, int KS, bool Sample>
__device__ __forceinline__ void consume_wg(const StoreRef& s, const T* __restrict__ queries, uint32_t nq, uint32_t kc,
                                           uint32_t q0, const TileWalk& walk, const unsigned char* smem,
                                           const float2* tterm, uint64_t* full, uint64_t* empty, Cand* lists,
                                           int* counts, Cand* __restrict__ cand, uint64_t cand_stride,
                                           unsigned* __restrict__ gth, float* __restrict__ sample, int warp, int lane) {
  using Tile = ShortTile<KS>;
  constexpr int MB = kMBlocks<T>;
  const int g = lane >> 2, t4 = lane & 3;
  // Block query of block i, row r of the warp: bq0 + i * 64 + r.
  const uint32_t bq0 = (warp >> 2) * kGroupQueries<T> + (warp & 3) * 16;
  const uint32_t words = static_cast<uint32_t>(s.ld * sizeof(T) / 4);
  uint32_t a[MB][KS][4];
  float th[MB][2];
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t q = q0 + bq0 + i * 64 + g + 8 * h;
      const auto* qrow = reinterpret_cast<const uint32_t*>(queries + static_cast<uint64_t>(q < nq ? q : 0) * s.ld);
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
#pragma unroll
        for (int c = h; c < 4; c += 2) {
          const uint32_t w = ks * 8 + t4 + 4 * (c >> 1);
          a[i][ks][c] = Mma<T>::frag(q < nq && w < words ? __ldg(qrow + w) : 0u);
        }
      th[i][h] =
          q < nq ? fmaxf(-__int_as_float(0x7f800000), from_ordered_bits(__ldcg(gth + q))) : __int_as_float(0x7f800000);
    }

  const uint32_t sbase = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const float nan = __int_as_float(0x7fc00000);
  for (uint32_t t = 0; t < walk.tiles; ++t) {
    const uint32_t st = t % kStages;
    wait_stage(full + st, (t / kStages) & 1);
    const uint32_t first = walk.first(t);
    const uint32_t n = min(Tile::kRows, walk.end - first);
    const uint32_t stage = sbase + st * Tile::kStageBytes;
    const float2* m = tterm + st * Tile::kRows;
    unsigned pub[MB][2];
#pragma unroll
    for (int i = 0; i < MB; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t q = q0 + bq0 + i * 64 + g + 8 * h;
        pub[i][h] = q < nq ? __ldcg(gth + q) : 0u;
      }
      // One 64-row step and one query block at a time: the accumulators of
      // both blocks besides their A fragments spilled (f16, 256-byte rows),
      // and unrolling the steps overflowed the instruction cache.
#pragma unroll 1
    for (uint32_t n0 = 0; n0 < Tile::kRows; n0 += 64) {
      // The same for the whole warpgroup; the sampling pass takes every
      // step (rows past n give NaN keys).
      if (n0 >= n && !Sample) break;
#pragma unroll
      for (int i = 0; i < MB; ++i) {
        float d[32];
        wg_fence();
#pragma unroll
        for (int ks = 0; ks < KS; ++ks)
          WgmmaRs<T>::mma(d, a[i][ks], wg_desc(stage + (ks / 4) * Tile::kSlabBytes + n0 * 128 + (ks % 4) * 32),
                          ks != 0);
        wg_commit();
        wg_wait<0>();
        wg_pin(d);
        // Keys: fmaf(dot, a, b) with the slot's terms (two slots'
        // terms in one 16-byte load); rows past the tile get b = NaN.
        unsigned pass[2] = {0u, 0u};
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const uint32_t r = n0 + 8 * j + 2 * t4;
          const float4 ab = *reinterpret_cast<const float4*>(m + r);
          const float sa[2] = {ab.x, ab.z}, sb[2] = {r < n ? ab.y : nan, r + 1 < n ? ab.w : nan};
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float& k = d[4 * j + 2 * h + e];
              k = fmaf(k, sa[e], sb[e]);
              pass[h] |= static_cast<unsigned>(k >= th[i][h]) << (2 * j + e);
            }
        }
        if constexpr (Sample) {
          // Sampling pass: per query, the larger key of each of this lane's
          // row pairs (8 j + 2 t, + 1), each the key of a distinct row.
          const uint32_t c = blockIdx.y + t * gridDim.y;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t q = q0 + bq0 + i * 64 + g + 8 * h;
            if (q >= nq) continue;
            float* out = sample + (static_cast<uint64_t>(q) * walk.chunks + c) * kSamples<KS> + n0 / 2 + t4;
#pragma unroll
            for (int j = 0; j < 8; ++j) out[4 * j] = fmaxf(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
          }
          continue;
        }
        if (__any_sync(kFullMask, (pass[0] | pass[1]) != 0))
          admit_wg(d, pass, th[i], lists, counts, static_cast<int>(kc), bq0 + i * 64, q0, first + n0, s.ids, gth, lane);
      }
    }
    // This lane has read the stage: release it to the producer.
    (void)ptx::mbarrier_arrive(empty + st);
#pragma unroll
    for (int i = 0; i < MB; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) th[i][h] = fmaxf(th[i][h], from_ordered_bits(pub[i][h]));
  }

  // The warp's lists (best first, empty entries after) as this chunk's.
  if constexpr (!Sample) {
#pragma unroll
    for (int i = 0; i < MB; ++i)
      for (uint32_t r = 0; r < 16; ++r) {
        const uint32_t bq = bq0 + i * 64 + r, q = q0 + bq;
        if (q >= nq) break;
        store_chunk_list(cand + static_cast<uint64_t>(q) * cand_stride + static_cast<uint64_t>(blockIdx.y) * kc,
                         lists + static_cast<size_t>(bq) * kc, counts[bq], kc, lane);
      }
  }
}

// Sample: the sampling pass, which writes each query's sampled keys to
// sample [nq][chunks][kSamples] and no lists. rw (row_warps): warps that
// split each tile's m-tiles for the same queries, each with lists of its
// own, written as lists blockIdx.y * rw + (its share) of the chunk.
template <class T, int KS, bool Sample>
__global__ void __launch_bounds__(kThreads, 1)
    fused_short_kernel(StoreRef s, const T* __restrict__ queries, uint32_t nq, const float2* __restrict__ terms,
                       uint32_t kc, uint32_t chunk_slots, uint32_t chunks, uint32_t rw, Cand* __restrict__ cand,
                       uint64_t cand_stride, unsigned* __restrict__ gth, float* __restrict__ sample,
                       const __grid_constant__ CUtensorMap rows) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Tile = ShortTile<KS>;
  constexpr int NT = kNTiles<T>;
  constexpr int QW = NT * 8;
  constexpr uint32_t BQ = kBlockQueries<T>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) & 1023)) & 1023);
  const ShortLayout L(Tile::kRows, Tile::kStageBytes, BQ, kc);
  float2* tterm = reinterpret_cast<float2*>(smem + L.terms);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L.bars);
  uint64_t* empty = full + kStages;
  Cand* lists = reinterpret_cast<Cand*>(smem + L.lists);
  int* counts = reinterpret_cast<int*>(smem + L.counts);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t q0 = blockIdx.x * BQ;
  // Warps with queries (whole warpgroups under warpgroup MMAs), times the
  // warps that share each query's rows.
  const uint32_t qwarps = min(static_cast<uint32_t>(kConsumers) / rw, (nq - q0 + QW - 1) / QW);
  const uint32_t consumers =
      kShortWg<T> ? min(static_cast<uint32_t>(kConsumers), (nq - q0 + kGroupQueries<T> - 1) / kGroupQueries<T> * 4)
                  : qwarps * rw;
  const uint32_t lo = blockIdx.y * chunk_slots, hi = min(s.slots, lo + chunk_slots);
  const TileWalk walk =
      Sample ? TileWalk{lo, gridDim.y * chunk_slots, s.slots, (chunks - blockIdx.y + gridDim.y - 1) / gridDim.y, chunks}
             : TileWalk{lo, Tile::kRows, hi, (hi - lo + Tile::kRows - 1) / Tile::kRows, chunks};

  for (uint32_t i = threadIdx.x; i < BQ; i += kThreads) counts[i] = 0;
  // Every consumer lane releases its own reads.
  if (threadIdx.x == 0) init_stage_barriers(full, empty, kStages, consumers * 32);
  __syncthreads();

  if (warp == kConsumers) {
    // Producer (one thread): tile t into stage t % kStages once the
    // consumers released the tile that stage held before; a whole box
    // counts, zero-filled past the store. Terms are copied in pairs (16
    // bytes; the terms buffer has room for one past the last slot).
    if (lane != 0) return;
    for (uint32_t t = 0; t < walk.tiles; ++t) {
      const uint32_t st = t % kStages;
      if (t >= kStages) wait_stage(empty + st, (t / kStages - 1) & 1);
      const uint32_t first = walk.first(t);
      const uint32_t n = min(Tile::kRows, walk.end - first), nt = (n + 1) & ~1u;
      unsigned char* dst = smem + st * Tile::kStageBytes;
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, full + st,
                                     Tile::kStageBytes + nt * 8);
#pragma unroll
      for (uint32_t sl = 0; sl < Tile::kSlabs; ++sl) {
        const int32_t at[2] = {static_cast<int32_t>(sl * 128 / sizeof(T)), static_cast<int32_t>(first)};
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, dst + sl * Tile::kSlabBytes, &rows, at,
                                  full + st);
      }
      ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, tterm + st * Tile::kRows, terms + first, nt * 8,
                         full + st);
    }
    return;
  }
  if (static_cast<uint32_t>(warp) >= consumers) return;  // no queries left for this warp
  if constexpr (kShortWg<T>) {
    consume_wg<T, KS, Sample>(s, queries, nq, kc, q0, walk, smem, tterm, full, empty, lists, counts, cand, cand_stride,
                              gth, sample, warp, lane);
  } else {
    // The warp's queries as B fragments (k-step ks: words ks * 8 + t and
    // + t + 4 of query column g of each n-tile) and their
    // thresholds (+inf past nq: never admits; else what other chunks have
    // published, -inf before any: from_ordered_bits(0) is NaN, which fmaxf
    // drops).
    const int g = lane >> 2, t4 = lane & 3;
    // Queries of warp slot wq, m-tiles wr, wr + rw, ... of each tile.
    const uint32_t wq = static_cast<uint32_t>(warp) % qwarps, wr = static_cast<uint32_t>(warp) / qwarps;
    const uint32_t wq0 = q0 + wq * QW;
    const uint32_t words = static_cast<uint32_t>(s.ld * sizeof(T) / 4);
    uint32_t b[KS][NT][2];
    float th[NT][2];
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const uint32_t qb = wq0 + j * 8 + g;
      const auto* qrow = reinterpret_cast<const uint32_t*>(queries + static_cast<uint64_t>(qb < nq ? qb : 0) * s.ld);
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t w = ks * 8 + t4 + 4 * h;
          b[ks][j][h] = Mma<T>::frag(qb < nq && w < words ? __ldg(qrow + w) : 0u);
        }
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const uint32_t q = wq0 + j * 8 + 2 * t4 + e;
        th[j][e] = q < nq ? fmaxf(-__int_as_float(0x7f800000), from_ordered_bits(__ldcg(gth + q)))
                          : __int_as_float(0x7f800000);
      }
    }
    Cand* wlists = lists + static_cast<size_t>(warp) * QW * kc;
    int* wcounts = counts + warp * QW;
    unsigned* wgth = gth + wq0;

    // ldmatrix row addresses: lanes 8m..8m+7 give matrix m, rows 0-7 / 8-15 of
    // the m-tile by m & 1, bytes 0-15 / 16-31 of the k-step by m >> 1. The
    // swizzle stores 16-byte chunk c of row r at chunk c ^ (r % 8), and
    // r % 8 = lane % 8 here. Over f32 rows the A words go to the TF32 MMA
    // unrounded (the unit reads the TF32 bits of each): only candidates are
    // chosen here.
    const uint32_t sbase =
        static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + (((lane >> 3) & 1) * 8 + (lane & 7)) * 128;
    uint32_t chunk[4];  // byte offset in the row of k-step ks % 4's chunk
#pragma unroll
    for (int c = 0; c < 4; ++c) chunk[c] = (((2 * c + (lane >> 4)) ^ (lane & 7)) & 7) * 16;
    const float nan = __int_as_float(0x7fc00000);
    for (uint32_t t = 0; t < walk.tiles; ++t) {
      const uint32_t st = t % kStages;
      wait_stage(full + st, (t / kStages) & 1);
      const uint32_t first = walk.first(t);
      const uint32_t n = min(Tile::kRows, walk.end - first);
      const uint32_t abase = sbase + st * Tile::kStageBytes;
      const float2* m = tterm + st * Tile::kRows;
      // Other chunks' thresholds, loaded now and applied after the tile (the
      // loads' latency hides behind its MMAs). Warps that split the rows
      // load them every rw-th tile: every warp of every block reading the
      // same few words each tile queued on their L2 lines (Nsight Compute,
      // 32 queries over 64-wide f16 rows: 76% of the stalls on global loads,
      // 17% of DRAM bandwidth).
      const bool fetch = (t & (rw - 1)) == wr;
      unsigned pub[NT][2];
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const uint32_t ql = j * 8 + 2 * t4 + e;
          pub[j][e] = fetch && wq0 + ql < nq ? __ldcg(wgth + ql) : 0u;
        }
      // The sampling pass takes every m-tile (rows past n give NaN keys).
      const uint32_t rows_in = Sample ? Tile::kRows : n;
      auto mtile = [&](uint32_t r0) {
        uint32_t a[KS][4];
#pragma unroll
        for (int ks = 0; ks < KS; ++ks)
          ldsm4(a[ks][0], a[ks][1], a[ks][2], a[ks][3], abase + (ks / 4) * Tile::kSlabBytes + r0 * 128 + chunk[ks % 4]);
        float acc[NT][4];
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[j][c] = 0.0f;
        if constexpr (kSplitChains<T>) {
          // Even and odd k-steps into separate sums: twice the independent
          // MMA chains, half as long (the chains' latency bounded the f32 tile).
          float acc2[NT][4];
#pragma unroll
          for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc2[j][c] = 0.0f;
#pragma unroll
          for (int ks = 0; ks < KS; ks += 2)
#pragma unroll
            for (int j = 0; j < NT; ++j) {
              Mma<T>::mma(acc[j], a[ks], b[ks][j]);
              Mma<T>::mma(acc2[j], a[ks + 1], b[ks + 1][j]);
            }
#pragma unroll
          for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[j][c] += acc2[j][c];
        } else {
#pragma unroll
          for (int ks = 0; ks < KS; ++ks)
#pragma unroll
            for (int j = 0; j < NT; ++j) Mma<T>::mma(acc[j], a[ks], b[ks][j]);
        }
        // Keys: fmaf(dot, a, b) with the slot's terms; rows past the
        // tile get b = NaN (never admitted, whatever their stale bits give).
        float sa[2], sb[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t r = r0 + g + 8 * h;
          const float2 ab = m[r];
          sa[h] = ab.x;
          sb[h] = r < n ? ab.y : nan;
        }
        bool any = false;
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float& k = acc[j][2 * h + e];
              k = fmaf(k, sa[h], sb[h]);
              any = any || k >= th[j][e];
            }
        if constexpr (Sample) {
          // Sampling pass: per query, the larger key of this lane's two rows
          // of the m-tile, so every value written is the key of a distinct
          // row (kSamples a chunk).
          const uint32_t c = blockIdx.y + t * gridDim.y;
#pragma unroll
          for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const uint32_t q = wq0 + j * 8 + 2 * t4 + e;
              if (q < nq)
                sample[(static_cast<uint64_t>(q) * chunks + c) * kSamples<KS> + r0 / 2 + g] =
                    fmaxf(acc[j][e], acc[j][2 + e]);
            }
        } else if (__any_sync(kFullMask, any)) {
          admit<NT>(acc, th, wlists, wcounts, static_cast<int>(kc), first + r0, s.ids, wgth, lane);
        }
      };
      // A constant stride where the warp walks every m-tile (a run-time
      // stride cost 2-4% at 1000 queries, where rw is always 1).
      if (rw == 1) {
        for (uint32_t r0 = 0; r0 < rows_in; r0 += 16) mtile(r0);
      } else {
        for (uint32_t r0 = wr * 16; r0 < rows_in; r0 += 16 * rw) mtile(r0);
      }
      // This lane has read the stage: release it to the producer.
      (void)ptx::mbarrier_arrive(empty + st);
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) th[j][e] = fmaxf(th[j][e], from_ordered_bits(pub[j][e]));
    }

    // The warp's lists (best first, empty entries after) as this chunk's.
    if constexpr (!Sample) {
      for (int ql = 0; ql < QW; ++ql) {
        const uint32_t q = wq0 + ql;
        if (q >= nq) break;
        store_chunk_list(
            cand + static_cast<uint64_t>(q) * cand_stride + (static_cast<uint64_t>(blockIdx.y) * rw + wr) * kc,
            wlists + static_cast<size_t>(ql) * kc, wcounts[ql], kc, lane);
      }
    }
  }
#else
  // Launched only on sm_90 and later (fused_short_usable).
  __trap();
#endif
}

// 32-byte k-steps for a row of this many bytes (0: too long).
int ksteps_for(uint64_t row_bytes, DType t) {
  if (row_bytes <= 128) return 4;
  if (row_bytes <= 256) return 8;
  if (row_bytes <= 512 && t == DType::f32) return 16;
  return 0;
}

template <class T, int KS>
ShortLayout layout_of(uint32_t kc) {
  return ShortLayout(ShortTile<KS>::kRows, ShortTile<KS>::kStageBytes, kBlockQueries<T>, kc);
}

size_t smem_bytes(DType t, int ks, uint32_t kc) {
  if (t != DType::f32) return ks == 4 ? layout_of<__half, 4>(kc).bytes : layout_of<__half, 8>(kc).bytes;
  switch (ks) {
    case 4: return layout_of<float, 4>(kc).bytes;
    case 8: return layout_of<float, 8>(kc).bytes;
    default: return layout_of<float, 16>(kc).bytes;
  }
}

// Whether the sampling pass runs first (MNEMO_FUSED_SHORT_SAMPLE=0 turns it
// off, for measuring).
bool sampling_on() {
  static const bool on = env_int("MNEMO_FUSED_SHORT_SAMPLE", 1) != 0;
  return on;
}

// Sampling blocks per query tile: one wave over the device's SMs.
// MNEMO_FUSED_SHORT_WALKERS overrides it (1: one block walks every chunk;
// for tests and measuring).
unsigned sampling_walkers(unsigned sm_count, unsigned qtiles) {
  static const unsigned forced = static_cast<unsigned>(env_positive("MNEMO_FUSED_SHORT_WALKERS", 0));
  return forced ? forced : sm_count / std::max(1u, qtiles);
}

// Warps that split each tile's rows for the same queries: a batch that
// fills fewer than the block's eight warps with queries (32 queries a warp)
// gives the idle ones shares of its rows, so that all eight issue MMAs and
// keys (one warp walking a chunk alone waits on its own chains). 16-bit
// rows only: f32 rows take warpgroup MMAs on sm_90a, which the host pass
// (MNEMO_WGMMA 0 there) cannot see; a power of two.
template <class T>
uint32_t row_warps(uint32_t nq) {
  if (sizeof(T) == 4 || nq >= kBlockQueries<T>) return 1;
  const uint32_t qw = (nq + kNTiles<T> * 8 - 1) / (kNTiles<T> * 8);
  return qw <= 1 ? 8 : qw == 2 ? 4 : qw <= 4 ? 2 : 1;
}

template <class T, int KS>
unsigned launch_ks(const StoreRef& s, const void* queries, const float2* terms, uint32_t nq, uint32_t kc,
                   unsigned chunks, Cand* cand, unsigned* gth, float* sample, unsigned sm_count, cudaStream_t st) {
  constexpr uint32_t kRows = ShortTile<KS>::kRows;
  const ShortLayout L = layout_of<T, KS>(kc);
  // Set on every launch: the attribute belongs to each instantiation alone.
  auto prepared = [&](auto* k) {
    check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(L.bytes)),
          "fused short-row smem");
    return k;
  };
  const uint32_t per = ceil_div(ceil_div(s.slots, chunks), kRows) * kRows;
  const unsigned used = ceil_div(s.slots, per), qtiles = ceil_div(nq, kBlockQueries<T>);
  const CUtensorMap rows = row_box_map(s.vectors, s.dtype, s.ld, s.slots, kRows);
  const uint32_t rw = row_warps<T>(nq);
  const uint64_t stride = static_cast<uint64_t>(used) * rw * kc;
  const auto* q = static_cast<const T*>(queries);
  // Sampling pass: the first tile of every chunk gives kSamples keys of
  // distinct rows per query, and each query starts from the kc-th largest of
  // them instead of from empty lists: the chunks of the first wave each
  // start cold otherwise, and their first rows are nearly all admissions.
  // The keys are this kernel's own, so the bound holds exactly. One wave of
  // blocks, each taking the first tiles of several chunks (a block per
  // chunk, four waves of one tile each, took 180 us on an H100 at 10000q x
  // 1M x 128 f16). Chunks of at least four tiles, as for the wide-row kernel.
  if (sample != nullptr && sampling_on() && per >= 4 * kRows && sample_bound_fits(used * kSamples<KS>)) {
    const unsigned walkers = std::max(1u, std::min(used, sampling_walkers(sm_count, qtiles)));
    prepared(fused_short_kernel<T, KS, true>)<<<dim3(qtiles, walkers), kThreads, L.bytes, st>>>(
        s, q, nq, terms, kc, per, used, rw, cand, stride, gth, sample, rows);
    MNEMO_CUDA_LAUNCHED("fused_short_kernel (sampling)");
    launch_sample_bound(sample, used * kSamples<KS>, nq, kc, gth, st);
  }
  prepared(fused_short_kernel<T, KS, false>)<<<dim3(qtiles, used), kThreads, L.bytes, st>>>(
      s, q, nq, terms, kc, per, used, rw, cand, stride, gth, nullptr, rows);
  MNEMO_CUDA_LAUNCHED("fused_short_kernel");
  return used * rw;
}

template <class T>
unsigned launch_typed(const StoreRef& s, const void* queries, const float2* terms, uint32_t nq, uint32_t kc,
                      unsigned chunks, Cand* cand, unsigned* gth, float* sample, unsigned sms, cudaStream_t st) {
  switch (ksteps_for(s.ld * sizeof(T), s.dtype)) {
    case 4: return launch_ks<T, 4>(s, queries, terms, nq, kc, chunks, cand, gth, sample, sms, st);
    case 8: return launch_ks<T, 8>(s, queries, terms, nq, kc, chunks, cand, gth, sample, sms, st);
    default:
      if constexpr (sizeof(T) == 4)
        return launch_ks<T, 16>(s, queries, terms, nq, kc, chunks, cand, gth, sample, sms, st);
      fail(Code::internal, "fused short-row kernel: row too long");
  }
}

}  // namespace

bool fused_short_usable(uint32_t slots, uint32_t kc, DType t, uint64_t ld) {
  // MNEMO_FUSED_SHORT=0 turns it off (for measuring against the other paths).
  static const bool off = env_int("MNEMO_FUSED_SHORT", 1) == 0;
  // Tensor-copy row coordinates are signed 32-bit.
  if (off || kc == 0 || kc > 32 || slots > 0x7fffffffu) return false;
  const int ks = ksteps_for(ld * dtype_size(t), t);
  if (ks == 0 || device_major() < 9 || !tensor_maps_available()) return false;
  return smem_bytes(t, ks, kc) <= device_smem_optin();
}

unsigned fused_short_chunks(uint32_t slots, uint32_t nq, DType t, uint64_t ld, unsigned sm_count) {
  const uint32_t bq = t == DType::f32 ? kBlockQueries<float> : kBlockQueries<__half>;
  const uint32_t rows = tile_rows(ksteps_for(ld * dtype_size(t), t));
  // Two waves at least. More waves of smaller chunks leave less of the
  // store to blocks that start with cold thresholds, but measured slower on
  // the H200 (10000q x 1M x 128 f16: 2 waves 13.2 ms, 4 14.3, 8 15.4, 16
  // 19.0; f32 17.5, 17.9, 18.4, 19.9; not profiled: each chunk adds a list
  // per query to the merge and a block start-up). MNEMO_FUSED_SHORT_WAVES
  // overrides it (for measuring).
  static const unsigned waves = static_cast<unsigned>(env_positive("MNEMO_FUSED_SHORT_WAVES", 2));
  return fused_chunk_count(ceil_div(nq, bq), slots, rows, sm_count, waves);
}

uint32_t fused_short_lists_per_chunk(uint32_t nq, DType t) {
  return t == DType::f32 ? row_warps<float>(nq) : row_warps<__half>(nq);
}

size_t fused_short_sample_bytes(uint32_t nq, unsigned chunks, DType t, uint64_t ld) {
  return static_cast<size_t>(nq) * chunks * chunk_samples(ksteps_for(ld * dtype_size(t), t)) * 4;
}

unsigned launch_fused_short_topk(const StoreRef& s, const void* queries, const void* terms, uint32_t nq, uint32_t kc,
                                 unsigned chunks, Cand* cand, unsigned* thresholds, float* sample, unsigned sm_count,
                                 cudaStream_t st) {
  const auto* tm = static_cast<const float2*>(terms);
  MNEMO_CUDA_CHECK(cudaMemsetAsync(thresholds, 0, static_cast<size_t>(nq) * 4, st));
  switch (s.dtype) {
    case DType::f16:
      return launch_typed<__half>(s, queries, tm, nq, kc, chunks, cand, thresholds, sample, sm_count, st);
    case DType::bf16:
      return launch_typed<__nv_bfloat16>(s, queries, tm, nq, kc, chunks, cand, thresholds, sample, sm_count, st);
    default: return launch_typed<float>(s, queries, tm, nq, kc, chunks, cand, thresholds, sample, sm_count, st);
  }
}

}  // namespace mnemo::cuda
