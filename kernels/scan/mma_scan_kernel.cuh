// The tensor-core scan (mma_scan.cu): up to four queries a pass, included
// only by the generated translation units mma_scan_<dtype>_<metric>.cu
// (mma_scan_inst.cu.in).
//
// Why: the row-by-row scan spends about 30 instructions a row converting,
// multiplying and reducing, which bounds short rows (and every row with
// four queries) by instructions, not bytes. Here a warp reads 16 rows at
// once straight into A fragments (m16n8k16 over 16-bit rows, m16n8k8 TF32
// over f32 rows) and one MMA does 256 or 128 products.
//
// EXACT results all the same: the MMA keys are only a filter. Each query
// is split into parts hi + lo of the MMA's input type (columns 2q and
// 2q + 1 of B, scaled by a power of two into range), so the MMA sum is
// within e_rel * |row| * |query| of the true dot product (mma_scan_margin);
// a row is re-scored by the row-by-row scan's own arithmetic (row_sums,
// same bits) only when its key could reach the warp's list from within
// that margin, and only re-scored keys enter a list. So the answers, keys
// and order are those of the row-by-row scan, bit for bit.
//
// Rows reach shared memory through a ring of cp.async stages a warp, its
// copies covering whole 128-byte lines. The dot product does not depend on
// the order of the dimensions, so lane (g, t) then reads 16 bytes (piece t
// of a 64-byte chunk) of rows g and g + 8 from the stage and hands them to
// two MMAs as they lie; B's fragments hold the query's dims in the same
// order.
#pragma once

#include <cstddef>
#include <cuda/atomic>
#include <type_traits>

#include "batch/mma_frag.cuh"
#include "device/cp_async.cuh"
#include "scan/mma_scan.h"
#include "scan/row_dot.cuh"
#include "scan/scan_tail.cuh"

