// Population count of a 64-bit word without a library call: the library is
// built for baseline x86-64, where __builtin_popcountll becomes a call to
// libgcc's __popcountdi2 (a filtered search's per-list match counts, 15,625
// words a call over 1M slots, spent most of their time in it).
#pragma once

#include <cstdint>

namespace mnemo {

inline uint64_t bit_count(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return (x * 0x0101010101010101ull) >> 56;
}

}  // namespace mnemo
