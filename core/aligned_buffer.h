// A growable byte buffer aligned for 16-byte (and wider SIMD) loads. Large
// buffers are anonymous mappings grown with mremap, so growing a store of S
// bytes never holds the old and the new copy at once (no 2S peak).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace mnemo {

class AlignedBuffer {
 public:
  static constexpr size_t kAlign = 64;
  // From this capacity on the buffer is mapped (page-aligned) memory.
  static constexpr size_t kMapBytes = size_t{1} << 20;
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept : p_(o.p_), size_(o.size_), cap_(o.cap_), mapped_(o.mapped_) {
    o.p_ = nullptr, o.size_ = o.cap_ = 0, o.mapped_ = false;
  }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(p_, o.p_), std::swap(size_, o.size_), std::swap(cap_, o.cap_), std::swap(mapped_, o.mapped_);
    return *this;
  }
  ~AlignedBuffer() { release(); }

  unsigned char* data() { return p_; }
  const unsigned char* data() const { return p_; }
  size_t size() const { return size_; }

  // Makes room for `bytes` (keeping contents); throws std::bad_alloc and
  // leaves the buffer as it was when memory runs out.
  void reserve(size_t bytes) {
    if (bytes <= cap_) return;
    size_t cap = cap_ ? cap_ : 4096;
    while (cap < bytes) cap = cap > (SIZE_MAX / 2) ? bytes : cap * 2;
    if (cap >= kMapBytes) {
      const size_t page = 4096;
      if (cap > SIZE_MAX - page) throw std::bad_alloc();
      cap = (cap + page - 1) / page * page;
      void* q = mapped_ ? ::mremap(p_, cap_, cap, MREMAP_MAYMOVE)
                        : ::mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (q == MAP_FAILED) throw std::bad_alloc();
      // Huge pages where the system allows them: a 1 GB store takes 512
      // times fewer page faults to fill.
      ::madvise(q, cap, MADV_HUGEPAGE);
      if (!mapped_) {
        if (size_) std::memcpy(q, p_, size_);
        std::free(p_);
      }
      p_ = static_cast<unsigned char*>(q);
      cap_ = cap;
      mapped_ = true;
      return;
    }
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
  void release() {
    if (mapped_)
      ::munmap(p_, cap_);
    else
      std::free(p_);
  }
  unsigned char* p_ = nullptr;
  size_t size_ = 0, cap_ = 0;
  bool mapped_ = false;
};

}  // namespace mnemo