namespace mnemo::cuda {

namespace {

constexpr int kMmaWarps = kScanWarps;
constexpr int kMmaThreads = kScanThreads;

// A query's part in the MMA's input type (round to nearest): 16-bit halves,
// or TF32 for f32 rows (a float whose low 13 bits are zero).
template <class T>
struct Part;
template <>
struct Part<__half> {
  using Bits = unsigned short;
  __device__ __forceinline__ static Bits bits(float v) { return __half_as_ushort(__float2half_rn(v)); }
  __device__ __forceinline__ static float value(Bits b) { return __half2float(__ushort_as_half(b)); }
};
template <>
struct Part<__nv_bfloat16> {
  using Bits = unsigned short;
  __device__ __forceinline__ static Bits bits(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }
  __device__ __forceinline__ static float value(Bits b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
};
template <>
struct Part<float> {
  using Bits = uint32_t;
  __device__ __forceinline__ static Bits bits(float v) { return Mma<float>::frag(__float_as_uint(v)); }
  __device__ __forceinline__ static float value(Bits b) { return __uint_as_float(b); }
};

// Bytes of a column of B (a query part over the row's chunks of 64 bytes),
// padded so that lanes of a quarter warp reading two columns hit distinct
// banks (a stride of 64 modulo 128 bytes).
__host__ __device__ inline uint32_t mma_col_stride(uint64_t ld, uint32_t eb) {
  const uint32_t c = static_cast<uint32_t>((ld * eb + 63) / 64 * 64);
  return (c / 64) % 2 == 1 ? c : c + 64;
}

// A warp's ring: kMmaStages stages, each of its lanes' 16-byte pieces of
// rows (kMmaPieces a lane, each lane reading back only its own) and the
// metadata of a group of rows (norms, biases and ids of up to 32 rows).
constexpr int kMmaStages = 3;
constexpr int kMmaPieces = 4;
struct MmaMeta {
  float norm[32], bias[32];
  unsigned long long id[32];
};
constexpr size_t kMmaStageBytes = 32 * kMmaPieces * 16;
constexpr size_t kMmaRingBytes = kMmaStages * (kMmaStageBytes + sizeof(MmaMeta));

struct MmaSmem {
  // The warps' rings, then B's columns [2 * QB][stride] halves (their
  // space, with the rings', reused after the rows for the last block's
  // merge survivors), then the warp lists [warps][QB][k] and their counts.
  // (eb: bytes of a stored element.)
  __host__ __device__ static size_t cols_bytes(int qb, uint64_t ld, uint32_t eb) {
    return static_cast<size_t>(2 * qb) * mma_col_stride(ld, eb);
  }
  __host__ __device__ static size_t front_bytes(int qb, uint64_t ld, uint32_t eb) {
    const size_t f = kMmaWarps * kMmaRingBytes + cols_bytes(qb, ld, eb), r = kRankMax * sizeof(Cand);
    return f > r ? f : r;
  }
  static size_t bytes(int qb, uint64_t ld, uint32_t k, uint32_t eb) {
    return 128 + front_bytes(qb, ld, eb) + static_cast<size_t>(kMmaWarps) * qb * k * sizeof(Cand) +
           kMmaWarps * qb * sizeof(int);
  }
};

// Where piece p (16 bytes) of row r of a step lies in its stage, in 16-byte
// units: rows of 4 KC pieces one after another, the two halves of a row of
// 8 pieces swapped in odd rows, so that the eight lanes of a quarter warp
// (rows g and g + 1, pieces t) read distinct banks. (Rows of 4 pieces fall
// in distinct banks as they lie.)
template <int KC>
__device__ __forceinline__ uint32_t mma_piece_at(uint32_t r, uint32_t p) {
  return r * (4 * KC) + (KC == 2 ? p ^ ((r & 1u) << 2) : p);
}

// Whether a key up to `ku` could still enter the list (no id needed: a key
// equal to the worst one is let through to the exact test), and the list's
// worst key once full.
__device__ __forceinline__ bool may_enter(const RegList& l, float ku) { return l.n < l.k || !(ku < l.worst_key); }
__device__ __forceinline__ bool may_enter(const WarpList& l, float ku) { return l.n < l.k || !(ku < l.c[l.k - 1].key); }
__device__ __forceinline__ float worst_of(const RegList& l) { return l.worst_key; }
__device__ __forceinline__ float worst_of(const WarpList& l) { return l.c[l.k - 1].key; }

// The largest key a row can have given its MMA sum (a dot product, or for
// L2 a distance) within err: key_of is monotone in the sum (increasing, or
// decreasing with a negative weight or for L2), so its larger end value.
__device__ __forceinline__ float key_bound(const StoreRef& s, float sum, float err, float qnorm, const SlotMeta& m) {
  return fmaxf(key_of<true>(s, sum - err, qnorm, m), key_of<true>(s, sum + err, qnorm, m));
}

// Blocks an SM holds at most: the kernel's launch bounds (mma_min_blocks)
// and the host's wave (mma_scan_blocks) both take it from here.
constexpr int kMmaMaxBlocks = 3;

// kMmaMaxBlocks, except four queries' shared-memory lists: their 88.8 KB a
// block leave room for two, so they take up to 128 registers (at 85,
// 64 x f16 with k = 100 spilled 3.7M local requests).
template <int QB, class List>
constexpr int mma_min_blocks() {
  return QB == 4 && std::is_same<List, WarpList>::value ? 2 : kMmaMaxBlocks;
}

// A chunk is 64 bytes of a row: 32 dims of 16-bit rows (an m16n8k16 MMA
// per 16), 16 of f32 rows (an m16n8k8 TF32 MMA per 8, fed the stored bits:
// the tensor cores read their top 19, so a row's part is within 2^-10 of
// it). CH: chunks a row when known at compile time (1, 2 or 4; B then
// stays in registers), 0 for the run-time width (B read from shared
// memory). A step copies kMmaPieces pieces a lane: two tiles of 16 rows of
// one chunk (CH = 1), or one tile of two chunks; a group (the rows of one
// epilogue) is the step's tiles, its chunks taking one step or more.
template <class T, bool L2, int QB, class List, int CH>
__global__ void __launch_bounds__(kMmaThreads, mma_min_blocks<QB, List>())
    mma_scan_kernel(StoreRef s, const float* __restrict__ queries, const float* __restrict__ qnorms, uint32_t nq,
                    uint32_t k, float e_rel, Cand* __restrict__ cand, ScanTail tail) {
  static_assert(QB >= 1 && QB <= 4, "four queries a pass at most (B has 8 columns)");
  constexpr int R = CH == 1 ? 2 : 1;   // tiles a group
  constexpr int KC = CH == 1 ? 1 : 2;  // chunks a step
  static_assert(64 * R * KC == 32 * kMmaPieces, "a step is the warp's pieces");
  constexpr uint32_t EB = sizeof(T), CD = 64 / EB, PE = 16 / EB;  // bytes an element, dims a chunk, a piece
  constexpr int S = kMmaStages;
  // The rings start on a 128-byte line (the dynamic block follows the
  // static words, off a line): with stages straddling lines, 1 GB of
  // 64-wide rows took 72.7M L2 sector reads instead of 36.9M (H100 and
  // H200 alike), each sector read twice.
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((128 - (__cvta_generic_to_shared(smem_raw) & 127)) & 127);
  __shared__ float s_scale[QB], s_qnorm[QB];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const uint64_t ld = s.ld;
  const uint32_t stride = mma_col_stride(ld, EB), nch = static_cast<uint32_t>((ld + CD - 1) / CD);
  unsigned char* ring = smem + warp * kMmaRingBytes;
  uint4* pieces = reinterpret_cast<uint4*>(ring);  // [S][32][kMmaPieces]
  MmaMeta* metas = reinterpret_cast<MmaMeta*>(ring + S * kMmaStageBytes);
  unsigned char* cols = smem + kMmaWarps * kMmaRingBytes;
  const size_t f_bytes = MmaSmem::front_bytes(QB, ld, EB);
  Cand* lists = reinterpret_cast<Cand*>(smem + f_bytes);
  int* counts = reinterpret_cast<int*>(lists + kMmaWarps * QB * k);

  // Each query's scale (a power of two taking its largest magnitude into
  // [1, 2): no 16-bit overflow, exact to undo) and norm, a warp a query.
  // The norm is summed over the scaled values: those of a query below
  // 2^-63 or so underflowed when squared as they are, leaving its margin
  // too small.
  if (warp < QB) {
    const bool mine = warp < static_cast<int>(nq);
    float mx = 0.0f;
    if (mine)
      for (uint64_t i = lane; i < ld; i += 32) mx = fmaxf(mx, fabsf(queries[warp * ld + i]));
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, off));
    // A non-finite query gets no finite margin: every row is re-scored.
    // (Queries below 2^-100 would underflow the 16-bit parts: no margin
    // either.) A NaN element, which fmaxf passes over, makes the norm NaN.
    const bool finite = mx <= 3.0e38f && (mx == 0.0f || mx >= 0x1p-100f);
    const float scale = finite && mx > 0.0f ? ldexpf(1.0f, -ilogbf(mx)) : 1.0f;
    float n2 = 0.0f;
    if (mine)
      for (uint64_t i = lane; i < ld; i += 32) {
        const float v = queries[warp * ld + i] * scale;
        n2 = fmaf(v, v, n2);
      }
    for (int off = 16; off > 0; off >>= 1) n2 += __shfl_xor_sync(kFullMask, n2, off);
    if (lane == 0) {
      s_scale[warp] = scale;
      s_qnorm[warp] = finite ? sqrtf(n2) / scale : __int_as_float(0x7f800000);
    }
  }
  __syncthreads();
  // B's columns: 2q the query's high part, 2q + 1 what is left of it.
  using Bits = typename Part<T>::Bits;
  const uint32_t col_elems = stride / EB;
  for (uint32_t i = threadIdx.x; i < QB * col_elems; i += kMmaThreads) {
    const int q = static_cast<int>(i / col_elems);
    const uint32_t d = i % col_elems;
    const float v = q < static_cast<int>(nq) && d < ld ? queries[q * ld + d] * s_scale[q] : 0.0f;
    const Bits hi = Part<T>::bits(v);
    reinterpret_cast<Bits*>(cols + (2 * q) * stride)[d] = hi;
    reinterpret_cast<Bits*>(cols + (2 * q + 1) * stride)[d] = Part<T>::bits(v - Part<T>::value(hi));
  }
  __syncthreads();

