// Large-k selection: per query row, a block finds the k-th best key by
// radix selection on order-preserving 32-bit keys (8 bits a pass), breaks
// ties at the threshold by a second radix selection on the user ids, gathers
// exactly k entries, and CUB's merge sort orders every query's k entries
// (key descending, id ascending) in one device-wide sort.
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_merge_sort.cuh>

#include "search_kernels.h"

namespace mnemo::cuda {

namespace {

constexpr int kThreads = 1024;

struct QCand {
  uint32_t q;
  float key;
  uint32_t slot;
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

__global__ void __launch_bounds__(kThreads) radix_select_kernel(const float* __restrict__ keys, uint32_t n, uint32_t k,
                                                                const uint64_t* __restrict__ ids, QCand* out) {
  __shared__ uint32_t hist[256];
  __shared__ uint32_t s_count;
  using Reduce = cub::BlockReduce<uint32_t, kThreads>;
  __shared__ typename Reduce::TempStorage red;
  const uint32_t q = blockIdx.x;
  const float* row = keys + static_cast<uint64_t>(q) * n;
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
      if (pos < k) o[pos] = QCand{q, f, i};
    }
  }
  __syncthreads();
  // Pad when fewer than k entries exist.
  for (uint32_t j = s_count + threadIdx.x; j < k; j += kThreads)
    o[j] = QCand{q, __int_as_float(0xff800000), 0xffffffffu};
}

__global__ void unpack_kernel(const QCand* in, uint64_t n, Cand* out) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    const QCand c = in[i];
    out[i] = c.slot == 0xffffffffu ? Cand{__int_as_float(0x7fc00000), 0xffffffffu} : Cand{c.key, c.slot};
  }
}

__global__ void pack_kernel(const Cand* in, uint32_t kc, uint64_t n, QCand* out) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    const Cand c = in[i];
    const float key = c.slot == 0xffffffffu ? __int_as_float(0xff800000) : c.key;
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
    const uint64_t ia = a.slot == 0xffffffffu ? ~0ull : ids[a.slot];
    const uint64_t ib = b.slot == 0xffffffffu ? ~0ull : ids[b.slot];
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

size_t large_select_temp_bytes(uint32_t nq, uint32_t k) {
  const uint64_t n = static_cast<uint64_t>(nq) * k;
  return (n * sizeof(QCand) + 255) / 256 * 256 + sort_temp_bytes(n) + 256;
}

void launch_large_select(const float* keys, uint32_t nq, uint32_t n, uint32_t k, const uint64_t* ids, Cand* out,
                         void* temp, size_t temp_bytes, cudaStream_t st) {
  const uint64_t total = static_cast<uint64_t>(nq) * k;
  auto* qc = static_cast<QCand*>(temp);
  const size_t head = (total * sizeof(QCand) + 255) / 256 * 256;
  radix_select_kernel<<<nq, kThreads, 0, st>>>(keys, n, k, ids, qc);
  MNEMO_CUDA_LAUNCHED("radix_select_kernel");
  size_t sort_bytes = temp_bytes - head;
  check(cub::DeviceMergeSort::SortKeys(static_cast<unsigned char*>(temp) + head, sort_bytes, qc,
                                       static_cast<int64_t>(total), SafeOrder{ids}, st),
        "DeviceMergeSort");
  unpack_kernel<<<ceil_div(total, 256), 256, 0, st>>>(qc, total, out);
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
