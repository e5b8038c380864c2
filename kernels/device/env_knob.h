// The CUDA module's measuring knobs: environment variables read as
// integers. Each caller keeps the value in a function-local static, so a
// knob is read once per process.
#pragma once

#include <cstdlib>

namespace mnemo::cuda {

// The integer `name` holds (std::atoi: text that is not a number reads 0),
// or `unset` where it is not set.
inline int env_int(const char* name, int unset) {
  const char* e = std::getenv(name);
  return e ? std::atoi(e) : unset;
}

// A positive setting of `name`, else `fallback` (unset, zero or negative).
inline int env_positive(const char* name, int fallback) {
  const int v = env_int(name, 0);
  return v > 0 ? v : fallback;
}

}  // namespace mnemo::cuda
