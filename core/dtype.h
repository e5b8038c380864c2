// Element types and conversions between f32 and the 16-bit storage types.
// f32 -> f16/bf16 rounds to nearest, ties to even; NaN stays NaN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mnemo {

enum class DType : int32_t { f32 = 1, f16 = 2, bf16 = 3, f64 = 4, u32 = 5, u64 = 6 };
enum class Metric : int32_t { cosine = 1, dot = 2, l2sq = 3 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;  // round to nearest even; overflow carries into Inf correctly
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Element i of a row of the given storage type, as f32.
inline float load_elem(const void* base, DType t, size_t i) {
  switch (t) {
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

inline void store_elem(void* base, DType t, size_t i, float v) {
  switch (t) {
    case DType::f16: static_cast<uint16_t*>(base)[i] = f32_to_f16(v); break;
    case DType::bf16: static_cast<uint16_t*>(base)[i] = f32_to_bf16(v); break;
    default: static_cast<float*>(base)[i] = v; break;
  }
}

// Converts n elements between storage types (f32, f16, bf16).
void convert(const void* src, DType src_t, void* dst, DType dst_t, size_t n);

}  // namespace mnemo
