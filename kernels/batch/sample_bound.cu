// The kc-th largest of each query's sampled keys: a radix selection over
// the keys' ordered bits, one block a query.
#include "batch/sample_bound.h"
#include "device/cuda_util.cuh"
#include "device/device_caps.h"
#include "select/warp_list.cuh"

namespace mnemo::cuda {

namespace {

// Raises each query's threshold to the kc-th largest of its sampled keys
// (one block per query; a radix selection over the keys' ordered bits, 8
// bits a pass). The samples are keys of distinct rows, so at least kc rows
// of the store have keys at or above it: no key below it can reach the
// query's top kc. Fewer than kc keys leave the threshold as it is.
constexpr int kThreads = 1024;
__global__ void __launch_bounds__(kThreads)
    kth_key_kernel(const float* __restrict__ keys, uint32_t count, uint32_t kc, unsigned* __restrict__ gth) {
  __shared__ unsigned hist[256];
  __shared__ unsigned s_prefix, s_need, s_found;
  // The keys in shared memory first: the passes' loop, each round waiting
  // on its loads from L2 before its atomics, took 19 us for 8448 keys.
  extern __shared__ float held[];
  const float* g = keys + static_cast<uint64_t>(blockIdx.x) * count;
  for (uint32_t i = threadIdx.x; i < count; i += kThreads) held[i] = g[i];
  __syncthreads();
  const float* c = held;
  const int lane = threadIdx.x % 32;
  unsigned prefix = 0, need = kc;
  for (int shift = 24; shift >= 0; shift -= 8) {
    if (threadIdx.x < 256) hist[threadIdx.x] = 0;
    __syncthreads();
    // Keys whose bits above this digit equal the prefix chosen so far, one
    // shared-memory atomic per distinct digit in a warp (most keys share
    // the top digits).
    const unsigned hi_mask = shift == 24 ? 0u : ~0u << (shift + 8);
    for (uint32_t b = 0; b < count; b += kThreads) {
      const uint32_t i = b + threadIdx.x;
      unsigned bin = 256;  // none
      if (i < count) {
        const float key = c[i];
        const unsigned bits = ordered_bits(key);
        if (key == key && (bits & hi_mask) == prefix) bin = (bits >> shift) & 255;
      }
      const unsigned peers = __match_any_sync(kFullMask, bin);
      if (bin < 256 && lane == __ffs(peers) - 1) atomicAdd(&hist[bin], static_cast<unsigned>(__popc(peers)));
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

bool sample_bound_fits(uint32_t count) { return static_cast<size_t>(count) * 4 + 2048 <= device_smem_optin(); }

void launch_sample_bound(const float* keys, uint32_t count, uint32_t nq, uint32_t kc, unsigned* gth, cudaStream_t st) {
  const size_t held = static_cast<size_t>(count) * 4;
  check(cudaFuncSetAttribute(kth_key_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(held)),
        "kth key smem");
  kth_key_kernel<<<nq, kThreads, held, st>>>(keys, count, kc, gth);
  MNEMO_CUDA_LAUNCHED("kth_key_kernel");
}

}  // namespace mnemo::cuda
