// Small-k selection (k <= kSmallKMax) over key rows in device memory, the
// merge of per-block candidate lists, exact re-scoring, and the final
// conversion to user ids and scores.
#include <algorithm>

#include "scan/row_dot.cuh"

namespace mnemo::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

// warp 0 folds the other warps' lists (in shared memory) into its own
// (a WarpList or a RegList).
template <class List>
__device__ void block_fold(List& mine, Cand* lists, const int* counts, int k, const uint64_t* ids, int lane) {
  for (int w = 1; w < kWarps; ++w) {
    offer_all(mine, lists + w * k, counts[w], ids, lane);
  }
}

// Keys are either final (keys != null) or computed here from GEMM dot
// products (s, qnorms), which saves a pass over the score matrix. thr[q]
// (order-preserving bits) is a lower bound on query q's k-th best key, raised
// by every block whose list fills: entries below it cannot make the answer,
// so later tiles insert almost nothing.
// ACT: activation keys, a separate instance so the plain one keeps its
// registers.
template <bool ACT>
__global__ void __launch_bounds__(kThreads)
    select_rows_kernel(const float* __restrict__ vals, bool raw, StoreRef s, const float* __restrict__ qnorms,
                       uint32_t n, uint32_t first, uint32_t k, Cand* cand, uint64_t cand_stride, uint64_t cand_offset,
                       uint32_t* thr) {
  extern __shared__ __align__(16) unsigned char smem[];
  Cand* lists = reinterpret_cast<Cand*>(smem);
  int* counts = reinterpret_cast<int*>(lists + kWarps * k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t q = blockIdx.y;
  const float* row = vals + static_cast<uint64_t>(q) * n;
  const float qn = raw ? qnorms[q] : 0.0f;
  const uint32_t floor_bits = thr ? thr[q] : 0u;
  // This block's contiguous segment of the row, read 32 keys at a time.
  const uint32_t per = (n + gridDim.x - 1) / gridDim.x;
  const uint32_t lo = blockIdx.x * per, hi = min(n, lo + per);
  WarpList wl{lists + warp * k, static_cast<int>(k), 0};
  for (uint32_t b = lo + warp * 32; b < hi; b += kWarps * 32) {
    const uint32_t j = b + lane;
    bool has = j < hi;
    float key = 0.0f;
    if (has) {
      key = row[j];
      if (raw) {
        const SlotMeta m = slot_meta<ACT>(s, first + j);
        if (!m.live) {
          has = false;
        } else {
          float sum = key;
          if (s.metric == KeyMetric::l2) sum = fmaxf(fmaf(-2.0f, sum, m.norm2 + qn * qn), 0.0f);
          key = key_of<ACT>(s, sum, qn, m);
        }
      }
      has = has && key == key && ordered_bits(key) >= floor_bits;
    }
    wl.offer(has, key, first + j, s.ids, lane);
  }
  if (lane == 0) counts[warp] = wl.n;
  __syncthreads();
  if (warp != 0) return;
  block_fold(wl, lists, counts, static_cast<int>(k), s.ids, lane);
  Cand* out = cand + static_cast<uint64_t>(q) * cand_stride + cand_offset + static_cast<uint64_t>(blockIdx.x) * k;
  for (uint32_t j = lane; j < k; j += 32) out[j] = static_cast<int>(j) < wl.n ? wl.c[j] : empty_cand();
  if (thr && lane == 0 && wl.n == static_cast<int>(k)) atomicMax(thr + q, ordered_bits(wl.c[k - 1].key));
}

// One block's merge of the m candidates at c into list l: each warp offers
// a stride of them to its own list, publishes it in lists (a no-op copy
// for a WarpList, which lives there), then warp 0 folds the others into
// its list and writes it to out.
template <class List>
__device__ void merge_block(List& l, const Cand* c, uint64_t m, uint32_t k, const uint64_t* ids, Cand* lists,
                            int* counts, Cand* out, int warp, int lane) {
  // kAhead of the warp's batches loaded before any is offered (in the same
  // order as one at a time, so the same answers): one at a time, each batch
  // waited a memory round trip. 100 queries' merge of 261 chunk lists of 26:
  // 46.4-47.2 us before, 39.0 us after (H100).
  constexpr int kAhead = 8;
  constexpr uint64_t kStep = kWarps * 32;
  for (uint64_t b0 = static_cast<uint64_t>(warp) * 32; b0 < m; b0 += kAhead * kStep) {
    Cand x[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const uint64_t j = b0 + u * kStep + lane;
      x[u] = j < m ? c[j] : empty_cand();
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (b0 + u * kStep >= m) break;  // warp-uniform
      l.offer(x[u].slot != kNoSlot, x[u].key, x[u].slot, ids, lane);
    }
  }
  l.store(lists + warp * k, k, lane);
  if (lane == 0) counts[warp] = l.n;
  __syncthreads();
  if (warp != 0) return;
  block_fold(l, lists, counts, static_cast<int>(k), ids, lane);
  l.store(out, k, lane);
}

__global__ void __launch_bounds__(kThreads)
    merge_kernel(const Cand* __restrict__ cand, uint64_t m, uint32_t k, const uint64_t* ids, Cand* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  Cand* lists = reinterpret_cast<Cand*>(smem);
  int* counts = reinterpret_cast<int*>(lists + kWarps * k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const Cand* c = cand + blockIdx.x * m;
  Cand* o = out + static_cast<uint64_t>(blockIdx.x) * k;
  if (k <= 32) {
    // Lists in registers (an insertion is a ballot and two shuffles, not a
    // shift through shared memory): the fused kernels' many short chunk
    // lists took 75 us per 100 queries with shared-memory lists (H200).
    RegList rl = RegList::make(static_cast<int>(k));
    merge_block(rl, c, m, k, ids, lists, counts, o, warp, lane);
  } else {
    WarpList wl{lists + warp * k, static_cast<int>(k), 0};
    merge_block(wl, c, m, k, ids, lists, counts, o, warp, lane);
  }
}

// One warp per candidate: the exact key from the stored row, summed as the
// scans sum it (row_sums: 16-byte vectors a lane, then the xor-shuffle
// reduction), so a re-scored batch reports the bits a single-query scan or
// an index's probe scan reports for the same row.
template <class T, bool L2>
__global__ void rescore_kernel(StoreRef s, const float* __restrict__ queries, const float* __restrict__ qnorms,
                               uint32_t nq, Cand* cand, uint32_t kc) {
  const uint64_t w = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (w >= static_cast<uint64_t>(nq) * kc) return;
  const uint32_t q = static_cast<uint32_t>(w / kc);
  Cand& c = cand[w];
  if (c.slot == kNoSlot) return;
  const unsigned char* rows[1] = {static_cast<const unsigned char*>(s.vectors) +
                                  static_cast<uint64_t>(c.slot) * s.ld * sizeof(T)};
  float acc[1][1];
  row_sums<T, L2, 0, 1, 1>(rows, queries + static_cast<uint64_t>(q) * s.ld, s.ld, lane, acc);
  if (lane == 0) c.key = key_of(s, acc[0][0], qnorms[q], slot_meta(s, c.slot));
}

// One block per query: re-sorts a rescored list in place by rank. An
// entry's rank counts the entries ordered before it (empty entries and NaN
// keys last; equal entries by index, so the ranks are a permutation). A
// warp inserting the kc entries one after another took 93 us for 32 lists
// of 200 on the H200: each insertion is a dependent chain of shuffles.
__device__ __forceinline__ bool resort_before(Cand a, Cand b, const uint64_t* ids) {
  const bool ea = a.slot == kNoSlot || a.key != a.key, eb = b.slot == kNoSlot || b.key != b.key;
  if (ea || eb) return !ea && eb;
  return ranks_before(a.key, a.slot, b.key, b.slot, ids);
}

__global__ void resort_kernel(Cand* cand, uint32_t kc, const uint64_t* ids) {
  extern __shared__ __align__(16) unsigned char smem[];
  Cand* list = reinterpret_cast<Cand*>(smem);
  Cand* c = cand + static_cast<uint64_t>(blockIdx.x) * kc;
  for (uint32_t j = threadIdx.x; j < kc; j += blockDim.x) list[j] = c[j];
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < kc; i += blockDim.x) {
    const Cand e = list[i];
    uint32_t rank = 0;
    for (uint32_t j = 0; j < kc; ++j) {
      const Cand o = list[j];
      rank += resort_before(o, e, ids) || (j < i && !resort_before(e, o, ids));
    }
    c[rank] = e.slot == kNoSlot ? empty_cand() : e;
  }
}

__global__ void emit_kernel(const Cand* lists, uint32_t nq, uint32_t kc, uint32_t k, uint64_t k_out,
                            const uint64_t* ids, bool negate, uint64_t* out_ids, float* out_scores) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<uint64_t>(nq) * k_out) return;
  const uint64_t q = i / k_out, j = i % k_out;
  const Cand c = j < k ? lists[q * kc + j] : empty_cand();
  if (c.slot == kNoSlot) {
    out_ids[i] = ~0ull;
    out_scores[i] = __int_as_float(0x7fc00000);
  } else {
    out_ids[i] = ids[c.slot];
    out_scores[i] = negate ? -c.key : c.key;
  }
}

