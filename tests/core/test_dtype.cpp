// Internal conversions against exact references: every f16 and bf16 bit
// pattern decodes exactly, and f32 -> f16/bf16 rounds to nearest even.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/dtype.h"

namespace {

using mnemo::bf16_to_f32;
using mnemo::f16_to_f32;
using mnemo::f32_to_bf16;
using mnemo::f32_to_f16;

// binary16 decoded from its definition, in double.
double f16_reference(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  if (exp == 0x1f) return mant ? NAN : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

// Nearest-even rounding to binary16 by exhaustive search over neighbours.
uint16_t f16_round_reference(float f) {
  if (std::isnan(f)) return 0x7e00;
  const double x = f;
  uint16_t best = 0;
  double best_err = INFINITY;
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // finite non-negative halves
    const double err = std::fabs(std::fabs(x) - f16_reference(static_cast<uint16_t>(h)));
    if (err < best_err || (err == best_err && (h & 1) == 0)) best = static_cast<uint16_t>(h), best_err = err;
  }
  // Beyond the largest half by at least half an ulp (2^4 there) is infinity.
  if (std::fabs(x) >= 65520.0) best = 0x7c00;
  return static_cast<uint16_t>(best | (std::signbit(f) ? 0x8000 : 0));
}

TEST(Dtype, EveryHalfDecodesExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const double ref = f16_reference(static_cast<uint16_t>(h));
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      EXPECT_EQ(static_cast<double>(got), ref) << h;
      EXPECT_EQ(std::signbit(got), (h & 0x8000) != 0) << h;
    }
  }
}

TEST(Dtype, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    if (std::isnan(f16_to_f32(x))) continue;
    EXPECT_EQ(f32_to_f16(f16_to_f32(x)), x) << h;
  }
}

TEST(Dtype, F32ToHalfRoundsToNearestEven) {
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<uint32_t> bits;
  // Random values across the half range, midpoints and edges.
  std::vector<float> xs = {
      65504.0f,      65519.99f,     65520.0f, 1e-8f, 2.98023224e-8f,        2.98023259e-8f,       5.96046448e-8f,
      6.1035156e-5f, 6.1035152e-5f, -0.0f,    0.0f,  1.0f + 1.0f / 2048.0f, 1.0f + 3.0f / 2048.0f};
  for (int i = 0; i < 300; ++i) {
    float f;
    do {
      const uint32_t u = (bits(rng) & 0x807fffffu) | ((100u + bits(rng) % 44u) << 23);  // |f| ~ 2^-27 .. 2^16
      std::memcpy(&f, &u, 4);
    } while (!std::isfinite(f));
    xs.push_back(f);
  }
  for (float f : xs) EXPECT_EQ(f32_to_f16(f), f16_round_reference(f)) << f;
}

TEST(Dtype, Bf16RoundsToNearestEven) {
  std::mt19937_64 rng(777);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 100000; ++i) {
    const uint32_t u = bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    const uint16_t b = f32_to_bf16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(b)));
      continue;
    }
    // The two bf16 neighbours of f, and nearest-even between them.
    const uint32_t lo = u & 0xffff0000u;
    const uint32_t rem = u & 0xffffu;
    uint32_t want = lo >> 16;
    if (rem > 0x8000u || (rem == 0x8000u && (want & 1u))) ++want;
    EXPECT_EQ(b, static_cast<uint16_t>(want)) << u;
  }
}

TEST(Dtype, NanStaysNan) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(qnan))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(qnan))));
  uint32_t u = 0x7f800001u;  // signalling NaN with only a low payload bit
  float snan;
  std::memcpy(&snan, &u, 4);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(snan))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(snan))));
}

}  // namespace
