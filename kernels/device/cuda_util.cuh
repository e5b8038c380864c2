// CUDA error checking and owning wrappers for device and pinned memory.
// Every CUDA failure becomes mnemo::Error(Code::backend) naming the call.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "core/error.h"

namespace mnemo::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free allocation error
    fail(Code::out_of_memory, std::string(what) + ": out of device memory");
  }
  fail(Code::backend, std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

#define MNEMO_CUDA_CHECK(call) ::mnemo::cuda::check((call), #call)
// After a launch: configuration errors surface here, faults at the next sync.
#define MNEMO_CUDA_LAUNCHED(name) ::mnemo::cuda::check(cudaGetLastError(), name)

// RAII device allocation (cudaMalloc, never managed memory).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { resize(bytes); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  // Grows (discarding contents) when smaller than `bytes`.
  void reserve(size_t bytes) {
    if (bytes <= n_) return;
    resize(bytes);
  }
  void resize(size_t bytes) {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
    if (bytes == 0) return;
    MNEMO_CUDA_CHECK(cudaMalloc(&p_, bytes));
    n_ = bytes;
  }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }
  size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

// RAII pinned host memory for fast small transfers.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  void reserve(size_t bytes) {
    if (bytes <= n_) return;
    if (p_) cudaFreeHost(p_);
    p_ = nullptr;
    n_ = 0;
    MNEMO_CUDA_CHECK(cudaMallocHost(&p_, bytes));
    n_ = bytes;
  }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }
  size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

inline unsigned ceil_div(size_t a, size_t b) { return static_cast<unsigned>((a + b - 1) / b); }

}  // namespace mnemo::cuda