size_t list_smem(uint32_t k) { return kWarps * k * sizeof(Cand) + kWarps * sizeof(int); }

}  // namespace

void launch_select_rows(const float* vals, bool raw, const StoreRef& s, const float* qnorms, uint32_t nq, uint32_t n,
                        uint32_t first, uint32_t k, unsigned blocks_per_row, Cand* cand, uint64_t cand_stride,
                        uint64_t cand_offset, uint32_t* thr, cudaStream_t st) {
  for (uint32_t q0 = 0; q0 < nq; q0 += 65535) {  // grid.y limit
    const uint32_t nqq = std::min<uint32_t>(65535, nq - q0);
    const dim3 grid(blocks_per_row, nqq);
    auto kernel = s.act && raw ? select_rows_kernel<true> : select_rows_kernel<false>;
    kernel<<<grid, kThreads, list_smem(k), st>>>(vals + static_cast<uint64_t>(q0) * n, raw, s,
                                                 qnorms ? qnorms + q0 : nullptr, n, first, k, cand + q0 * cand_stride,
                                                 cand_stride, cand_offset, thr ? thr + q0 : nullptr);
    MNEMO_CUDA_LAUNCHED("select_rows_kernel");
  }
}

void launch_merge(const Cand* cand, uint32_t nq, uint64_t m, uint32_t k, const uint64_t* ids, Cand* out,
                  cudaStream_t st) {
  merge_kernel<<<nq, kThreads, list_smem(k), st>>>(cand, m, k, ids, out);
  MNEMO_CUDA_LAUNCHED("merge_kernel");
}

