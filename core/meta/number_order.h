// The exact order of two numbers that may be int64 or double, shared by the
// host's filters and a device's programs (no long double on a GPU): no
// operand is rounded, so 2^53 + 1 and 2^53 as a double compare unequal.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define MNEMO_HD __host__ __device__
#else
#define MNEMO_HD
#endif

namespace mnemo {

// -1, 0 or 1: an int64 against a finite double.
MNEMO_HD inline int order_int_real(int64_t i, double d) {
  constexpr double kTwo63 = 9223372036854775808.0;
  if (d >= kTwo63) return -1;
  if (d < -kTwo63) return 1;
  // |d| < 2^63: its integer part t fits an int64 and is a double itself,
  // so d - t (the fraction) is exact.
  const auto t = static_cast<int64_t>(d);
  if (i != t) return i < t ? -1 : 1;
  const double f = d - static_cast<double>(t);
  return f > 0 ? -1 : f < 0 ? 1 : 0;
}

// -1, 0 or 1 for (a_int ? ai : ad) against (b_int ? bi : bd).
MNEMO_HD inline int order_numbers(bool a_int, int64_t ai, double ad, bool b_int, int64_t bi, double bd) {
  if (a_int && b_int) return ai < bi ? -1 : ai > bi ? 1 : 0;
  if (!a_int && !b_int) return ad < bd ? -1 : ad > bd ? 1 : 0;
  return a_int ? order_int_real(ai, bd) : -order_int_real(bi, ad);
}

}  // namespace mnemo
