// Large-k selection: per query row, a block finds the k-th best key by
// radix selection on order-preserving 32-bit keys (8 bits a pass), breaks
// ties at the threshold by a second radix selection on the user ids, gathers
// exactly k entries, and CUB's merge sort orders every query's k entries
// (key descending, id ascending) in one device-wide sort.
#include <algorithm>
#include <cub/block/block_merge_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_merge_sort.cuh>

#include "search/search_kernels.h"
#include "select/compact_select.h"
#include "select/overflow_rank.cuh"

namespace mnemo::cuda {

namespace {

constexpr int kThreads = 1024;

struct QCand {
  uint32_t q;
  float key;
  uint32_t slot;
};

// Candidates the prefilter kept per query: keys and slots [nq][cap], and
// their number (above cap: too many ties, the full row is searched). With
// dense_rows set, the key rows are those of one round (compact_select.h):
// an overflowed query of overflow_rank r in [dense_lo, dense_lo +
// dense_rows) has row r - dense_lo, other overflowed queries wait for their
// round, and compact queries are served in the round from 0.
struct Compact {
  const float* keys = nullptr;
  const uint32_t* slots = nullptr;
  const uint32_t* count = nullptr;
  uint32_t cap = 0;
  uint32_t dense_lo = 0, dense_rows = 0;
};

// User id of entry i: of slot i, or of the compact entry's slot.
struct SlotIds {
  const uint64_t* ids;
  const uint32_t* slot_of;
  __device__ uint64_t operator[](uint32_t i) const { return ids[slot_of ? slot_of[i] : i]; }
};

// 0 marks NaN (excluded); every real key maps to a positive value.
__device__ __forceinline__ uint32_t key_bits(float f) { return f != f ? 0u : ordered_bits(f); }

// Finds, among entries whose masked bits equal prefix, the digit holding the
// `need`-th largest (descending) or smallest (ascending) value.
template <class Get, class Match>
__device__ void radix_pass(uint32_t n, Get get, Match match, int shift, bool descending, uint32_t* hist, uint32_t& need,
                           uint32_t& digit, uint32_t& in_digit) {
  for (int i = threadIdx.x; i < 256; i += kThreads) hist[i] = 0;
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < n; i += kThreads)
    if (match(i)) atomicAdd(&hist[(get(i) >> shift) & 255u], 1u);
  __syncthreads();
  __shared__ uint32_t s_digit, s_need, s_in;
  if (threadIdx.x == 0) {
    uint32_t cum = 0, d = 0;
    for (int t = 0; t < 256; ++t) {
      d = descending ? 255 - t : t;
      if (cum + hist[d] >= need) break;
      cum += hist[d];
    }
    s_digit = d;
    s_need = need - cum;
    s_in = hist[d];
  }
  __syncthreads();
  digit = s_digit;
  need = s_need;
  in_digit = s_in;
  __syncthreads();
}

// Lists of up to kThreads entries are ordered by the selecting block itself
// (one entry a thread), where a device-wide merge sort took 13 us and two
// more launches for one list of 1000.
struct SortItem {
  float key;
  uint32_t slot;
  uint64_t id;
};
// Key descending, id ascending; padding (key -inf, id and slot all ones)
// last.
struct SortOrder {
  __device__ bool operator()(const SortItem& a, const SortItem& b) const {
    if (a.key != b.key) return a.key > b.key;
    if (a.id != b.id) return a.id < b.id;
    return a.slot < b.slot;
  }
};

// Exact selection of one query's k best over its whole key row, or over the
// compact candidates the prefilter kept for it (c.count[q] <= c.cap): then
// entry i is slot c.slots[q * cap + i]. With `sorted` (k <= kThreads) the
// k entries go there ordered, as Cand [nq][k] (padding: NaN key, slot all
// ones); else unordered to `out`.
__global__ void __launch_bounds__(kThreads)
    radix_select_kernel(const float* __restrict__ keys, uint32_t n_row, uint32_t k,
                        const uint64_t* __restrict__ all_ids, Compact c, QCand* out, Cand* sorted) {
  __shared__ uint32_t hist[256];
  __shared__ uint32_t s_count;
  using Reduce = cub::BlockReduce<uint32_t, kThreads>;
  __shared__ typename Reduce::TempStorage red;
  using Sort = cub::BlockMergeSort<SortItem, kThreads, 1>;
  __shared__ SortItem staged[kThreads];
  __shared__ typename Sort::TempStorage sort_tmp;
  const uint32_t q = blockIdx.x;
  const bool compact = c.count != nullptr && c.count[q] <= c.cap;
  uint64_t drow = q;
  if (c.dense_rows != 0) {
    // A round: the whole block takes the same branch (q is the block's).
    if (compact && c.dense_lo != 0) return;
    if (!compact) {
      const uint32_t r = overflow_rank(c.count, c.cap, q);
      if (r < c.dense_lo || r - c.dense_lo >= c.dense_rows) return;
      drow = r - c.dense_lo;
    }
  }
  const uint32_t n = compact ? c.count[q] : n_row;
  const float* row = compact ? c.keys + static_cast<uint64_t>(q) * c.cap : keys + drow * n_row;
  const uint32_t* slot_of = compact ? c.slots + static_cast<uint64_t>(q) * c.cap : nullptr;
  const SlotIds ids{all_ids, slot_of};
  QCand* o = out + static_cast<uint64_t>(q) * k;

  uint32_t valid_local = 0;
  for (uint32_t i = threadIdx.x; i < n; i += kThreads) valid_local += row[i] == row[i];
  __shared__ uint32_t s_valid;
  const uint32_t v = Reduce(red).Sum(valid_local);
  if (threadIdx.x == 0) s_valid = v, s_count = 0;
  __syncthreads();
  const uint32_t valid = s_valid;
  const uint32_t take = min(k, valid);

  // Threshold key T: the take-th largest key bits.
  uint32_t prefix = 0, mask = 0, need = take, digit = 0, in_digit = 0;
  if (take > 0 && take < valid) {
    for (int shift = 24; shift >= 0; shift -= 8) {
      const uint32_t p = prefix, m = mask;
      radix_pass(
          n, [&](uint32_t i) { return key_bits(row[i]); },
          [&](uint32_t i) {
            const uint32_t b = key_bits(row[i]);
            return b != 0 && (b & m) == p;
          },
          shift, true, hist, need, digit, in_digit);
      prefix |= digit << shift;
      mask |= 255u << shift;
    }
  }
  const bool all = take == valid;  // every valid entry is selected
  const uint32_t T = prefix;
  // Ties at T: keep the `need` smallest ids among in_digit equal entries.
  uint64_t id_limit = ~0ull;
  if (!all && in_digit > need) {
    uint64_t idp = 0, idm = 0;
    for (int shift = 56; shift >= 0; shift -= 8) {
      const uint64_t p = idp, m = idm;
      uint32_t d = 0, inn = 0;
      // Digits of 64-bit ids, taken 8 bits at a time from the top.
      radix_pass(
          n, [&](uint32_t i) { return static_cast<uint32_t>(ids[i] >> shift) & 255u; },
          [&](uint32_t i) { return key_bits(row[i]) == T && (ids[i] & m) == p; }, 0, false, hist, need, d, inn);
      idp |= static_cast<uint64_t>(d) << shift;
      idm |= 255ull << shift;
    }
    id_limit = idp;  // the need-th smallest tied id: take ties with id <= it
  }
  for (uint32_t i = threadIdx.x; i < n; i += kThreads) {
    const float f = row[i];
    const uint32_t b = key_bits(f);
    bool sel;
    if (b == 0)
      sel = false;
    else if (all)
      sel = true;
    else
      sel = b > T || (b == T && ids[i] <= id_limit);
    if (sel) {
      const uint32_t pos = atomicAdd(&s_count, 1u);
      const uint32_t slot = slot_of ? slot_of[i] : i;
      if (pos < k) {
        if (sorted)
          staged[pos] = SortItem{f, slot, ids[i]};
        else
          o[pos] = QCand{q, f, slot};
      }
    }
  }
  __syncthreads();
  if (sorted) {
    const uint32_t t = threadIdx.x;
    // Padding sorts last. (Assigned, not a conditional over a temporary:
    // that form crashes this toolkit's cicc.)
    SortItem item[1];
    item[0] = SortItem{__int_as_float(0xff800000), ~0u, ~0ull};
    if (t < min(s_count, k)) item[0] = staged[t];
    Sort(sort_tmp).Sort(item, SortOrder{});
    if (t < k)
      sorted[static_cast<uint64_t>(q) * k + t] =
          item[0].slot == ~0u ? Cand{__int_as_float(0x7fc00000), ~0u} : Cand{item[0].key, item[0].slot};
    return;
  }
  // Pad when fewer than k entries exist.
  for (uint32_t j = s_count + threadIdx.x; j < k; j += kThreads) o[j] = QCand{q, __int_as_float(0xff800000), kNoSlot};
}

// The prefilter: two 11-bit histogram levels over the key bits find, per
// query, a 22-bit prefix P such that the entries with key bits >= P (in
// their top 22 bits) hold the k best and few more; those are compacted and
// the exact radix selection runs on them alone. Every pass is spread over
// many blocks per query, where the exact selection is one block per query.
constexpr int kBins = 2048;
constexpr int kPrefThreads = 256;

struct PrefState {
  uint32_t prefix;  // chosen top bits so far, in place
  uint32_t need;    // entries still to take at the next level
  uint32_t none;    // 1: no valid key, nothing to select
};

__global__ void __launch_bounds__(kPrefThreads)
    hist_kernel(const float* __restrict__ keys, uint32_t n, int level, const PrefState* state, uint32_t* hist) {
  __shared__ uint32_t h[kBins];
  for (int i = threadIdx.x; i < kBins; i += kPrefThreads) h[i] = 0;
  __syncthreads();
  const uint32_t q = blockIdx.y;
  const float* row = keys + static_cast<uint64_t>(q) * n;
  const uint32_t top = level == 0 ? 0u : state[q].prefix >> 21;
  for (uint32_t i = blockIdx.x * kPrefThreads + threadIdx.x; i < n; i += gridDim.x * kPrefThreads) {
    const uint32_t b = key_bits(row[i]);
    if (b == 0) continue;
    if (level == 0)
      atomicAdd(&h[b >> 21], 1u);
    else if ((b >> 21) == top)
      atomicAdd(&h[(b >> 10) & (kBins - 1)], 1u);
  }
  __syncthreads();
  uint32_t* g = hist + static_cast<uint64_t>(q) * kBins;
  for (int i = threadIdx.x; i < kBins; i += kPrefThreads)
    if (h[i]) atomicAdd(&g[i], h[i]);
}

// One block per query: the bin (from the top) where the count reaches
// `need`, by a block-wide scan of the bins in descending order.
__global__ void __launch_bounds__(1024) pick_kernel(uint32_t* hist, int level, uint32_t k, PrefState* state) {
  using Scan = cub::BlockScan<uint32_t, 1024>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ uint32_t s_bin, s_before;
  const uint32_t q = blockIdx.x;
  uint32_t* h = hist + static_cast<uint64_t>(q) * kBins;
  uint32_t v[2] = {h[kBins - 1 - 2 * threadIdx.x], h[kBins - 2 - 2 * threadIdx.x]};
  uint32_t ex[2], total;
  Scan(tmp).ExclusiveSum(v, ex, total);
  PrefState st = state[q];
  if (level == 0) {
    st.need = min(k, total);
    st.prefix = 0;
    st.none = total == 0;
  }
  if (threadIdx.x == 0) s_bin = 0, s_before = 0;
  __syncthreads();
  if (!st.none) {
    for (int j = 0; j < 2; ++j)
      if (ex[j] < st.need && ex[j] + v[j] >= st.need) {
        s_bin = kBins - 1 - 2 * threadIdx.x - j;
        s_before = ex[j];
      }
  }
  __syncthreads();
  // Zero the bins for the next level (and the next call).
  h[kBins - 1 - 2 * threadIdx.x] = 0;
  h[kBins - 2 - 2 * threadIdx.x] = 0;
  if (threadIdx.x == 0) {
    if (!st.none) {
      st.prefix |= s_bin << (level == 0 ? 21 : 10);
      st.need -= s_before;
    }
    state[q] = st;
  }
}

// Entries whose top 22 key bits are at or above the prefix, appended to the
// query's compact list (the count keeps growing past cap: a sign to fall
// back).
__global__ void __launch_bounds__(kPrefThreads)
    compact_kernel(const float* __restrict__ keys, uint32_t n, const PrefState* state, float* ckeys, uint32_t* cslots,
                   uint32_t* count, uint32_t cap) {
  const uint32_t q = blockIdx.y;
  const PrefState st = state[q];
  if (st.none) return;
  const float* row = keys + static_cast<uint64_t>(q) * n;
  const uint32_t lo = st.prefix >> 10;
  const int lane = threadIdx.x % 32;
  const uint32_t stride = gridDim.x * kPrefThreads;
  for (uint32_t b = blockIdx.x * kPrefThreads + (threadIdx.x & ~31u); b < n; b += stride) {
    const uint32_t i = b + lane;
    float f = 0.0f;
    bool sel = false;
    if (i < n) {
      f = row[i];
      const uint32_t kb = key_bits(f);
      sel = kb != 0 && (kb >> 10) >= lo;
    }
    const unsigned m = __ballot_sync(kFullMask, sel);
    if (m == 0) continue;
    uint32_t base = 0;
    if (lane == 0) base = atomicAdd(count + q, static_cast<uint32_t>(__popc(m)));
    base = __shfl_sync(kFullMask, base, 0);
    if (sel) {
      const uint32_t pos = base + __popc(m & ((1u << lane) - 1u));
      if (pos < cap) {
        ckeys[static_cast<uint64_t>(q) * cap + pos] = f;
        cslots[static_cast<uint64_t>(q) * cap + pos] = i;
      }
    }
  }
}

uint32_t compact_cap(uint32_t k) { return k + 4096; }

__global__ void unpack_kernel(const QCand* in, uint64_t n, Cand* out) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    const QCand c = in[i];
    out[i] = c.slot == kNoSlot ? empty_cand() : Cand{c.key, c.slot};
  }
}

