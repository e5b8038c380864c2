// What the single-pass scans (scan_topk.cu, bulk_scan.cu) do after their
// rows: select the block's list from its warps' lists, publish it, and in
// the last block to finish select the answer from every block's list. By
// rank counting for register lists (k <= 32), by ranks found in binary
// searches for shared-memory lists; the last block ranks the survivors of
// its bound, and merges lists where more than kRankMax survive.
#pragma once

#include <cuda/atomic>
#include <type_traits>

#include "search/search_kernels.h"
#include "select/list_merge.cuh"

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

// Query q's starting bound (ScanTail::start) as a key, -inf where none.
// Compared as floats, a key equal to it (also -0 against +0) is offered.
__device__ __forceinline__ float start_bound(const unsigned* bits, int q) {
  const unsigned b = bits ? bits[q] : 0u;
  return b == 0 ? -__int_as_float(0x7f800000) : from_ordered_bits(b);
}

// Folds the block's warp lists for one query into warp 0's `mine` in three
// rounds of pairs (a tree, not seven folds one after another), where the
// tail merges lists (see the top of the file): warp w's
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

// Survivors of the last block's merge ranked in shared memory at most; more
// (ties at the bound) take the list merge. Ranking m survivors costs
// m / kScanThreads * m comparisons per thread.
constexpr uint32_t kRankMax = 512;

// Where the last block puts one entry of the answer: rank r of a query's
// merged list (user ids and scores, or the tail's list).
__device__ __forceinline__ void put_answer(const ScanTail& tail, const uint64_t* ids, uint32_t k, int q, uint64_t r,
                                           bool have, Cand e) {
  if (tail.out_ids) {
    if (r >= tail.k_out) return;
    tail.out_ids[q * tail.k_out + r] = have ? ids[e.slot] : ~0ull;
    tail.out_scores[q * tail.k_out + r] =
        have ? (tail.negate ? -e.key : e.key) : __int_as_float(static_cast<int>(0x7fc00000));
  } else if (r < k) {
    tail.lists[static_cast<uint64_t>(q) * k + r] = have ? e : empty_cand();
  }
}

// Rank counting, the tails' selection for register lists: an entry's rank
// among distinct slots is the number of entries that rank before it, the
// order being total. Keys are compared alone (a short loop, since this code
// runs once per block and its instructions are fetched cold); only an entry
// whose key another entry shares is counted again with the ids.

// The rank of e (at index self) among the n entries of c. (Not inlined,
// so that the last block's merge would run instructions its block list's
// ranking had fetched, it measured 0.6 us slower at 10k rows.)
__device__ __forceinline__ int rank_in(const Cand* c, int n, Cand e, int self, const uint64_t* ids) {
  int before = 0, same = 0;
  for (int j = 0; j < n; ++j) {
    const float kj = c[j].key;
    before += kj > e.key;
    same += kj == e.key && j != self;
  }
  if (same == 0) return before;
  before = 0;
  for (int j = 0; j < n; ++j)
    if (j != self) before += ranks_before(c[j].key, c[j].slot, e.key, e.slot, ids);
  return before;
}

// The block's list for query q from its warps' register lists (k <= 32, so
// the 8k entries are one per thread at most): each entry's rank among all of
// them, the entries ranked below k written to out[rank] (the block's sorted
// list, padded with empty entries).
template <int QB>
__device__ __forceinline__ void block_list_by_rank(const Cand* lists, const int* counts, const uint64_t* ids, int q,
                                                   uint32_t k, Cand* out, unsigned* groups, bool pad) {
  int total = 0;
#pragma unroll
  for (int w = 0; w < kScanWarps; ++w) total += counts[w * QB + q];
  const int t = threadIdx.x, w = t / static_cast<int>(k), p = t % static_cast<int>(k);
  if (w < kScanWarps && p < counts[w * QB + q]) {
    const Cand e = lists[(w * QB + q) * k + p];
    int rank = 0;
#pragma unroll 1
    for (int o = 0; o < kScanWarps; ++o)
      rank += rank_in(lists + (o * QB + q) * k, counts[o * QB + q], e, o == w ? p : -1, ids);
    if (rank < static_cast<int>(k)) {
      out[rank] = e;
      // Entry j of a block's list raises group (block + j) % k (see
      // finish_scan).
      if (groups) atomicMax(groups + q * k + (blockIdx.x + rank) % k, ordered_bits(e.key));
    }
  }
  if (pad && t >= total && t < static_cast<int>(k)) out[t] = empty_cand();
}

