// The kc-th largest of each query's sampled keys: a radix selection over
// the keys' ordered bits, one block a query.
#include <type_traits>

#include "batch/sample_bound.h"
#include "device/cuda_util.cuh"
#include "device/device_caps.h"
#include "device/env_knob.h"
#include "select/warp_list.cuh"

namespace mnemo::cuda {

namespace {

constexpr int kThreads = 1024;

// Adds one key's digit (bits >> shift, 8 bits) to the histogram where the
// bits above it equal the prefix chosen so far. bits == 0: no key (NaN, or
// past the end; no real key's ordered bits are 0). Every lane of the warp
// calls it. Where the whole warp holds one digit (most keys share the top
// digits) one lane adds 32; otherwise each lane adds its own. Grouping the
// lanes by digit with __match_any_sync cost more than the atomics it saved:
// with 16 keys a thread the kernel took 11-14 us for one query (H200).
// GROUP: the grouped form (MNEMO_KTH_GROUP=1, for measuring).
template <bool GROUP>
__device__ __forceinline__ void count_digit(unsigned bits, unsigned hi_mask, unsigned prefix, int shift, int lane,
                                            unsigned* hist) {
  const unsigned bin = bits != 0 && (bits & hi_mask) == prefix ? (bits >> shift) & 255 : 256;
  if constexpr (GROUP) {
    const unsigned peers = __match_any_sync(kFullMask, bin);
    if (bin < 256 && lane == __ffs(peers) - 1) atomicAdd(&hist[bin], static_cast<unsigned>(__popc(peers)));
  } else if (__all_sync(kFullMask, bin == __shfl_sync(kFullMask, bin, 0))) {
    if (lane == 0 && bin < 256) atomicAdd(&hist[bin], 32u);
  } else if (bin < 256) {
    atomicAdd(&hist[bin], 1u);
  }
}

// Raises each query's threshold to the kc-th largest of its sampled keys
// (one block per query; a radix selection over the keys' ordered bits, 8
// bits a pass). The samples are keys of distinct rows, so at least kc rows
// of the store have keys at or above it: no key below it can reach the
// query's top kc. Fewer than kc keys leave the threshold as it is.
// KPT > 0: up to KPT keys a thread held in registers, all their loads
// issued before the first is used. KPT == 0: the keys in shared memory (any
// count that fits).
template <int KPT, bool GROUP>
__global__ void __launch_bounds__(kThreads)
    kth_key_kernel(const float* __restrict__ keys, uint32_t count, uint32_t kc, unsigned* __restrict__ gth) {
  __shared__ unsigned hist[256];
  __shared__ unsigned s_prefix, s_need, s_found;
  extern __shared__ float held[];
  const float* g = keys + static_cast<uint64_t>(blockIdx.x) * count;
  constexpr int kHeld = KPT > 0 ? KPT : 1;
  unsigned b[kHeld];
  if constexpr (KPT > 0) {
    float v[KPT];
#pragma unroll
    for (int j = 0; j < KPT; ++j) {
      const uint32_t i = j * kThreads + threadIdx.x;
      v[j] = i < count ? __ldg(g + i) : __int_as_float(0x7fc00000);
    }
#pragma unroll
    for (int j = 0; j < KPT; ++j) b[j] = v[j] == v[j] ? ordered_bits(v[j]) : 0u;
  } else {
    for (uint32_t i = threadIdx.x; i < count; i += kThreads) held[i] = g[i];
    __syncthreads();
  }
  const int lane = threadIdx.x % 32;
  unsigned prefix = 0, need = kc;
  for (int shift = 24; shift >= 0; shift -= 8) {
    if (threadIdx.x < 256) hist[threadIdx.x] = 0;
    __syncthreads();
    const unsigned hi_mask = shift == 24 ? 0u : ~0u << (shift + 8);
    if constexpr (KPT > 0) {
#pragma unroll
      for (int j = 0; j < KPT; ++j) count_digit<GROUP>(b[j], hi_mask, prefix, shift, lane, hist);
    } else {
      for (uint32_t b0 = 0; b0 < count; b0 += kThreads) {
        const uint32_t i = b0 + threadIdx.x;
        const float key = i < count ? held[i] : __int_as_float(0x7fc00000);
        count_digit<GROUP>(key == key ? ordered_bits(key) : 0u, hi_mask, prefix, shift, lane, hist);
      }
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      // The digit whose bin holds the need-th largest: lane l sums bins
      // 8l..8l+7; suffix sums over the lanes find the one lane it lies in.
      unsigned v[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = hist[lane * 8 + j], sum += v[j];
      unsigned suf = sum;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const unsigned t = __shfl_down_sync(kFullMask, suf, o);
        if (lane + o < 32) suf += t;
      }
      const unsigned above = suf - sum;
      if (lane == 0) s_found = 0;
      __syncwarp();
      if (above < need && need <= suf) {
        unsigned acc = above;
        int d = 7;
        while (acc + v[d] < need) acc += v[d--];
        s_prefix = prefix | static_cast<unsigned>(lane * 8 + d) << shift;
        s_need = need - acc;
        s_found = 1;
      }
    }
    __syncthreads();
    if (!s_found) return;  // fewer than kc keys
    prefix = s_prefix;
    need = s_need;
    __syncthreads();  // every thread has read them before the next pass
  }
  if (threadIdx.x == 0) atomicMax(gth + blockIdx.x, prefix);
}

}  // namespace

// The selection's keys take 4 bytes each beside 2 KB of its own.
uint32_t sample_bound_most() {
  const size_t smem = device_smem_optin();
  return smem > 2048 ? static_cast<uint32_t>((smem - 2048) / 4) : 0u;
}

bool sample_bound_fits(uint32_t count) { return count <= sample_bound_most(); }

void launch_sample_bound(const float* keys, uint32_t count, uint32_t nq, uint32_t kc, unsigned* gth, cudaStream_t st) {
  // MNEMO_KTH_GROUP=1: lanes grouped by digit; MNEMO_KTH_SHARED=1: the keys
  // in shared memory at every count (both for measuring).
  static const bool group = env_int("MNEMO_KTH_GROUP", 0) == 1;
  static const bool shared = env_int("MNEMO_KTH_SHARED", 0) == 1;
  auto go = [&](auto kernel, size_t smem) {
    if (smem > 48 * 1024)
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
            "kth key smem");
    kernel<<<nq, kThreads, smem, st>>>(keys, count, kc, gth);
  };
  auto by_count = [&](auto group_c) {
    constexpr bool G = decltype(group_c)::value;
    if (!shared && count <= 4u * kThreads)
      go(kth_key_kernel<4, G>, 0);
    else if (!shared && count <= 16u * kThreads)
      go(kth_key_kernel<16, G>, 0);
    else
      go(kth_key_kernel<0, G>, static_cast<size_t>(count) * 4);
  };
  group ? by_count(std::true_type{}) : by_count(std::false_type{});
  MNEMO_CUDA_LAUNCHED("kth_key_kernel");
}

}  // namespace mnemo::cuda
