// Query batches in FAST mode: a tensor-core GEMM whose epilogue does the
// top-k selection, so the score tile never travels through device memory.
// Each block owns 64 queries and a contiguous chunk of slots, walks the
// chunk in tiles of 128 slots (cp.async pipeline, mma.sync: TF32 over f32
// storage, FP16/BF16 over 16-bit storage) and keeps per query a sorted list
// of its k best in shared memory. Keys at or above a query's running
// threshold (its list's last key) go to a per-query buffer; buffers are
// merged into the lists only when they could overflow on the next tile, so
// once the thresholds settle a tile costs one compare per score.
#include <algorithm>
#include <cmath>

#include "batch/fused_chunks.h"
#include "batch/mma_frag.cuh"
#include "device/cp_async.cuh"
#include "device/device_caps.h"
#include "device/env_knob.h"
#include "scan/row_dot.cuh"

namespace mnemo::cuda {

namespace {

constexpr int kBS = 128;   // slots per tile (MMA M)
constexpr int kBQ = 64;    // queries per block (MMA N)
constexpr int kWarps = 8;  // 4 along slots x 2 along queries, 32 x 32 each
constexpr int kThreads = kWarps * 32;
constexpr int kStages = 4;     // three stages in flight: a step waits on latency, not on issue (measured)
constexpr int kRowWords = 36;  // 128 bytes of a row per stage + 16 of padding (no bank conflicts)
constexpr int kStageWords = (kBS + kBQ) * kRowWords;
constexpr int kSlack = 16;  // buffer room past one tile's worth, so merges are rare

// Shared-memory layout in 4-byte words.
struct FusedSmem {
  int kc, cap;
  __host__ __device__ FusedSmem(int k) : kc(k), cap(k + kBS + kSlack) {}
  __host__ __device__ size_t meta() const { return static_cast<size_t>(kStages) * kStageWords; }  // [4][kBS] float2
  __host__ __device__ size_t qscale() const { return meta() + 8 * kBS; }
  __host__ __device__ size_t theta() const { return qscale() + kBQ; }
  __host__ __device__ size_t count() const { return theta() + kBQ; }                               // buffer fill
  __host__ __device__ size_t lcount() const { return count() + kBQ; }                              // list fill
  __host__ __device__ size_t lists() const { return lcount() + kBQ; }                              // [kBQ][kc] Cand
  __host__ __device__ size_t bufs() const { return lists() + 2 * static_cast<size_t>(kBQ) * kc; }  // [kBQ][cap]
  __host__ __device__ size_t words() const { return bufs() + 2 * static_cast<size_t>(kBQ) * cap; }
  __host__ __device__ size_t bytes() const { return words() * 4; }
};

// Start offsets of blocks in K and in their chunk (see the kernel).
struct FusedOrder {
  bool rotate_k;
  uint32_t tile_groups;
};

// Merges query q's buffer into its list (one warp) and sets its threshold.
__device__ void merge_buffer(int q, const FusedSmem& L, uint32_t* sm, const uint64_t* ids, int lane) {
  int* count = reinterpret_cast<int*>(sm + L.count());
  int* lcount = reinterpret_cast<int*>(sm + L.lcount());
  float* theta = reinterpret_cast<float*>(sm + L.theta());
  Cand* list = reinterpret_cast<Cand*>(sm + L.lists()) + static_cast<size_t>(q) * L.kc;
  const Cand* buf = reinterpret_cast<const Cand*>(sm + L.bufs()) + static_cast<size_t>(q) * L.cap;
  WarpList wl{list, L.kc, lcount[q]};
  offer_all(wl, buf, count[q], ids, lane);
  __syncwarp();
  if (lane == 0) {
    lcount[q] = wl.n;
    count[q] = 0;
    // Ties with the last entry are let into the buffer (the merge orders
    // them by id), so the comparison is >=.
    if (wl.n == L.kc) theta[q] = list[L.kc - 1].key;
  }
  __syncwarp();
}

template <class T>
__global__ void __launch_bounds__(kThreads, 1)
    fused_gemm_topk_kernel(StoreRef s, const T* __restrict__ queries, const float* __restrict__ qnorms, uint32_t nq,
                           const float2* __restrict__ terms, uint32_t kc, uint32_t chunk_slots, Cand* __restrict__ cand,
                           uint64_t cand_stride, FusedOrder order) {
  extern __shared__ __align__(16) uint32_t sm[];
  const FusedSmem L(static_cast<int>(kc));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const int ws = warp & 3, wq = warp >> 2;  // warp's slot and query position
  const uint32_t q0 = blockIdx.x * kBQ;
  const uint32_t lo = blockIdx.y * chunk_slots, hi = min(s.slots, lo + chunk_slots);
  const uint32_t tiles = (hi - lo + kBS - 1) / kBS;
  constexpr int kElems16 = 16 / sizeof(T);
  constexpr int kBK = 128 / sizeof(T);  // elements of K per stage
  const uint32_t ktiles = static_cast<uint32_t>((s.ld + kBK - 1) / kBK);
  const uint64_t steps = static_cast<uint64_t>(tiles) * ktiles;
  // Where this block starts in K and in its chunk (measuring knobs, off by
  // default): blocks that run at the same time then ask L2 for different
  // lines. Both were measured within 1% on the H200, and without them a
  // slot's approximate key does not depend on the chunk it falls in, so a
  // sharded store selects the same candidates as one store.
  const uint32_t kt0 = order.rotate_k ? blockIdx.y % ktiles : 0;
  const uint32_t t0 = order.tile_groups > 1 ? (blockIdx.x % order.tile_groups) * (tiles / order.tile_groups) : 0;
  auto phys_tile = [&](uint32_t t) { return t + t0 < tiles ? t + t0 : t + t0 - tiles; };
  auto phys_kt = [&](uint32_t k) { return k + kt0 < ktiles ? k + kt0 : k + kt0 - ktiles; };

  float* qscale = reinterpret_cast<float*>(sm + L.qscale());
  float* theta = reinterpret_cast<float*>(sm + L.theta());
  int* count = reinterpret_cast<int*>(sm + L.count());
  int* lcount = reinterpret_cast<int*>(sm + L.lcount());
  Cand* bufs = reinterpret_cast<Cand*>(sm + L.bufs());
  auto slot_ok = [&](uint32_t tile, int sl) {
    return static_cast<uint64_t>(lo) + static_cast<uint64_t>(tile) * kBS + sl < hi;
  };
  if (threadIdx.x < kBQ) {
    const uint32_t q = q0 + threadIdx.x;
    float sc = 1.0f;
    if (s.metric == KeyMetric::cosine) sc = q < nq && qnorms[q] != 0.0f ? 1.0f / qnorms[q] : 0.0f;
    qscale[threadIdx.x] = sc;
    // Queries past nq never admit anything.
    theta[threadIdx.x] = q < nq ? -__int_as_float(0x7f800000) : __int_as_float(0x7f800000);
    count[threadIdx.x] = 0;
    lcount[threadIdx.x] = 0;
  }

  // Stage loader: 128-byte pieces of 128 store rows and 64 query rows. Each
  // thread always copies the same 16-byte column piece of the same rows, so
  // the per-step work is six copies and pointer updates (integer work per
  // step, not the MMAs, bounds a small-K tile otherwise).
  const int lr = threadIdx.x >> 3, lc = threadIdx.x & 7;
  const T* xsrc[kBS / 32];
  const T* qsrc[kBQ / 32];
  bool xok[kBS / 32], qok[kBQ / 32];
#pragma unroll
  for (int j = 0; j < kBQ / 32; ++j) {
    const uint32_t q = q0 + lr + 32 * j;
    qok[j] = q < nq;
    qsrc[j] = queries + static_cast<uint64_t>(qok[j] ? q : 0) * s.ld + lc * kElems16;
  }
  auto set_tile = [&](uint32_t tile) {
#pragma unroll
    for (int j = 0; j < kBS / 32; ++j) {
      const uint64_t slot = static_cast<uint64_t>(lo) + static_cast<uint64_t>(tile) * kBS + lr + 32 * j;
      xok[j] = slot < hi;
      xsrc[j] = static_cast<const T*>(s.vectors) + (xok[j] ? slot : lo) * s.ld + lc * kElems16;
    }
  };
  uint32_t ltile = 0, lkt = 0;
  int lstage = 0;
  set_tile(phys_tile(0));
  auto load_next = [&]() {
    uint32_t* st = sm + lstage * kStageWords + lr * kRowWords + lc * 4;
    const uint32_t off = phys_kt(lkt) * kBK;
    const bool cok = off + lc * kElems16 < s.ld;
    const uint32_t o = cok ? off : 0;
#pragma unroll
    for (int j = 0; j < kBS / 32; ++j) cp_async16(st + 32 * j * kRowWords, xsrc[j] + o, cok && xok[j]);
#pragma unroll
    for (int j = 0; j < kBQ / 32; ++j) cp_async16(st + (kBS + 32 * j) * kRowWords, qsrc[j] + o, cok && qok[j]);
    // The tile's slot terms with its first piece of K, into one of four
    // buffers (a tile's terms are read in its last step, up to two steps
    // after the next tiles' loads were issued).
    if (lkt == 0 && threadIdx.x < kBS / 2) {
      const uint64_t slot = static_cast<uint64_t>(lo) + static_cast<uint64_t>(phys_tile(ltile)) * kBS + threadIdx.x * 2;
      const bool ok = slot < hi;
      cp_async16(sm + L.meta() + (ltile & 3) * 2 * kBS + threadIdx.x * 4, terms + (ok ? slot : lo), ok);
    }
    lstage = lstage + 1 == kStages ? 0 : lstage + 1;
    if (++lkt == ktiles) {
      lkt = 0;
      if (++ltile < tiles) set_tile(phys_tile(ltile));
    }
  };
  for (int p = 0; p < kStages - 1; ++p) {
    if (static_cast<uint64_t>(p) < steps) load_next();
    cp_async_commit();
  }
  float acc[2][4][4];
  float th[4][2], qs[4][2];
  __syncthreads();
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int ql = wq * 32 + j * 8 + 2 * t + e;
      th[j][e] = theta[ql];
      qs[j][e] = qscale[ql];
    }

