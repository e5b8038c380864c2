// Aligned regions carved out of one device allocation.
#pragma once

#include <cstddef>

namespace mnemo::cuda {

class Arena {
 public:
  size_t add(size_t bytes) {
    const size_t at = size_;
    size_ += (bytes + 255) / 256 * 256;
    return at;
  }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

template <class T>
T* at(void* base, size_t off) {
  return reinterpret_cast<T*>(static_cast<unsigned char*>(base) + off);
}

}  // namespace mnemo::cuda
