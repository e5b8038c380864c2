// std::vector storage aligned for the C ABI (MNEMO_ALIGNMENT, rounded up to
// whole 64-byte lines), for arrays handed to mnemo calls.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

namespace cli {

template <class T>
struct Aligned {  // MNEMO_ALIGNMENT for std::vector storage
  using value_type = T;
  Aligned() = default;
  template <class U>
  Aligned(const Aligned<U>&) {}
  T* allocate(size_t n) {
    void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const Aligned<U>&) const {
    return true;
  }
  template <class U>
  bool operator!=(const Aligned<U>&) const {
    return false;
  }
};
template <class T>
using AVec = std::vector<T, Aligned<T>>;

}  // namespace cli