  // ldmatrix row addresses: lanes 8m..8m+7 give the rows of matrix m. A
  // (m-tile i): matrices rows 0-7 / 8-15 by m & 1, words 0-3 / 4-7 by m >> 1;
  // B (n-tiles 2p, 2p+1): n-tile by m >> 1, words by m & 1.
  const uint32_t sm_base = static_cast<uint32_t>(__cvta_generic_to_shared(sm));
  const int mi = lane >> 3, mr = lane & 7;
  uint32_t a_off[2], b_off[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) a_off[i] = ((ws * 32 + i * 16 + (mi & 1) * 8 + mr) * kRowWords + (mi >> 1) * 4) * 4;
#pragma unroll
  for (int p = 0; p < 2; ++p)
    b_off[p] = ((kBS + wq * 32 + (2 * p + (mi >> 1)) * 8 + mr) * kRowWords + (mi & 1) * 4) * 4;
  uint32_t tile = 0, kt = 0;
  int cstage = 0;
  for (uint64_t step = 0; step < steps; ++step) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (step + kStages - 1 < steps) load_next();
    cp_async_commit();
    if (kt == 0) {
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    }
    // Fragments of the stage's four k-steps first (ldmatrix, 16 in flight),
    // then the 32 MMAs: one block per SM leaves 2 warps per scheduler, so
    // the latency is hidden by independent instructions, not by warps.
    const uint32_t base = sm_base + static_cast<uint32_t>(cstage * kStageWords * 4);
    uint32_t a[4][2][4], b[4][4][2];
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {  // 32 bytes of K per mma step, 128 per stage
#pragma unroll
      for (int i = 0; i < 2; ++i) ldsm4(a[ks][i][0], a[ks][i][1], a[ks][i][2], a[ks][i][3], base + a_off[i] + ks * 32);
#pragma unroll
      for (int p = 0; p < 2; ++p)
        ldsm4(b[ks][2 * p][0], b[ks][2 * p][1], b[ks][2 * p + 1][0], b[ks][2 * p + 1][1], base + b_off[p] + ks * 32);
    }
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) a[ks][i][e] = Mma<T>::frag(a[ks][i][e]);
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) b[ks][j][e] = Mma<T>::frag(b[ks][j][e]);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) Mma<T>::mma(acc[i][j], a[ks][i], b[ks][j]);
    }
    cstage = cstage + 1 == kStages ? 0 : cstage + 1;
    if (++kt < ktiles) continue;
    kt = 0;

    // Epilogue of the tile: keys against each query's threshold.
    const float2* m = reinterpret_cast<const float2*>(sm + L.meta()) + (tile & 3) * kBS;
    const uint32_t ptile = phys_tile(tile);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int sl = ws * 32 + i * 16 + g + 8 * h;
        const float2 ab = m[sl];
        const float sa = ab.x, sb = slot_ok(ptile, sl) ? ab.y : __int_as_float(0x7fc00000);
        const uint32_t slot = lo + ptile * kBS + sl;
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float key = fmaf(acc[i][j][2 * h + e] * qs[j][e], sa, sb);
            if (key >= th[j][e]) {
              const int ql = wq * 32 + j * 8 + 2 * t + e;
              const int pos = atomicAdd(count + ql, 1);
              bufs[static_cast<size_t>(ql) * L.cap + pos] = Cand{key, slot};
            }
          }
      }
    // Buffers that the next tile could overflow are merged now.
    const bool last = tile + 1 == tiles;
    const int trigger = last ? 0 : L.cap - kBS;
    bool need = false;
    __syncthreads();
    for (int q = threadIdx.x; q < kBQ; q += kThreads) need = need || count[q] > trigger;
    if (__syncthreads_or(need)) {
      for (int q = warp; q < kBQ; q += kWarps)
        if (count[q] > trigger) merge_buffer(q, L, sm, s.ids, lane);
      __syncthreads();
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) th[j][e] = theta[wq * 32 + j * 8 + 2 * t + e];
    }
    ++tile;
  }
  cp_async_wait<0>();
  __syncthreads();
  // The block's list of each query (best first, empty entries after).
  const Cand* lists = reinterpret_cast<const Cand*>(sm + L.lists());
  for (int q = warp; q < kBQ; q += kWarps) {
    if (q0 + q >= nq) break;
    Cand* out = cand + static_cast<uint64_t>(q0 + q) * cand_stride + static_cast<uint64_t>(blockIdx.y) * kc;
    const int n = lcount[q];
    for (uint32_t j = lane; j < kc; j += 32)
      out[j] = static_cast<int>(j) < n ? lists[static_cast<size_t>(q) * kc + j] : empty_cand();
  }
}

