// The stage barriers of the kernels where one producer thread fills a ring
// of shared-memory stages with bulk copies and consumer warps drain it
// (sm_90 and later).
#pragma once

#include <cstdint>
#include <cuda/ptx>

namespace mnemo::cuda {

// Full barriers take the producer's arrival (and the copies' bytes); empty
// barriers an arrival from every consumer thread, each for its own reads.
// One thread calls it; a block barrier must follow.
__device__ __forceinline__ void init_stage_barriers(uint64_t* full, uint64_t* empty, uint32_t stages,
                                                    uint32_t consumer_threads) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  for (uint32_t i = 0; i < stages; ++i) {
    ::cuda::ptx::mbarrier_init(full + i, 1);
    ::cuda::ptx::mbarrier_init(empty + i, consumer_threads);
  }
  ::cuda::ptx::fence_mbarrier_init(::cuda::ptx::sem_release, ::cuda::ptx::scope_cluster);
#endif
}

// Waits until the barrier's phase of this parity has completed.
__device__ __forceinline__ void wait_stage(uint64_t* bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  while (!::cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
#endif
}

}  // namespace mnemo::cuda