  List wl[QB];
  float qn[QB], lo[QB];
#pragma unroll
  for (int q = 0; q < QB; ++q) {
    wl[q] = make_list<List>(lists + (warp * QB + q) * k, k);
    qn[q] = q < static_cast<int>(nq) ? qnorms[q] : 0.0f;
    lo[q] = start_bound(tail.start, q);
  }
  // Lane (g, t) keeps query t's keys: its scale back and its margin per
  // unit of row norm.
  const int my_q = t < QB ? t : 0;
  const bool my_use = t < QB && t < static_cast<int>(nq);
  const float unscale = 1.0f / s_scale[my_q];
  const float err_q = e_rel * s_qnorm[my_q];
  const float my_qn = s_qnorm[my_q];
  // qn[q] without indexing it at run time (which would put it in local
  // memory).
  auto qnorm_of = [&](int q) {
    float v = qn[0];
#pragma unroll
    for (int j = 1; j < QB; ++j)
      if (j == q) v = qn[j];
    return v;
  };
  const float my_qk = qnorm_of(my_q);  // the norm its keys take (the caller's)
  // Plain keys take the one-FMA filter of the epilogue. Rows of a norm
  // below tiny_norm are always offered: a zero norm makes a cosine key of
  // 0, and one whose product with the query's falls below 2^-126 is
  // rounded with more than the filter's relative slack.
  const bool plain = !L2 && !s.act && !s.apply_bias;
  const float tiny_norm = s.metric == KeyMetric::cosine ? (my_qk > 0.0f ? 0x1p-124f / my_qk : 1.0f) : 0.0f;
  // The bound the blocks share for each query (a full list's worst key:
  // no row below it can be among the k best), and what this warp last
  // published.
  unsigned* const shared_bound = tail.live_bound;
  unsigned published[QB];
#pragma unroll
  for (int q = 0; q < QB; ++q) published[q] = 0;