// Key = fmaf(dot * qscale, a, b) with (a, b) per slot: cosine a = w / |x|
// (0 for a zero row), dot a = w, L2 a = 2w and b = extra - w |x|^2 (the
// query's own |q|^2 is the same for every slot and left out: only the order
// matters before the exact re-score); w = w_rel with activation, else 1.
// Dead or filtered slots: b = NaN, never admitted.
__global__ void slot_terms_kernel(StoreRef s, float2* __restrict__ terms) {
  const float w = s.act ? s.w_rel : 1.0f;
  for (uint32_t slot = blockIdx.x * blockDim.x + threadIdx.x; slot < s.slots; slot += gridDim.x * blockDim.x) {
    float a = 0.0f, b = __int_as_float(0x7fc00000);
    const SlotMeta mt = slot_meta<true>(s, slot);
    if (mt.live) {
      b = mt.bias;
      if (s.metric == KeyMetric::cosine) {
        a = mt.norm == 0.0f ? 0.0f : w / mt.norm;
      } else if (s.metric == KeyMetric::l2) {
        a = 2.0f * w;
        b = fmaf(-w, mt.norm2, mt.bias);
      } else {
        a = w;
      }
    }
    terms[slot] = make_float2(a, b);
  }
}

template <class T>
unsigned launch_typed(const StoreRef& s, const void* queries, const float* qnorms, const float2* terms, uint32_t nq,
                      uint32_t kc, unsigned chunks, Cand* cand, cudaStream_t st) {
  const FusedSmem L(static_cast<int>(kc));
  const size_t smem = L.bytes();
  auto kernel = fused_gemm_topk_kernel<T>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "fused gemm smem");
  const uint32_t per = ceil_div(ceil_div(s.slots, chunks), kBS) * kBS;
  const unsigned used = ceil_div(s.slots, per);
  const dim3 grid(ceil_div(nq, kBQ), used);
  static const FusedOrder order{env_int("MNEMO_FUSED_ROTATE_K", 0) != 0,
                                static_cast<uint32_t>(std::max(1, env_int("MNEMO_FUSED_TILE_GROUPS", 1)))};
  kernel<<<grid, kThreads, smem, st>>>(s, static_cast<const T*>(queries), qnorms, nq, terms, kc, per, cand,
                                       static_cast<uint64_t>(used) * kc, order);
  MNEMO_CUDA_LAUNCHED("fused_gemm_topk_kernel");
  return used;
}

}  // namespace