__global__ void pack_kernel(const Cand* in, uint32_t kc, uint64_t n, QCand* out) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    const Cand c = in[i];
    const float key = c.slot == kNoSlot ? __int_as_float(0xff800000) : c.key;
    out[i] = QCand{static_cast<uint32_t>(i / kc), key, c.slot};
  }
}

// Padding entries (slot UINT32_MAX, key -inf) sort last; the id lookup must
// not read past the table for them.
struct SafeOrder {
  const uint64_t* ids;
  __device__ bool operator()(const QCand& a, const QCand& b) const {
    if (a.q != b.q) return a.q < b.q;
    if (a.key != b.key) return a.key > b.key;
    const uint64_t ia = a.slot == kNoSlot ? ~0ull : ids[a.slot];
    const uint64_t ib = b.slot == kNoSlot ? ~0ull : ids[b.slot];
    return ia < ib;
  }
};

size_t sort_temp_bytes(uint64_t n) {
  size_t bytes = 0;
  cub::DeviceMergeSort::SortKeys(nullptr, bytes, static_cast<QCand*>(nullptr), static_cast<int64_t>(n),
                                 SafeOrder{nullptr});
  return bytes;
}

}  // namespace

namespace {

size_t round256(size_t b) { return (b + 255) / 256 * 256; }

// Scratch of the prefilter after the candidate and sort regions.
size_t prefilter_bytes(uint32_t nq, uint32_t k) {
  const uint64_t cap = compact_cap(k);
  return round256(static_cast<uint64_t>(nq) * kBins * 4) + round256(nq * sizeof(PrefState)) + round256(nq * 4ull) +
         round256(nq * cap * 4) + round256(nq * cap * 4);
}

}  // namespace