// The block's list for query q from its warps' shared-memory lists (k up to
// kSmallKMax): an entry's rank is its place in its own list (lists are
// sorted and hold distinct slots) plus, for each other list, the entries
// ranking before it, found by a binary search in the same order. The
// entries ranked below k go to out[rank], the rest of out is padded. Seven
// searches of log2(k) steps an entry, where folding the lists by insertion
// shifted up to k entries an insertion: on the H200 the fold took 0.09-0.14
// ms more at k = 100 (one query over 1 GB, six widths), whatever the
// store's size.
template <int QB>
__device__ __forceinline__ void block_list_by_search(const Cand* lists, const int* counts, const uint64_t* ids, int q,
                                                     uint32_t k, Cand* out, unsigned* groups, bool pad) {
  int total = 0;
#pragma unroll
  for (int w = 0; w < kScanWarps; ++w) total += counts[w * QB + q];
  const int kk = static_cast<int>(k);
  for (int e = threadIdx.x; e < kScanWarps * kk; e += kScanThreads) {
    const int w = e / kk, p = e % kk;
    if (p >= counts[w * QB + q]) continue;
    const Cand c = lists[(w * QB + q) * kk + p];
    int rank = p;
#pragma unroll 1
    for (int o = 0; o < kScanWarps; ++o) {
      if (o == w) continue;
      const Cand* l = lists + (o * QB + q) * kk;
      int lo = 0, hi = counts[o * QB + q];
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (ranks_before(l[mid].key, l[mid].slot, c.key, c.slot, ids))
          lo = mid + 1;
        else
          hi = mid;
      }
      rank += lo;
    }
    if (rank < kk) {
      out[rank] = c;
      if (groups) atomicMax(groups + q * k + (blockIdx.x + rank) % k, ordered_bits(c.key));
    }
  }
  if (pad)
    for (int r = total + static_cast<int>(threadIdx.x); r < kk; r += kScanThreads) out[r] = empty_cand();
}

// The last block's merge of query q by rank: the m entries at or above the
// bound are in `surv` (m <= kRankMax); each thread ranks some of them
// against all m and writes those ranked below k.
__device__ __forceinline__ void merge_by_rank(const Cand* surv, int m, const uint64_t* ids, int q, uint32_t k,
                                              const ScanTail& tail) {
  for (int i = threadIdx.x; i < m; i += kScanThreads) {
    const Cand e = surv[i];
    const int rank = rank_in(surv, m, e, i, ids);
    if (rank < static_cast<int>(k)) put_answer(tail, ids, k, q, rank, true, e);
  }
  const uint64_t n_fin = min(static_cast<uint32_t>(m), k), len = tail.out_ids ? tail.k_out : k;
  for (uint64_t r = n_fin + threadIdx.x; r < len; r += kScanThreads) put_answer(tail, ids, k, q, r, false, Cand{});
}