void launch_rescore(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, Cand* cand, uint32_t kc,
                    cudaStream_t st) {
  const uint64_t warps = static_cast<uint64_t>(nq) * kc;
  const unsigned blocks = ceil_div(warps * 32, 256);
  const bool l2 = s.metric == KeyMetric::l2;
  auto kernel = [&](auto tag) {
    using T = decltype(tag);
    return l2 ? rescore_kernel<T, true> : rescore_kernel<T, false>;
  };
  switch (s.dtype) {
    case DType::f16: kernel(__half{})<<<blocks, 256, 0, st>>>(s, queries, qnorms, nq, cand, kc); break;
    case DType::bf16: kernel(__nv_bfloat16{})<<<blocks, 256, 0, st>>>(s, queries, qnorms, nq, cand, kc); break;
    default: kernel(float{})<<<blocks, 256, 0, st>>>(s, queries, qnorms, nq, cand, kc); break;
  }
  MNEMO_CUDA_LAUNCHED("rescore_kernel");
  if (kc > static_cast<uint32_t>(kSmallKMax)) return;
  // Whole 16-byte words: the compiled rank loop reads the list two entries
  // at a time, and compute-sanitizer's memcheck flagged the pair read past
  // an odd kc's last entry (k = 5, kc = 21).
  const size_t smem = (kc * sizeof(Cand) + 15) / 16 * 16;
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(resort_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "resort smem");
  resort_kernel<<<nq, std::min(256u, (kc + 31) / 32 * 32), smem, st>>>(cand, kc, s.ids);
  MNEMO_CUDA_LAUNCHED("resort_kernel");
}

void launch_emit(const Cand* lists, uint32_t nq, uint32_t kc, uint32_t k, uint64_t k_out, const uint64_t* ids,
                 KeyMetric metric, uint64_t* out_ids, float* out_scores, cudaStream_t st) {
  const uint64_t n = static_cast<uint64_t>(nq) * k_out;
  if (n == 0) return;
  emit_kernel<<<ceil_div(n, 256), 256, 0, st>>>(lists, nq, kc, k, k_out, ids, metric == KeyMetric::l2, out_ids,
                                                out_scores);
  MNEMO_CUDA_LAUNCHED("emit_kernel");
}

}  // namespace mnemo::cuda