bool fused_gemm_wanted(uint32_t kc, DType t, uint64_t ld) {
  // MNEMO_FUSED_GEMM = 1 / 0 forces it on / off (for measuring). By
  // default only where it measured faster than cuBLAS + selection on the
  // H200: 16-bit storage with short rows (few K steps per tile). Long rows
  // and f32 stay on cuBLAS (docs/lab/2026-11-25-h200-before-scan-tail.md).
  static const int forced = env_int("MNEMO_FUSED_GEMM", -1);
  if (forced == 0 || kc > static_cast<uint32_t>(kFusedMaxList)) return false;
  if (forced < 0 && (t == DType::f32 || ld > 128)) return false;
  return FusedSmem(static_cast<int>(kc)).bytes() <= device_smem_optin();
}

unsigned fused_gemm_chunks(uint32_t slots, uint32_t nq, unsigned sm_count) {
  return fused_chunk_count(ceil_div(nq, kBQ), slots, kBS, sm_count, 2);
}

void launch_slot_terms(const StoreRef& s, void* terms, cudaStream_t st) {
  const unsigned blocks = std::max(1u, std::min(ceil_div(s.slots, 256), 4096u));
  slot_terms_kernel<<<blocks, 256, 0, st>>>(s, static_cast<float2*>(terms));
  MNEMO_CUDA_LAUNCHED("slot_terms_kernel");
}

unsigned launch_fused_gemm_topk(const StoreRef& s, const void* queries, const float* qnorms, const void* terms,
                                uint32_t nq, uint32_t kc, unsigned chunks, Cand* cand, cudaStream_t st) {
  const auto* t = static_cast<const float2*>(terms);
  switch (s.dtype) {
    case DType::f16: return launch_typed<__half>(s, queries, qnorms, t, nq, kc, chunks, cand, st);
    case DType::bf16: return launch_typed<__nv_bfloat16>(s, queries, qnorms, t, nq, kc, chunks, cand, st);
    default: return launch_typed<float>(s, queries, qnorms, t, nq, kc, chunks, cand, st);
  }
}

}  // namespace mnemo::cuda
