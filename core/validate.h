// Content checks run before any output is written: non-finite values,
// unsorted times, out-of-range indices. Each returns the first offending
// position, or kNotFound.
#pragma once

#include <cstdint>

#include "dtype.h"

namespace mnemo {

constexpr uint64_t kNotFound = UINT64_MAX;

uint64_t find_non_finite(const void* data, DType t, uint64_t n);
// First i > 0 with times[i] < times[i - 1] (f32 or f64 times).
uint64_t find_decreasing(const void* times, DType t, uint64_t n);
// First i with index[i] >= limit (u32 or u64 indices).
uint64_t find_out_of_range(const void* index, DType t, uint64_t n, uint64_t limit);

}  // namespace mnemo