// Everything after a scan's rows, called by every thread of a block of
// kScanWarps warps. wl: this warp's lists of QB queries (nq of them used);
// lists [warps][QB][k] and counts [warps][QB] in shared memory; spare:
// shared memory free once the rows are scored (spare_cap entries). Writes
// the block's lists to cand[q][block][k]; with a ticket, the last block
// merges them and writes the answer (user ids and scores, or tail.lists).
template <class List, int QB>
__device__ void finish_scan(List (&wl)[QB], Cand* lists, int* counts, const uint64_t* ids, uint32_t nq, uint32_t k,
                            Cand* cand, const ScanTail& tail, int warp, int lane, Cand* spare, uint32_t spare_cap) {
  constexpr bool kRegs = std::is_same<List, RegList>::value;
  __shared__ bool s_last;
  __shared__ int s_count;
  // Entry j of a block's list raises group (block + j) % k. Each group's
  // maximum is then a key of a distinct row, so the smallest of the k
  // maxima bounds the query's k-th best key from below (at least as tightly
  // as any block's k-th key: its k entries reach all k groups).
  unsigned* const groups = tail.ticket ? tail.groups : nullptr;
  // Compacted block lists (tail.fill): each block appends its entries to
  // its query's region of cand (at an offset taken from fill[q]) instead of
  // writing k entries padded with empty ones, and the last block reads only
  // what was appended. With a sampled bound most block lists hold a few
  // entries: at k = 100 the last block read blocks * k entries (up to
  // 422 KB from L2 at 528 blocks), nearly all of them empty.
  const bool compact = tail.fill != nullptr && tail.ticket != nullptr && !tail.fold;
  __shared__ uint32_t s_base[QB];
  const uint64_t m_all = static_cast<uint64_t>(gridDim.x) * k;
  // Where the block's list for query q goes, once s_base is set.
  auto block_out = [&](int q) {
    return compact ? cand + static_cast<uint64_t>(q) * m_all + s_base[q]
                   : cand + (static_cast<uint64_t>(q) * gridDim.x + blockIdx.x) * k;
  };
  // The counts are in place: reserve each query's entries.
  auto reserve = [&]() {
    if (compact && threadIdx.x < min(nq, static_cast<uint32_t>(QB))) {
      const int q = threadIdx.x;
      int total = 0;
#pragma unroll
      for (int w = 0; w < kScanWarps; ++w) total += counts[w * QB + q];
      s_base[q] = atomicAdd(tail.fill + q, min(static_cast<uint32_t>(total), k));
    }
    __syncthreads();
  };
  if constexpr (kRegs) {
#pragma unroll
    for (int q = 0; q < QB; ++q) {
      wl[q].store(lists + (warp * QB + q) * k, k, lane);
      if (lane == 0) counts[warp * QB + q] = wl[q].n;
    }
    __syncthreads();
    reserve();
    for (int q = 0; q < static_cast<int>(nq) && q < QB; ++q)
      block_list_by_rank<QB>(lists, counts, ids, q, k, block_out(q), groups, !compact);
  } else if (!tail.fold) {
    // Shared-memory lists are already in place: their counts, then the
    // block's list by search.
#pragma unroll
    for (int q = 0; q < QB; ++q)
      if (lane == 0) counts[warp * QB + q] = wl[q].n;
    __syncthreads();
    reserve();
    for (int q = 0; q < static_cast<int>(nq) && q < QB; ++q)
      block_list_by_search<QB>(lists, counts, ids, q, k, block_out(q), groups, !compact);
  } else {
#pragma unroll
    for (int q = 0; q < QB; ++q) {
      if (q >= static_cast<int>(nq)) break;
      fold_tree(wl[q], lists + q * k, counts + q, QB, k, ids, warp, lane);
      if (warp == 0) {
        // The block list (warp 0's, now at lists + q * k) to global memory.
        const Cand* mine = lists + q * k;
        Cand* out = cand + (static_cast<uint64_t>(q) * gridDim.x + blockIdx.x) * k;
        for (uint32_t j = lane; j < k; j += 32) out[j] = mine[j];
        if (groups)
          for (uint32_t j = lane; j < static_cast<uint32_t>(wl[q].n); j += 32)
            atomicMax(groups + q * k + (blockIdx.x + j) % k, ordered_bits(mine[j].key));
      }
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
  const uint32_t cap = min(spare_cap, kRankMax);
  for (int q = 0; q < static_cast<int>(nq) && q < QB; ++q) {
    // Entries as one 8-byte word (key bits low, slot high), from L2.
    const auto* c = reinterpret_cast<const unsigned long long*>(cand + static_cast<uint64_t>(q) * m_all);
    // Entries written: every block's k, or what the blocks appended (read
    // past L1, which may hold the counter words' line from before).
    const uint64_t m_q = compact ? __ldcg(tail.fill + q) : m_all;
    // Register lists: the survivors gathered into `spare`, then ranked
    // (merge_by_rank) unless more than cap survive. Otherwise, and for
    // shared-memory lists, each warp offers its survivors to a list and the
    // block folds the lists.
    if (threadIdx.x == 0) s_count = 0;
    __syncthreads();
    List w = make_list<List>(lists + (warp * QB + q) * k, k);
    // kBatch loads in flight per lane before any is offered: the offers
    // would otherwise wait one L2 round trip per 32 entries. (16 measured
    // no faster at 313 blocks and took 12 more registers.)
    constexpr int kBatch = 8;
    auto pass = [&](bool gather) {
      float bound = 0.0f;
      bool first = true;
      for (uint64_t b0 = static_cast<uint64_t>(warp) * 32; b0 < m_q; b0 += kBatch * kScanThreads) {
        unsigned long long v[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const uint64_t j = b0 + u * kScanThreads + lane;
          v[u] = j < m_q ? __ldcg(c + j) : ~0ull;
        }
        // Only entries at or above the bound can be among the k best: most
        // blocks' lists are skipped after one comparison per entry. Each
        // warp takes the minimum of the group maxima itself (no barrier),
        // its loads behind the first batch's; a group left zero (no entry
        // fell in it) means no bound.
        if (first) {
          first = false;
          uint32_t bits = ~0u;
          for (uint32_t j = lane; j < k; j += 32) bits = min(bits, __ldcg(tail.groups + q * k + j));
          bits = __reduce_min_sync(kFullMask, bits);
          // Compared as floats, so -0 and +0 stay equal as in ranks_before.
          bound = bits == 0 ? -__int_as_float(0x7f800000) : from_ordered_bits(bits);
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const float key = __uint_as_float(static_cast<uint32_t>(v[u]));
          const uint32_t slot = static_cast<uint32_t>(v[u] >> 32);
          const bool has = slot != kNoSlot && key >= bound;
          if (gather) {
            const unsigned mask = __ballot_sync(kFullMask, has);
            if (!mask) continue;
            int at = 0;
            if (lane == 0) at = atomicAdd(&s_count, __popc(mask));
            at = __shfl_sync(kFullMask, at, 0) + __popc(mask & ((1u << lane) - 1));
            if (has && static_cast<uint32_t>(at) < cap) spare[at] = Cand{key, slot};
          } else if (__any_sync(kFullMask, has)) {
            w.offer(has, key, slot, ids, lane);
          }
        }
      }
    };
    bool ranked = false;
    if ((kRegs || !tail.fold) && cap > 0) {
      pass(true);
      __syncthreads();
      const int m = s_count;
      if (static_cast<uint32_t>(m) <= cap) {
        merge_by_rank(spare, m, ids, q, k, tail);
        ranked = true;
      }
    }
    if (!ranked) {
      pass(false);
      fold_tree(w, lists + q * k, counts + q, QB, k, ids, warp, lane);
      if (warp == 0) {
        const Cand* fin = lists + q * k;  // warp 0's list, stored by fold_tree
        const uint64_t len = tail.out_ids ? tail.k_out : k;
        for (uint64_t j = lane; j < len; j += 32) {
          const bool have = j < static_cast<uint64_t>(w.n);
          put_answer(tail, ids, k, q, j, have, have ? fin[j] : Cand{});
        }
      }
    }
    __syncthreads();
  }
  // Leave the counters zero for the next launch on this context (every
  // warp has read the groups: the loop above ends with a barrier).
  for (uint32_t j = threadIdx.x; j < QB * k; j += kScanThreads) tail.groups[j] = 0;
  if (tail.live_bound && threadIdx.x < QB) tail.live_bound[threadIdx.x] = 0;
  if (compact && threadIdx.x < QB) tail.fill[threadIdx.x] = 0;
  if (threadIdx.x == 0) {
    *tail.ticket = 0;
    if (tail.next_unit) *tail.next_unit = 0;
  }
}

}  // namespace mnemo::cuda