  // B fragments: column g (zero where no query), piece t (16 bytes) of
  // chunk c (zero past the row's chunks).
  const bool col_real = g < 2 * QB;
  const unsigned char* my_col = cols + (col_real ? g : 0) * stride + 16 * t;
  auto b_frag = [&](uint32_t c) -> uint4 {
    return col_real && c < nch ? *reinterpret_cast<const uint4*>(my_col + c * 64) : make_uint4(0, 0, 0, 0);
  };
  uint4 breg[CH > 0 ? CH : 1];
  if constexpr (CH > 0) {
#pragma unroll
    for (int c = 0; c < CH; ++c) breg[c] = b_frag(c);
  }

  const auto* base = static_cast<const unsigned char*>(s.vectors);
  const size_t row_bytes = ld * EB;
  const uint32_t n_rows = s.slots;
  const uint32_t tiles = (n_rows + 15) / 16;
  const uint32_t warps = gridDim.x * kMmaWarps, wg = blockIdx.x * kMmaWarps + warp;
  const uint32_t spt = CH > 0 ? (CH + KC - 1) / KC : (nch + KC - 1) / KC;  // steps a group
  const uint32_t groups = tiles > wg ? (tiles - wg + R * warps - 1) / (R * warps) : 0;
  const uint32_t total = groups * spt;
  auto first_row = [&](uint32_t group, int r) { return (wg + (group * R + r) * warps) * 16; };
  const bool whole_chunks = ld % CD == 0;  // every chunk's dims in the row

