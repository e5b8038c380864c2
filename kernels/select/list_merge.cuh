// Merging two sorted warp lists in a fixed number of shuffle steps (a
// bitonic merge) instead of one insertion per entry: the scans' tails fold
// their warps' register lists this way. An insertion is a dependent chain of
// shuffles (about 300 cycles); folding a full list of 10 one entry at a time
// cost more than the rows of a small store.
#pragma once

#include "select/warp_list.cuh"

namespace mnemo::cuda {

// The library's order over entries that may be empty (slot kNoSlot): filled
// entries first, then ranks_before.
__device__ __forceinline__ bool entry_before(float ka, uint32_t sa, float kb, uint32_t sb, const uint64_t* ids) {
  if (sb == kNoSlot) return sa != kNoSlot;
  if (sa == kNoSlot) return false;
  return ranks_before(ka, sa, kb, sb, ids);
}

// One compare-exchange between lanes lane and lane ^ j, the better entry to
// the lower lane. Both lanes evaluate the same ordered pair (lower, upper),
// so they agree on whether to swap: no entry is duplicated or dropped, also
// between entries that do not order strictly (two empty ones).
__device__ __forceinline__ void exchange_best_low(float& key, uint32_t& slot, int j, const uint64_t* ids, int lane) {
  const float ok = __shfl_xor_sync(kFullMask, key, j);
  const uint32_t os = __shfl_xor_sync(kFullMask, slot, j);
  const bool upper = (lane & j) != 0;
  const bool lower_first = upper ? entry_before(ok, os, key, slot, ids) : entry_before(key, slot, ok, os, ids);
  if (!lower_first) key = ok, slot = os;
}

// Merges a sorted list b (entry per lane, kb/sb at lane j, nb filled) into
// l: l keeps the best min(k, l.n + nb) of both, sorted. The better of
// l[lane] and b[31 - lane] gives the best 32 of both as a bitonic sequence;
// five exchanges sort it.
__device__ __forceinline__ void merge_sorted(RegList& l, float kb, uint32_t sb, int nb, const uint64_t* ids, int lane) {
  float key = l.key;
  uint32_t slot = lane < l.n ? l.slot : kNoSlot;
  if (lane >= nb) sb = kNoSlot;
  const float rk = __shfl_sync(kFullMask, kb, 31 - lane);
  const uint32_t rs = __shfl_sync(kFullMask, sb, 31 - lane);
  if (entry_before(rk, rs, key, slot, ids)) key = rk, slot = rs;
#pragma unroll
  for (int j = 16; j > 0; j /= 2) exchange_best_low(key, slot, j, ids, lane);
  l.key = key;
  l.slot = slot;
  l.n = min(l.k, l.n + nb);
  if (l.n == l.k) {
    l.worst_key = __shfl_sync(kFullMask, key, l.k - 1);
    l.worst_slot = __shfl_sync(kFullMask, slot, l.k - 1);
  }
}

// Adds the n entries of c (a sorted list of at most k in shared or global
// memory) to a list: by insertion for shared-memory lists, by one merge for
// register lists.
template <class List>
__device__ __forceinline__ void absorb(List& l, const Cand* c, int n, const uint64_t* ids, int lane) {
  offer_all(l, c, n, ids, lane);
}
template <>
__device__ __forceinline__ void absorb<RegList>(RegList& l, const Cand* c, int n, const uint64_t* ids, int lane) {
  if (n <= 0) return;
  const Cand x = lane < n ? c[lane] : Cand{0.0f, kNoSlot};
  merge_sorted(l, x.key, x.slot, n, ids, lane);
}

}  // namespace mnemo::cuda
