#include "validate.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "cpu/simd_kernels.h"

namespace mnemo {

uint64_t find_non_finite(const void* data, DType t, uint64_t n) {
  // A SIMD scan; inputs of a few MB (a batch of queries, on the path of
  // every batched search) are split among OpenMP threads, one per 512 KB: one
  // thread reads about 20 GB/s, so 3 MB of queries alone took 150 us. The
  // first offending position is the smallest one any part finds.
  const size_t esz = dtype_size(t);
  const auto* base = static_cast<const unsigned char*>(data);
  constexpr uint64_t kBytesPerThread = uint64_t{512} << 10;
  const uint64_t bytes = n * esz;
  const int64_t parts = static_cast<int64_t>(std::min<uint64_t>(omp_get_max_threads(), bytes / kBytesPerThread));
  if (parts < 2) {
    const uint64_t at = cpu::simd::first_non_finite(data, t, n);
    return at == n ? kNotFound : at;
  }
  uint64_t first = kNotFound;
#pragma omp parallel for schedule(static) reduction(min : first) num_threads(static_cast <int>(parts))
  for (int64_t k = 0; k < parts; ++k) {
    const uint64_t lo = n * static_cast<uint64_t>(k) / parts, hi = n * static_cast<uint64_t>(k + 1) / parts;
    const uint64_t at = cpu::simd::first_non_finite(base + lo * esz, t, hi - lo);
    if (at != hi - lo) first = std::min(first, lo + at);
  }
  return first;
}

uint64_t find_decreasing(const void* times, DType t, uint64_t n) {
  auto scan = [n](const auto* p) -> uint64_t {
    // !(a <= b) also catches a NaN neighbour when validation is off.
    for (uint64_t i = 1; i < n; ++i)
      if (!(p[i - 1] <= p[i])) return i;
    return kNotFound;
  };
  return t == DType::f64 ? scan(static_cast<const double*>(times)) : scan(static_cast<const float*>(times));
}

uint64_t find_out_of_range(const void* index, DType t, uint64_t n, uint64_t limit) {
  auto scan = [n, limit](const auto* p) -> uint64_t {
    for (uint64_t i = 0; i < n; ++i)
      if (static_cast<uint64_t>(p[i]) >= limit) return i;
    return kNotFound;
  };
  return t == DType::u32 ? scan(static_cast<const uint32_t*>(index)) : scan(static_cast<const uint64_t*>(index));
}

}  // namespace mnemo
