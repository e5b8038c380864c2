// Per-call execution state: a stream, a cuBLAS handle, scratch memory and
// pinned staging. A backend keeps a small pool so concurrent calls from
// several host threads each get their own, without device-wide syncs; the
// buffers only grow, so steady-state calls allocate (and free) nothing.
#pragma once

#include <cublas_v2.h>

#include <memory>
#include <mutex>
#include <vector>

#include "cuda_util.cuh"

namespace mnemo::cuda {

struct ExecContext {
  explicit ExecContext(int device);
  ~ExecContext();
  ExecContext(const ExecContext&) = delete;
  ExecContext& operator=(const ExecContext&) = delete;

  // Scratch of at least `bytes`, carved by the caller; contents undefined.
  void* scratch(size_t bytes) {
    work.reserve(bytes);
    return work.get();
  }
  void sync() { MNEMO_CUDA_CHECK(cudaStreamSynchronize(stream)); }

  int device;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  DeviceBuffer work;
  DeviceBuffer work2;  // a second region for outputs that outlive a scratch phase
  DeviceBuffer io;     // inputs and outputs of one call (queries, results)
  PinnedBuffer staging;
};

class ContextPool {
 public:
  explicit ContextPool(int device) : device_(device) {}
  // A context for the duration of one call; returned on destruction.
  class Lease {
   public:
    Lease(ContextPool& pool, std::unique_ptr<ExecContext> c) : pool_(pool), c_(std::move(c)) {}
    ~Lease() { pool_.give_back(std::move(c_)); }
    ExecContext& operator*() const { return *c_; }
    ExecContext* operator->() const { return c_.get(); }

   private:
    ContextPool& pool_;
    std::unique_ptr<ExecContext> c_;
  };
  Lease acquire();

 private:
  void give_back(std::unique_ptr<ExecContext> c);
  int device_;
  std::mutex mu_;
  std::vector<std::unique_ptr<ExecContext>> free_;
};

void check_blas(cublasStatus_t s, const char* what);
#define MNEMO_BLAS_CHECK(call) ::mnemo::cuda::check_blas((call), #call)

}  // namespace mnemo::cuda
