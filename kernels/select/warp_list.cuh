// A sorted top-k list kept by one warp in shared memory, best first, with
// the library's order: larger key first, equal keys by smaller user id. The
// list holds slots; ids are looked up only to break exact ties.
#pragma once

#include <cstdint>

namespace mnemo::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

// The slot of an empty list entry.
constexpr uint32_t kNoSlot = 0xffffffffu;

struct Cand {
  float key;
  uint32_t slot;
};

// An empty list entry: key NaN, no slot.
__device__ __forceinline__ Cand empty_cand() { return Cand{__int_as_float(0x7fc00000), kNoSlot}; }

// a ranks strictly before b. NaN keys never reach a list.
__device__ __forceinline__ bool ranks_before(float ka, uint32_t sa, float kb, uint32_t sb, const uint64_t* ids) {
  return ka > kb || (ka == kb && ids[sa] < ids[sb]);
}

// Offers each lane's candidate (has = true) to a list (WarpList or
// RegList): those that enter are inserted one after another.
template <class List>
__device__ void offer_each(List& l, bool has, float key, uint32_t slot, const uint64_t* ids, int lane) {
  unsigned m = __ballot_sync(kFullMask, has && l.admits(key, slot, ids));
  while (m) {
    const int src = __ffs(m) - 1;
    m &= m - 1;
    const float kk = __shfl_sync(kFullMask, key, src);
    const uint32_t ss = __shfl_sync(kFullMask, slot, src);
    if (l.admits(kk, ss, ids)) l.insert(kk, ss, ids, lane);
  }
}

// Offers the n entries of c (an array in shared or global memory) to a
// list, a warp's 32 at a time.
template <class List>
__device__ __forceinline__ void offer_all(List& l, const Cand* c, int n, const uint64_t* ids, int lane) {
  for (int b = 0; b < n; b += 32) {
    const int j = b + lane;
    const bool has = j < n;
    const Cand x = has ? c[j] : Cand{0.0f, 0};
    l.offer(has, x.key, x.slot, ids, lane);
  }
}

struct WarpList {
  Cand* c;  // [k] in shared (or global) memory
  int k;
  int n;  // filled entries, warp-uniform

  // Entries [0, len) to out: the list, then empty entries (a no-op copy
  // when out is the list itself).
  __device__ void store(Cand* out, uint32_t len, int lane) const {
    // Each lane reads and writes only its own indices.
    for (uint32_t j = lane; j < len; j += 32) out[j] = static_cast<int>(j) < n ? c[j] : empty_cand();
    __syncwarp();
  }

  // Whether (key, slot) would enter the list.
  __device__ __forceinline__ bool admits(float key, uint32_t slot, const uint64_t* ids) const {
    if (key != key) return false;
    if (n < k) return true;
    const Cand w = c[k - 1];
    return ranks_before(key, slot, w.key, w.slot, ids);
  }

  // Warp-wide insertion of one candidate held identically by all lanes.
  __device__ void insert(float key, uint32_t slot, const uint64_t* ids, int lane) {
    int pos = 0;
    for (int base = 0; base < n; base += 32) {
      const int j = base + lane;
      const bool b = j < n && ranks_before(c[j].key, c[j].slot, key, slot, ids);
      pos += __popc(__ballot_sync(kFullMask, b));
    }
    if (pos >= k) return;
    const int last = n < k ? n : k - 1;  // entries [pos, last) shift right by one
    for (int base = last - 1; base >= pos; base -= 32) {
      const int j = base - lane;
      const bool act = j >= pos;
      Cand v;
      if (act) v = c[j];
      __syncwarp();
      if (act) c[j + 1] = v;
      __syncwarp();
    }
    // Every lane's reads above (admits, the position scan) must finish before
    // the write, also when nothing shifted.
    __syncwarp();
    if (lane == 0) c[pos] = Cand{key, slot};
    __syncwarp();
    if (n < k) ++n;
  }

  // Each lane may hold one candidate (has = true); those that enter are
  // inserted one after another.
  __device__ void offer(bool has, float key, uint32_t slot, const uint64_t* ids, int lane) {
    offer_each(*this, has, key, slot, ids, lane);
  }
};

// The same list for k <= 32 held in registers: lane j holds entry j, so an
// insertion is one ballot and one shuffle, with no shared memory and no
// warp barriers (the scan's common case, k = 10).
struct RegList {
  int k;
  int n;  // filled entries, warp-uniform
  float key;
  uint32_t slot;
  float worst_key;  // entry k - 1 once the list is full (warp-uniform)
  uint32_t worst_slot;

  __device__ static RegList make(int k_) { return RegList{k_, 0, 0.0f, kNoSlot, 0.0f, kNoSlot}; }

  __device__ __forceinline__ bool admits(float kk, uint32_t ss, const uint64_t* ids) const {
    if (kk != kk) return false;
    if (n < k) return true;
    return ranks_before(kk, ss, worst_key, worst_slot, ids);
  }

  // Insertion of an admitted candidate held identically by all lanes.
  __device__ __forceinline__ void insert(float kk, uint32_t ss, const uint64_t* ids, int lane) {
    const bool before = lane < n && ranks_before(key, slot, kk, ss, ids);
    const int pos = __popc(__ballot_sync(kFullMask, before));
    const float up_k = __shfl_up_sync(kFullMask, key, 1);
    const uint32_t up_s = __shfl_up_sync(kFullMask, slot, 1);
    if (lane > pos) key = up_k, slot = up_s;
    if (lane == pos) key = kk, slot = ss;
    if (n < k) ++n;
    if (n == k) {
      worst_key = __shfl_sync(kFullMask, key, k - 1);
      worst_slot = __shfl_sync(kFullMask, slot, k - 1);
    }
  }

  __device__ void offer(bool has, float kk, uint32_t ss, const uint64_t* ids, int lane) {
    offer_each(*this, has, kk, ss, ids, lane);
  }

  // Entries [0, len) to out (len <= 32): the list, then empty entries.
  __device__ void store(Cand* out, uint32_t len, int lane) const {
    if (static_cast<uint32_t>(lane) < len) out[lane] = lane < n ? Cand{key, slot} : empty_cand();
    __syncwarp();
  }
};

// Order-preserving map of a float key to uint32 (larger key, larger value).
__device__ __forceinline__ uint32_t ordered_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The inverse of ordered_bits.
__device__ __forceinline__ float from_ordered_bits(uint32_t b) {
  return __uint_as_float((b & 0x80000000u) ? (b & 0x7fffffffu) : ~b);
}

}  // namespace mnemo::cuda