  // Step i's copies: its pieces, and at a group's first step the group's
  // metadata (16 pieces a tile; a piece the store's arrays end inside is
  // copied element by element). Steps are issued in order, so the first
  // row of the next group is carried from step to step (a group's rows lie
  // R * warps * 16 rows past the last group's), and a lane's place in a
  // step is a few values fixed at the start: with four per-lane 64-bit
  // offsets a step, the compiler re-derived them at every step (about 80 of
  // the 354 instructions a group of 16 rows of 64 x f16 took; carrying the
  // addresses themselves spilled the four-query instances' registers).
  // Piece p = j * 32 + lane of a stage is piece p % (4 KC) of row p / (4 KC)
  // (rows of the step's tiles one after another), so a warp's copy covers
  // whole 128-byte lines (a lane's own fragment pieces, copied by itself,
  // took twice the L2 requests a byte). 32 is a multiple of a row's 4 KC
  // pieces, so a lane keeps its piece and moves down 32 / (4 KC) rows each
  // j: its piece j lies piece_off(j) bytes past its piece 0 (the same for
  // every lane) and 32 j pieces past it in a stage.
  constexpr uint32_t kRowsPerJ = 32 / (4 * KC);
  static_assert(kMmaPieces * kRowsPerJ == 16 * R, "a step's pieces cover its tiles' rows");
  const uint32_t lane_row = lane / (4 * KC), lane_piece = lane % (4 * KC);
  const uint32_t to0 = mma_piece_at<KC>(lane_row, lane_piece);
  auto piece_off = [&](int j) -> uint64_t {
    const uint32_t rr = j * kRowsPerJ;  // lane 0's row of the step's tiles
    return static_cast<uint64_t>((rr / 16) * warps * 16 + rr % 16) * row_bytes;
  };
  const uint32_t group_rows = R * warps * 16;
  // The first row of the next group to issue.
  uint32_t next_first = first_row(0, 0);
  const uint32_t lane_off = (lane_piece / 4) * 64 + (lane_piece % 4) * 16;
  // A lane's metadata copy: lanes of tile r < R copy 16 bytes of its norms
  // (p 0-3), biases (4-7, where they apply) or ids (8-15) of the rows from
  // the group's first + meta_row on (four, four, two rows), to its group's
  // stage of the metadata ring.
  const int meta_r = lane / 16, meta_p = lane % 16;
  const bool meta_id = meta_p >= 8;
  const bool meta_mine = meta_r < R && (meta_p < 4 || meta_id || s.apply_bias);
  const uint32_t meta_per = meta_id ? 2 : 4;
  const uint32_t meta_at = meta_r * 16 + (meta_id ? (meta_p - 8) * 2 : (meta_p % 4) * 4);
  const uint32_t meta_row = meta_r * warps * 16 + (meta_at - meta_r * 16);
  unsigned char* const meta_ring =
      reinterpret_cast<unsigned char*>(metas) + (meta_id ? offsetof(MmaMeta, id) + meta_at * sizeof(unsigned long long)
                                                 : meta_p < 4 ? offsetof(MmaMeta, norm) + meta_at * sizeof(float)
                                                              : offsetof(MmaMeta, bias) + meta_at * sizeof(float));
  auto issue = [&](uint32_t i) {
    const uint32_t group = i / spt, c0 = (i % spt) * KC, stage = i % S;
    uint4* st = pieces + stage * 32 * kMmaPieces;
    // A step whose rows and chunks all lie in the store copies without the
    // zero-fill operand (the same warp everywhere: its last row decides).
    const bool whole = whole_chunks && c0 + KC <= nch && n_rows >= 16 && first_row(group, R - 1) <= n_rows - 16;
    if (whole) {
      const unsigned char* at = base + static_cast<uint64_t>(next_first + lane_row) * row_bytes + lane_off + c0 * 64;
#pragma unroll
      for (int j = 0; j < kMmaPieces; ++j) cp_async16(st + to0 + 32 * j, at + piece_off(j));
    } else {
#pragma unroll
      for (int j = 0; j < kMmaPieces; ++j) {
        const uint32_t p = j * 32 + lane, rr = p / (4 * KC), piece = p % (4 * KC);
        const uint32_t row = first_row(group, static_cast<int>(rr / 16)) + rr % 16;
        const uint32_t ch = c0 + piece / 4;
        const uint64_t d = static_cast<uint64_t>(ch) * CD + PE * (piece % 4);
        const bool ok = ch < nch && d < ld && row < n_rows;
        cp_async16(st + to0 + 32 * j, ok ? base + row * row_bytes + d * EB : base, ok);
      }
    }
    if (c0 == 0 && meta_mine) {
      unsigned char* to = meta_ring + (group % S) * sizeof(MmaMeta);
      const uint32_t first = next_first + meta_row;
      if (first + meta_per <= n_rows) {
        const void* from = meta_id      ? static_cast<const void*>(s.ids + first)
                           : meta_p < 4 ? static_cast<const void*>(s.norms + first)
                                        : static_cast<const void*>(s.biases + first);
        cp_async16(to, from);
      } else if (meta_id) {
        for (uint32_t e = 0; e < meta_per; ++e)
          reinterpret_cast<unsigned long long*>(to)[e] = first + e < n_rows ? s.ids[first + e] : ~0ull;
      } else {
        const float* from = meta_p < 4 ? s.norms : s.biases;
        for (uint32_t e = 0; e < meta_per; ++e)
          reinterpret_cast<float*>(to)[e] = first + e < n_rows ? from[first + e] : 0.0f;
      }
    }
    if (c0 + KC >= spt * KC) {  // the group's last step: on to the next group
      next_first += group_rows;
    }
  };

