// What the current CUDA device can run, cached per device.
#pragma once

#include <cstddef>

namespace mnemo::cuda {

// Compute capability major of the current device (0 when unknown).
int device_major();

// The most dynamic shared memory one block may opt in to on the current
// device, in bytes (0 when unknown).
size_t device_smem_optin();

}  // namespace mnemo::cuda
