// Device memory and streams for the tests of the _device entry points
// (built only where the CUDA runtime is linked).
#pragma once

#include <cuda_runtime.h>

#include <vector>

namespace mt {

// Device memory holding a copy of host bytes (or nothing), freed on scope exit.
class DevBuf {
 public:
  explicit DevBuf(size_t bytes) : n_(bytes) {
    if (cudaMalloc(&p_, bytes ? bytes : 16) != cudaSuccess) p_ = nullptr;
  }
  DevBuf(const void* host, size_t bytes) : DevBuf(bytes) {
    // From pageable memory cudaMemcpy may return before the copy lands, and
    // the tests' non-blocking streams do not wait for the legacy stream: a
    // check kernel then read half-copied targets (a NaN that was not there).
    if (p_) {
      cudaMemcpy(p_, host, bytes, cudaMemcpyHostToDevice);
      cudaDeviceSynchronize();
    }
  }
  ~DevBuf() { cudaFree(p_); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void* get() const { return p_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> v(n_);
    cudaMemcpy(v.data(), p_, n_, cudaMemcpyDeviceToHost);
    return v;
  }

 private:
  void* p_ = nullptr;
  size_t n_;
};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
  ~Stream() { cudaStreamDestroy(s); }
};

}  // namespace mt