  // A row's metadata from its group's (place at), its activation terms
  // only where it is live.
  auto meta_of = [&](const MmaMeta& mm, int at, uint32_t slot, bool live) {
    SlotMeta m;
    m.live = live;
    m.norm = mm.norm[at];
    m.norm2 = m.norm * m.norm;
    m.bias = s.apply_bias ? mm.bias[at] : 0.0f;
    if (s.act && !s.act_in_bias && live) m.bias = slot_extra(s, slot, m.bias);
    return m;
  };
  // The exact key of (slot, query q), as the row-by-row scan computes it.
  auto exact_key = [&](uint32_t slot, int q) {
    const unsigned char* rows[1] = {base + slot * row_bytes};
    float acc[1][1];
    row_sums<T, L2, 0, 1, 1, 32>(rows, queries + q * ld, ld, lane, acc);
    return key_of<true>(s, acc[0][0], qnorm_of(q), slot_meta<true>(s, slot));
  };
  // Rows of one step a group (up to 128 bytes) still lie whole in the
  // group's stage when they are re-scored: their exact key is then summed
  // from there, with row_sums' arithmetic (one 16-byte vector a lane, the
  // same FMAs in the same order, the same reduction: the same bits), and
  // their norm and bias taken from the group's metadata, without a second
  // trip to L2 for the row. (at: the row's place in the step and in the
  // metadata.)
  constexpr bool kStaged = CH > 0 && CH <= KC;
  auto exact_key_staged = [&](const uint4* stg, int at, uint32_t slot, int q, const MmaMeta& mm) {
    constexpr int V = Vec16<T>::kElems;
    const uint32_t nvec = static_cast<uint32_t>(ld / V);
    float acc = 0.0f;
    if (static_cast<uint32_t>(lane) < nvec) {
      float x[V];
      Vec16<T>::load_shared(stg + mma_piece_at<KC>(static_cast<uint32_t>(at), lane), x);
      const float* qv = queries + q * ld + lane * V;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float qe = qv[e];
        if (L2) {
          const float d = x[e] - qe;
          acc = fmaf(d, d, acc);
        } else {
          acc = fmaf(x[e], qe, acc);
        }
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(kFullMask, acc, off);
    return key_of<true>(s, acc, qnorm_of(q), meta_of(mm, at, slot, true));
  };

  // The shared bound as read at the previous group's end: the load has a
  // whole group's work to arrive in.
  unsigned sb = 0;
  auto read_bound = [&] {
    if (shared_bound)
      sb = ::cuda::atomic_ref<unsigned, ::cuda::thread_scope_device>(shared_bound[my_q])
               .load(::cuda::memory_order_relaxed);
  };
  float c[R][4];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < 4; ++j) c[r][j] = 0.0f;
  for (uint32_t i = 0; i < S - 1; ++i) {
    if (i < total) issue(i);
    cp_async_commit();
  }
  for (uint32_t i = 0; i < total; ++i) {
    cp_async_wait<S - 2>();
    __syncwarp();  // other lanes' metadata copies are visible, and the stage i - 1 read
    if (i + S - 1 < total) issue(i + S - 1);
    cp_async_commit();
    const uint32_t group = i / spt, c0 = (i % spt) * KC;
    const bool last = i % spt == spt - 1;
    const uint4* stg = pieces + (i % S) * 32 * kMmaPieces;
#pragma unroll
    for (int kc = 0; kc < KC; ++kc) {
      const uint32_t ch = c0 + kc;
      // (Registers chosen by a compile-time index: c0 is 0 or, for CH = 4
      // in its second step, 2.)
      uint4 b = CH > 0 ? breg[kc] : b_frag(ch);
#pragma unroll
      for (int j = KC; j < CH; j += KC)
        if (c0 == static_cast<uint32_t>(j)) b = breg[j + kc];
      const uint32_t b1[2] = {b.x, b.y}, b2[2] = {b.z, b.w};
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint4 xa = stg[mma_piece_at<KC>(r * 16 + g, kc * 4 + t)];
        const uint4 xb = stg[mma_piece_at<KC>(r * 16 + g + 8, kc * 4 + t)];
        const uint32_t a1[4] = {xa.x, xb.x, xa.y, xb.y};
        const uint32_t a2[4] = {xa.z, xb.z, xa.w, xb.w};
        Mma<T>::mma(c[r], a1, b1);
        Mma<T>::mma(c[r], a2, b2);
      }
    }
    if (!last) continue;
    // The filter: rows whose key could reach the list from within the
    // margin are re-scored exactly and offered, one at a time.
    const MmaMeta& mm = metas[group % S];
    const float shared_lo = sb ? from_ordered_bits(sb) : -__int_as_float(0x7f800000);
    // Plain cosine and dot keys (no bias, no activation) test the bound in
    // the sum's own units, one FMA a row: the key bound reaches thr when
    // sum + err_q |row| >= thr |q| |row| (cosine; its norms are positive) or
    // sum + err_q |row| >= thr (dot). fmaxf drops a NaN bound as the tests
    // below ignore one; thr is lowered by 2^-20 of itself (and 2^-100, for
    // keys near zero) for the key's own roundings (the division's and the
    // norms' product: a few units of 2^-24), and a query whose norm is zero
    // or not finite tests nothing.
    float fa = 0.0f, fb = 0.0f;
    if (plain) {
      float thr = shared_lo;
#pragma unroll
      for (int q = 0; q < QB; ++q)
        if (q == my_q) {
          thr = fmaxf(thr, lo[q]);
          if (wl[q].n == wl[q].k) thr = fmaxf(thr, worst_of(wl[q]));
        }
      thr -= fabsf(thr) * 0x1p-20f + 0x1p-100f;
      if (s.metric == KeyMetric::cosine) {
        fa = my_qk > 0.0f && my_qk <= 3.0e38f ? fmaf(-thr, my_qk, err_q) : __int_as_float(0x7f800000);
        fb = 0.0f;
      } else {
        fa = err_q;
        fb = thr;
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint32_t b0 = first_row(group, r);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int at = r * 16 + g + 8 * h;
        const uint32_t slot = b0 + g + 8 * h;
        const bool live =
            slot < n_rows &&
            (s.all_live || (mm.id[at] != ~0ull && (!s.allow || ((s.allow[slot >> 6] >> (slot & 63)) & 1ull))));
        const float sum = (h == 0 ? c[r][0] + c[r][1] : c[r][2] + c[r][3]) * unscale;
        bool pass;
        if (plain) {
          const float nrm = mm.norm[at];
          pass = my_use && live && (!(fmaf(nrm, fa, sum) < fb) || nrm < tiny_norm);
        } else {
          const SlotMeta m = meta_of(mm, at, slot, live);
          float ku;
          if (L2) {
            const float d2 = fmaf(-2.0f, sum, m.norm2 + my_qn * my_qn);
            const float nn = m.norm + my_qn;
            ku = key_bound(s, d2, 2.0f * e_rel * nn * nn, my_qk, m);
          } else {
            ku = key_bound(s, sum, err_q * m.norm, my_qk, m);
          }
          pass = my_use && m.live && !(ku < shared_lo);
#pragma unroll
          for (int q = 0; q < QB; ++q)
            if (q == my_q) pass = pass && !(ku < lo[q]) && may_enter(wl[q], ku);
        }
        unsigned mask = __ballot_sync(kFullMask, pass);
        while (mask) {
          const int src = __ffs(mask) - 1;
          mask &= mask - 1;
          const uint32_t cs = __shfl_sync(kFullMask, slot, src);
          const int q = src % 4;
          const int src_at = r * 16 + src / 4 + 8 * h;
          const float key = kStaged ? exact_key_staged(stg, src_at, cs, q, mm) : exact_key(cs, q);
#pragma unroll
          for (int qq = 0; qq < QB; ++qq)
            if (qq == q && key >= lo[qq] && wl[qq].admits(key, cs, s.ids)) {
              wl[qq].insert(key, cs, s.ids, lane);
              // A full list's worst key bounds the query's k-th best.
              if (shared_bound && wl[qq].n == wl[qq].k) {
                const unsigned w = ordered_bits(worst_of(wl[qq]));
                if (w > published[qq]) {
                  published[qq] = w;
                  if (lane == 0) atomicMax(shared_bound + qq, w);
                }
              }
            }
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) c[r][j] = 0.0f;
    }
    read_bound();
  }
  cp_async_wait<0>();
  __syncthreads();  // the rings' and B's space now holds the merge survivors
  finish_scan<List, QB>(wl, lists, counts, s.ids, nq, k, cand, tail, warp, lane, reinterpret_cast<Cand*>(smem),
                        static_cast<uint32_t>(f_bytes / sizeof(Cand)));
}

template <class Kernel>
void launch_mma_instance(Kernel kernel, unsigned blocks, size_t smem, cudaStream_t st, const StoreRef& s,
                         const float* q, const float* qn, uint32_t nq, uint32_t k, float e_rel, Cand* cand,
                         const ScanTail& tail) {
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "mma scan smem");
  kernel<<<blocks, kMmaThreads, smem, st>>>(s, q, qn, nq, k, e_rel, cand, tail);
}

