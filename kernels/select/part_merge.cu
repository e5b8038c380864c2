// The merge of sorted per-shard lists by rank: an entry's place in the
// merged list is its place in its own list plus the number of entries of
// every other list that go before it (a binary search each, as the lists are
// sorted). Every entry is placed independently, so a query's k x parts
// entries spread over as many threads, and a one-query search over four
// GPUs merges in one short kernel instead of a walk through the lists.
#include <algorithm>
#include <cmath>

#include "core/tensor.h"
#include "device/cuda_util.cuh"
#include "select/part_merge.h"

namespace mnemo::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ bool usable(uint64_t id, float s) { return id != kNoId && !isnan(s); }

// The library's order: the larger key first, equal keys to the smaller id.
__device__ __forceinline__ bool goes_before(float ka, uint64_t ia, float kb, uint64_t ib) {
  return ka > kb || (ka == kb && ia < ib);
}

// Entries of a list (k long) that go before (key, id); padding goes before
// nothing, and follows every entry, so the predicate holds on a prefix.
__device__ uint64_t count_before(const uint64_t* ids, const float* scores, uint64_t k, float sign, float key,
                                 uint64_t id) {
  uint64_t lo = 0, hi = k;
  while (lo < hi) {
    const uint64_t mid = (lo + hi) / 2;
    const uint64_t mi = ids[mid];
    const float ms = scores[mid];
    if (usable(mi, ms) && goes_before(sign * ms, mi, key, id))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// The entries of a list before its padding.
__device__ uint64_t filled(const uint64_t* ids, const float* scores, uint64_t k) {
  uint64_t lo = 0, hi = k;
  while (lo < hi) {
    const uint64_t mid = (lo + hi) / 2;
    if (usable(ids[mid], scores[mid]))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// One thread per input entry (query q, part p, place j). Thread (q, 0, j)
// also pads output place j when the parts hold fewer than j + 1 entries.
__global__ void merge_parts_kernel(const uint64_t* __restrict__ ids, const float* __restrict__ scores, uint32_t parts,
                                   uint64_t nq, uint64_t k, bool lower_better, uint64_t* __restrict__ out_ids,
                                   float* __restrict__ out_scores, const int32_t* __restrict__ statuses,
                                   int32_t* __restrict__ device_status) {
  const uint64_t per_q = parts * k, total = nq * per_q;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (device_status && first == 0) {
    int32_t v = 0;
    for (uint32_t p = 0; p < parts && v == 0; ++p) v = statuses[p];
    *device_status = v;
  }
  const float sign = lower_better ? -1.0f : 1.0f;
  for (uint64_t g = first; g < total; g += stride) {
    const uint64_t q = g / per_q, r = g % per_q;
    const uint32_t p = static_cast<uint32_t>(r / k);
    const uint64_t j = r % k;
    const uint64_t at = (p * nq + q) * k + j;
    const uint64_t id = ids[at];
    const float s = scores[at];
    const bool own = usable(id, s);
    if (own) {
      const float key = sign * s;
      uint64_t rank = j;
      for (uint32_t m = 0; m < parts && rank < k; ++m) {
        if (m == p) continue;
        const uint64_t row = (m * nq + q) * k;
        rank += count_before(ids + row, scores + row, k, sign, key, id);
      }
      if (rank < k) {
        out_ids[q * k + rank] = id;
        out_scores[q * k + rank] = s;
      }
    }
    // Entry (q, 0, j) filled means place j is taken; otherwise count.
    if (p == 0 && !own) {
      uint64_t have = 0;
      for (uint32_t m = 0; m < parts && have <= j; ++m) {
        const uint64_t row = (m * nq + q) * k;
        have += filled(ids + row, scores + row, k);
      }
      if (j >= have) {
        out_ids[q * k + j] = kNoId;
        out_scores[q * k + j] = __int_as_float(0x7fc00000);
      }
    }
  }
}

}  // namespace

void launch_merge_parts(const uint64_t* ids, const float* scores, uint32_t parts, uint64_t nq, uint64_t k,
                        bool lower_better, uint64_t* out_ids, float* out_scores, const int32_t* statuses,
                        int32_t* device_status, cudaStream_t st) {
  if (parts == 0 || parts > kMergeMaxParts) fail(Code::internal, "merge of " + std::to_string(parts) + " lists");
  const uint64_t total = nq * parts * k;
  if (total == 0 && !device_status) return;
  const uint64_t blocks = std::min<uint64_t>(std::max<uint64_t>((total + kThreads - 1) / kThreads, 1), 1u << 20);
  merge_parts_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, st>>>(ids, scores, parts, nq, k, lower_better,
                                                                         out_ids, out_scores, statuses, device_status);
  MNEMO_CUDA_LAUNCHED("merge_parts_kernel");
}

}  // namespace mnemo::cuda
