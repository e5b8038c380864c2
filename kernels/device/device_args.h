// Checks of the arguments of device-pointer calls that only the CUDA side
// can make: that a pointer is memory this device can use, and the content
// checks of core/validate.h run on the device, with the same messages.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "device/exec_context.h"
#include "ops/op_kernels.h"

namespace mnemo::cuda {

// Device or managed memory of `device`, or pinned host memory (which the
// device reaches through unified addressing); anything else is
// INVALID_ARGUMENT naming the argument.
void need_device_memory(const void* p, const char* name, int device);

// NON_FINITE "name[i] is NaN or infinite" when data[0..n) holds one.
void need_finite_on_device(ExecContext& ctx, cudaStream_t st, const void* data, DType t, uint64_t n, const char* name);

// The resampling checks of mnemo_resample over device arguments.
void check_resample_on_device(ExecContext& ctx, cudaStream_t st, const ResampleRef& r, bool finite);

}  // namespace mnemo::cuda
