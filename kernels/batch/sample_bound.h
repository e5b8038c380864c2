// A starting threshold for the fused batch kernels from a sampling pass:
// each query's kc-th largest sampled key (sample_bound.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mnemo::cuda {

// Whether `count` samples a query fit the bound kernel's shared memory.
bool sample_bound_fits(uint32_t count);
// The most samples a query that fit it on this device.
uint32_t sample_bound_most();
// keys: [nq][count] sampled keys, each the key of a distinct row of the
// store (NaN: no row); raises gth[q] (ordered bits, atomicMax) to the kc-th
// largest of query q's keys. Queries with fewer than kc keys keep theirs.
void launch_sample_bound(const float* keys, uint32_t count, uint32_t nq, uint32_t kc, unsigned* gth, cudaStream_t st);

}  // namespace mnemo::cuda