size_t large_select_temp_bytes(uint32_t nq, uint32_t k) {
  const uint64_t n = static_cast<uint64_t>(nq) * k;
  return round256(n * sizeof(QCand)) + sort_temp_bytes(n) + 256 + prefilter_bytes(nq, k);
}

void launch_large_select(const float* keys, uint32_t nq, uint32_t n, uint32_t k, const uint64_t* ids, Cand* out,
                         void* temp, size_t temp_bytes, cudaStream_t st) {
  const uint64_t total = static_cast<uint64_t>(nq) * k;
  auto* qc = static_cast<QCand*>(temp);
  // temp: the candidates, the prefilter's region, then the sort's scratch
  // (every region starts 256-byte aligned).
  const size_t head = round256(total * sizeof(QCand)) + prefilter_bytes(nq, k);
  auto* pf = static_cast<unsigned char*>(temp) + round256(total * sizeof(QCand));
  const uint32_t cap = compact_cap(k);
  auto* hist = reinterpret_cast<uint32_t*>(pf);
  pf += round256(static_cast<uint64_t>(nq) * kBins * 4);
  auto* state = reinterpret_cast<PrefState*>(pf);
  pf += round256(nq * sizeof(PrefState));
  auto* count = reinterpret_cast<uint32_t*>(pf);
  pf += round256(nq * 4ull);
  auto* ckeys = reinterpret_cast<float*>(pf);
  pf += round256(static_cast<uint64_t>(nq) * cap * 4);
  auto* cslots = reinterpret_cast<uint32_t*>(pf);
  Compact c;
  // Worth it only where the rows are much longer than the compact lists.
  if (n > 4ull * cap) {
    MNEMO_CUDA_CHECK(cudaMemsetAsync(hist, 0, static_cast<uint64_t>(nq) * kBins * 4, st));
    MNEMO_CUDA_CHECK(cudaMemsetAsync(count, 0, nq * 4ull, st));
    const unsigned bx = std::max(1u, std::min(ceil_div(1024u, nq), ceil_div(n, 16u * kPrefThreads)));
    const dim3 grid(bx, nq);
    for (int level = 0; level < 2; ++level) {
      hist_kernel<<<grid, kPrefThreads, 0, st>>>(keys, n, level, state, hist);
      MNEMO_CUDA_LAUNCHED("hist_kernel");
      pick_kernel<<<nq, 1024, 0, st>>>(hist, level, k, state);
      MNEMO_CUDA_LAUNCHED("pick_kernel");
    }
    compact_kernel<<<grid, kPrefThreads, 0, st>>>(keys, n, state, ckeys, cslots, count, cap);
    MNEMO_CUDA_LAUNCHED("compact_kernel");
    c = Compact{ckeys, cslots, count, cap};
  }
  if (k <= static_cast<uint32_t>(kThreads)) {
    radix_select_kernel<<<nq, kThreads, 0, st>>>(keys, n, k, ids, c, qc, out);
    MNEMO_CUDA_LAUNCHED("radix_select_kernel");
    return;
  }
  radix_select_kernel<<<nq, kThreads, 0, st>>>(keys, n, k, ids, c, qc, nullptr);
  MNEMO_CUDA_LAUNCHED("radix_select_kernel");
  size_t sort_bytes = temp_bytes - head;
  check(cub::DeviceMergeSort::SortKeys(static_cast<unsigned char*>(temp) + head, sort_bytes, qc,
                                       static_cast<int64_t>(total), SafeOrder{ids}, st),
        "DeviceMergeSort");
  unpack_kernel<<<ceil_div(total, 256), 256, 0, st>>>(qc, total, out);
  MNEMO_CUDA_LAUNCHED("unpack_kernel");
}

