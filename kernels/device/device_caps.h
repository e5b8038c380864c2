// What the current CUDA device can run, cached per device.
#pragma once

#include <cstddef>

namespace mnemo::cuda {

// Compute capability major of the current device (0 when unknown).
int device_major();

// The most dynamic shared memory one block may opt in to on the current
// device, in bytes (0 when unknown).
size_t device_smem_optin();

// Blocks of `kernel` resident at once on the current device (blocks an SM
// times its SMs) with `threads` threads and `smem` bytes of dynamic shared
// memory, the kernel's dynamic shared-memory limit raised to `smem_limit`
// (at least smem) first. Cached per device, kernel and size, so a launch
// does not ask the runtime again (three or four calls of host time each).
// Throws where the runtime refuses.
int resident_grid(const void* kernel, int threads, size_t smem, size_t smem_limit);

}  // namespace mnemo::cuda
