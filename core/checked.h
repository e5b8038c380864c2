// Overflow-checked size arithmetic: every product of caller sizes goes here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "error.h"

namespace mnemo {

inline uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) fail(Code::overflow, std::string(what) + ": size product overflows 64 bits");
  return r;
}

inline uint64_t checked_mul(uint64_t a, uint64_t b, uint64_t c, const char* what) {
  return checked_mul(checked_mul(a, b, what), c, what);
}

inline uint64_t checked_add(uint64_t a, uint64_t b, const char* what) {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) fail(Code::overflow, std::string(what) + ": size sum overflows 64 bits");
  return r;
}

// A byte count that must also be addressable on this machine.
inline size_t checked_bytes(uint64_t bytes, const char* what) {
  if (bytes > static_cast<uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()))
    fail(Code::overflow, std::string(what) + ": buffer larger than the address space");
  return static_cast<size_t>(bytes);
}

}  // namespace mnemo
