#include "validate.h"

#include <cmath>

namespace mnemo {

uint64_t find_non_finite(const void* data, DType t, uint64_t n) {
  switch (t) {
    case DType::f16: {
      const auto* p = static_cast<const uint16_t*>(data);
      for (uint64_t i = 0; i < n; ++i)
        if ((p[i] & 0x7c00u) == 0x7c00u) return i;
      return kNotFound;
    }
    case DType::bf16: {
      const auto* p = static_cast<const uint16_t*>(data);
      for (uint64_t i = 0; i < n; ++i)
        if ((p[i] & 0x7f80u) == 0x7f80u) return i;
      return kNotFound;
    }
    case DType::f64: {
      const auto* p = static_cast<const double*>(data);
      for (uint64_t i = 0; i < n; ++i)
        if (!std::isfinite(p[i])) return i;
      return kNotFound;
    }
    default: {
      const auto* p = static_cast<const uint32_t*>(data);
      for (uint64_t i = 0; i < n; ++i)
        if ((p[i] & 0x7f800000u) == 0x7f800000u) return i;
      return kNotFound;
    }
  }
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
