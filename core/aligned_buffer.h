// A growable byte buffer aligned for 16-byte (and wider SIMD) loads.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace mnemo {

class AlignedBuffer {
 public:
  static constexpr size_t kAlign = 64;
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept : p_(o.p_), size_(o.size_), cap_(o.cap_) {
    o.p_ = nullptr, o.size_ = o.cap_ = 0;
  }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(p_, o.p_), std::swap(size_, o.size_), std::swap(cap_, o.cap_);
    return *this;
  }
  ~AlignedBuffer() { std::free(p_); }

  unsigned char* data() { return p_; }
  const unsigned char* data() const { return p_; }
  size_t size() const { return size_; }

  // Makes room for `bytes` (keeping contents); throws std::bad_alloc and
  // leaves the buffer as it was when memory runs out.
  void reserve(size_t bytes) {
    if (bytes <= cap_) return;
    size_t cap = cap_ ? cap_ : 4096;
    while (cap < bytes) cap = cap > (SIZE_MAX / 2) ? bytes : cap * 2;
    cap = (cap + kAlign - 1) / kAlign * kAlign;
    void* q = std::aligned_alloc(kAlign, cap);
    if (q == nullptr) throw std::bad_alloc();
    if (size_) std::memcpy(q, p_, size_);
    std::free(p_);
    p_ = static_cast<unsigned char*>(q);
    cap_ = cap;
  }
  void resize(size_t bytes) {
    reserve(bytes);
    size_ = bytes;
  }

 private:
  unsigned char* p_ = nullptr;
  size_t size_ = 0, cap_ = 0;
};

}  // namespace mnemo
