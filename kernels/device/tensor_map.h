// TMA tensor maps over row-major matrices (sm_90 and later), encoded through
// the driver entry point that the runtime hands out, so nothing links
// against libcuda.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "core/dtype.h"

namespace mnemo::cuda {

// Whether this process can encode tensor maps (the driver has the entry
// point).
bool tensor_maps_available();

// `rows` rows of `ld` elements of t at base (16-byte aligned, ld * size a
// multiple of 16 bytes), read in boxes of 128 bytes x box_rows rows with the
// 128-byte swizzle; elements past either end of the matrix read as zero.
CUtensorMap row_box_map(const void* base, DType t, uint64_t ld, uint64_t rows, uint32_t box_rows);

}  // namespace mnemo::cuda
