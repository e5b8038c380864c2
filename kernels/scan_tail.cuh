// What the single-pass scans (scan_topk.cu, bulk_scan.cu) do after their
// rows: fold the warps' lists into the block's, publish it, and in the last
// block to finish merge every block's list into the answer.
#pragma once

#include <cuda/atomic>

#include "list_merge.cuh"
#include "search_kernels.h"

namespace mnemo::cuda {

constexpr int kScanWarps = 8;
constexpr int kScanThreads = kScanWarps * 32;

// A warp's list for one query: in registers for k <= 32, else in shared
// memory at `at`.
template <class List>
__device__ __forceinline__ List make_list(Cand* at, uint32_t k);
template <>
__device__ __forceinline__ WarpList make_list<WarpList>(Cand* at, uint32_t k) {
  return WarpList{at, static_cast<int>(k), 0};
}
template <>
__device__ __forceinline__ RegList make_list<RegList>(Cand*, uint32_t k) {
  return RegList::make(static_cast<int>(k));
}

// Folds the block's warp lists for one query into warp 0's `mine` in three
// rounds of pairs (a tree, not seven folds one after another): warp w's
// list is stored at base + w * stride * k, its count at counts[w * stride].
// Every thread of the block calls it; after it warp 0's list is also at
// base.
template <class List>
__device__ __forceinline__ void fold_tree(List& mine, Cand* base, int* counts, int stride, uint32_t k,
                                          const uint64_t* ids, int warp, int lane) {
  Cand* own = base + static_cast<uint64_t>(warp) * stride * k;
  mine.store(own, k, lane);
  if (lane == 0) counts[warp * stride] = mine.n;
  __syncthreads();
  for (int step = 1; step < kScanWarps; step *= 2) {
    if (warp % (2 * step) == 0) {
      const int o = warp + step;
      absorb(mine, base + static_cast<uint64_t>(o) * stride * k, counts[o * stride], ids, lane);
      mine.store(own, k, lane);
      if (lane == 0) counts[warp * stride] = mine.n;
    }
    __syncthreads();
  }
}

// Everything after a scan's rows, called by every thread of a block of
// kScanWarps warps. wl: this warp's lists of QB queries (nq of them used);
// lists [warps][QB][k] and counts [warps][QB] in shared memory. Writes the
// block's lists to cand[q][block][k]; with a ticket, the last block merges
// them and writes the answer (user ids and scores, or tail.lists).
template <class List, int QB>
__device__ void finish_scan(List (&wl)[QB], Cand* lists, int* counts, const uint64_t* ids, uint32_t nq, uint32_t k,
                            Cand* cand, const ScanTail& tail, int warp, int lane) {
  __shared__ bool s_last;
#pragma unroll
  for (int q = 0; q < QB; ++q) {
    if (q >= static_cast<int>(nq)) break;
    fold_tree(wl[q], lists + q * k, counts + q, QB, k, ids, warp, lane);
    if (warp == 0) {
      // The block list (warp 0's, now at lists + q * k) to global memory.
      const Cand* mine = lists + q * k;
      Cand* out = cand + (static_cast<uint64_t>(q) * gridDim.x + blockIdx.x) * k;
      for (uint32_t j = lane; j < k; j += 32) out[j] = mine[j];
      // Entry j of this block's list raises group (block + j) % k. Each
      // group's maximum is then a key of a distinct row, so the smallest of
      // the k maxima bounds the query's k-th best key from below (at least
      // as tightly as any block's k-th key: its k entries reach all k groups).
      if (tail.ticket)
        for (uint32_t j = lane; j < static_cast<uint32_t>(wl[q].n); j += 32)
          atomicMax(tail.groups + q * k + (blockIdx.x + j) % k, ordered_bits(mine[j].key));
    }
  }
  if (!tail.ticket) return;
  // The last block to finish merges every block's list (one launch from
  // the scan to the answer). One acquire-release ticket per block: the
  // barrier orders the block's list writes before thread 0's release, and
  // its acquire (with the barrier after it) makes every block's lists
  // visible to the last block.
  __syncthreads();
  if (threadIdx.x == 0) {
    ::cuda::atomic_ref<unsigned, ::cuda::thread_scope_device> ticket(*tail.ticket);
    s_last = ticket.fetch_add(1u, ::cuda::memory_order_acq_rel) == gridDim.x - 1;
  }
  __syncthreads();
  if (!s_last) return;
  const uint64_t m_all = static_cast<uint64_t>(gridDim.x) * k;
  for (int q = 0; q < static_cast<int>(nq) && q < QB; ++q) {
    // Only entries at or above the bound can be among the k best: most
    // blocks' lists are skipped after one comparison per entry. Each warp
    // takes the minimum of the group maxima itself (no barrier); a group
    // left zero (no entry fell in it) means no bound.
    uint32_t bound_bits = ~0u;
    for (uint32_t j = lane; j < k; j += 32) bound_bits = min(bound_bits, __ldcg(tail.groups + q * k + j));
    bound_bits = __reduce_min_sync(kFullMask, bound_bits);
    // Compared as floats, so -0 and +0 stay equal as in ranks_before.
    const float bound = bound_bits == 0 ? -__int_as_float(0x7f800000) : from_ordered_bits(bound_bits);
    // Entries as one 8-byte word (key bits low, slot high), from L2.
    const auto* c = reinterpret_cast<const unsigned long long*>(cand + static_cast<uint64_t>(q) * m_all);
    List w = make_list<List>(lists + (warp * QB + q) * k, k);
    // kBatch loads in flight per lane before any is offered: the offers
    // would otherwise wait one L2 round trip per 32 entries.
    constexpr int kBatch = 8;
    for (uint64_t b0 = static_cast<uint64_t>(warp) * 32; b0 < m_all; b0 += kBatch * kScanThreads) {
      unsigned long long v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const uint64_t j = b0 + u * kScanThreads + lane;
        v[u] = j < m_all ? __ldcg(c + j) : ~0ull;
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const float key = __uint_as_float(static_cast<uint32_t>(v[u]));
        const uint32_t slot = static_cast<uint32_t>(v[u] >> 32);
        const bool has = slot != kNoSlot && key >= bound;
        if (__any_sync(kFullMask, has)) w.offer(has, key, slot, ids, lane);
      }
    }
    fold_tree(w, lists + q * k, counts + q, QB, k, ids, warp, lane);
    if (warp == 0) {
      const Cand* fin = lists + q * k;  // warp 0's list, stored by fold_tree
      const int n_fin = w.n;
      if (tail.out_ids) {
        // Straight to user ids and scores (emit_kernel's rule).
        uint64_t* oi = tail.out_ids + q * tail.k_out;
        float* os = tail.out_scores + q * tail.k_out;
        for (uint64_t j = lane; j < tail.k_out; j += 32) {
          const bool have = j < static_cast<uint64_t>(n_fin);
          const Cand e = have ? fin[j] : empty_cand();
          oi[j] = have ? ids[e.slot] : ~0ull;
          os[j] = have ? (tail.negate ? -e.key : e.key) : __int_as_float(0x7fc00000);
        }
      } else {
        Cand* o = tail.lists + static_cast<uint64_t>(q) * k;
        for (uint32_t j = lane; j < k; j += 32) o[j] = fin[j];
      }
    }
    __syncthreads();
  }
  // Leave the counters zero for the next launch on this context (every
  // warp has read the groups: the loop above ends with a barrier).
  for (uint32_t j = threadIdx.x; j < QB * k; j += kScanThreads) tail.groups[j] = 0;
  if (threadIdx.x == 0) {
    *tail.ticket = 0;
    if (tail.next_unit) *tail.next_unit = 0;
  }
}

}  // namespace mnemo::cuda