// Chunks known at compile time for rows of up to 128 dims (B in
// registers); the run-time width beyond.
template <class T, bool L2, int QB, class List>
void dispatch_mma(const StoreRef& s, const float* q, const float* qn, uint32_t nq, uint32_t k, float e_rel, Cand* cand,
                  unsigned blocks, const ScanTail& tail, cudaStream_t st) {
  const size_t smem = MmaSmem::bytes(QB, s.ld, k, sizeof(T));
  auto go = [&](auto kernel) { launch_mma_instance(kernel, blocks, smem, st, s, q, qn, nq, k, e_rel, cand, tail); };
  const uint64_t nch = (s.ld * sizeof(T) + 63) / 64;
  if (nch == 1)
    go(mma_scan_kernel<T, L2, QB, List, 1>);
  else if (nch == 2)
    go(mma_scan_kernel<T, L2, QB, List, 2>);
  else if (nch <= 4)
    go(mma_scan_kernel<T, L2, QB, List, 4>);
  else
    go(mma_scan_kernel<T, L2, QB, List, 0>);
}

}  // namespace

template <class T, bool L2>
void launch_mma_scan_typed(const StoreRef& s, const float* q, const float* qn, uint32_t nq, uint32_t k, float e_rel,
                           Cand* cand, unsigned blocks, const ScanTail& tail, cudaStream_t st) {
  auto by_list = [&](auto qb_tag) {
    constexpr int QB = decltype(qb_tag)::value;
    if (k > 32)
      dispatch_mma<T, L2, QB, WarpList>(s, q, qn, nq, k, e_rel, cand, blocks, tail, st);
    else
      dispatch_mma<T, L2, QB, RegList>(s, q, qn, nq, k, e_rel, cand, blocks, tail, st);
  };
  if (nq <= 1)
    by_list(std::integral_constant<int, 1>{});
  else if (nq <= 2)
    by_list(std::integral_constant<int, 2>{});
  else
    by_list(std::integral_constant<int, 4>{});
}

}  // namespace mnemo::cuda
