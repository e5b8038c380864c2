#include "dtype.h"

namespace mnemo {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16: return 2;
    case DType::f32:
    case DType::u32: return 4;
    case DType::f64:
    case DType::u64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f64: return "f64";
    case DType::u32: return "u32";
    case DType::u64: return "u64";
  }
  return "?";
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13));  // Inf / NaN
  if (exp != 0) return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_f32(sign);
  // Subnormal: shift the mantissa up until its leading one is implicit.
  int e = -1;
  do {
    mant <<= 1;
    ++e;
  } while ((mant & 0x400u) == 0);
  return bits_f32(sign | static_cast<uint32_t>(112 - e) << 23 | ((mant & 0x3ffu) << 13));
}

uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);                        // rounds to Inf (>= 65520)
  if (a >= 0x38800000u) {                                                                    // normal f16 range
    const uint32_t lsb = (a >> 13) & 1u;
    const uint32_t r = a + 0xfffu + lsb - (112u << 23);
    return static_cast<uint16_t>(sign | (r >> 13));
  }
  if (a < 0x33000000u) return sign;  // below half the smallest subnormal: rounds to zero
  // Subnormal f16: value = m * 2^-24 with m rounded to nearest even.
  const uint32_t e = a >> 23;  // biased f32 exponent, 102..112
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

void convert(const void* src, DType src_t, void* dst, DType dst_t, size_t n) {
  if (src_t == dst_t) {
    std::memcpy(dst, src, n * dtype_size(src_t));
    return;
  }
  for (size_t i = 0; i < n; ++i) store_elem(dst, dst_t, i, load_elem(src, src_t, i));
}

}  // namespace mnemo
