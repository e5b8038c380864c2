// What the current CUDA device can run, cached per device.
#pragma once

namespace mnemo::cuda {

// Compute capability major of the current device (0 when unknown).
int device_major();

}  // namespace mnemo::cuda