size_t compact_select_temp_bytes(uint32_t nq, uint32_t k) {
  return round256(static_cast<uint64_t>(nq) * k * sizeof(QCand));
}

void launch_compact_select(const float* dense, uint32_t nq, uint32_t n, uint32_t k, const uint64_t* ids,
                           const float* keys, const uint32_t* slots, const uint32_t* count, uint32_t cap,
                           uint32_t dense_lo, uint32_t dense_rows, Cand* out, void* temp, cudaStream_t st) {
  auto* qc = static_cast<QCand*>(temp);
  const Compact c{keys, slots, count, cap, dense_lo, dense_rows};
  radix_select_kernel<<<nq, kThreads, 0, st>>>(dense, n, k, ids, c, qc,
                                               k <= static_cast<uint32_t>(kThreads) ? out : nullptr);
  MNEMO_CUDA_LAUNCHED("radix_select_kernel");
}

void finish_compact_select(uint32_t nq, uint32_t k, Cand* out, void* temp, cudaStream_t st) {
  if (k <= static_cast<uint32_t>(kThreads)) return;  // written in order by the rounds
  const uint64_t total = static_cast<uint64_t>(nq) * k;
  unpack_kernel<<<ceil_div(total, 256), 256, 0, st>>>(static_cast<QCand*>(temp), total, out);
  MNEMO_CUDA_LAUNCHED("unpack_kernel");
}

// Sorts nq lists of kc candidates each (used after re-scoring large lists).
void sort_lists(Cand* lists, uint32_t nq, uint32_t kc, const uint64_t* ids, void* temp, size_t temp_bytes,
                cudaStream_t st) {
  const uint64_t total = static_cast<uint64_t>(nq) * kc;
  auto* qc = static_cast<QCand*>(temp);
  const size_t head = (total * sizeof(QCand) + 255) / 256 * 256;
  pack_kernel<<<ceil_div(total, 256), 256, 0, st>>>(lists, kc, total, qc);
  MNEMO_CUDA_LAUNCHED("pack_kernel");
  size_t sort_bytes = temp_bytes - head;
  check(cub::DeviceMergeSort::SortKeys(static_cast<unsigned char*>(temp) + head, sort_bytes, qc,
                                       static_cast<int64_t>(total), SafeOrder{ids}, st),
        "DeviceMergeSort");
  unpack_kernel<<<ceil_div(total, 256), 256, 0, st>>>(qc, total, lists);
  MNEMO_CUDA_LAUNCHED("unpack_kernel");
}

}  // namespace mnemo::cuda
