#include <string>

#include "exec_context.h"

namespace mnemo::cuda {

void check_blas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  if (s == CUBLAS_STATUS_ALLOC_FAILED) fail(Code::out_of_memory, std::string(what) + ": cuBLAS out of memory");
  fail(Code::backend, std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}

ExecContext::ExecContext(int dev) : device(dev) {
  MNEMO_CUDA_CHECK(cudaSetDevice(device));
  MNEMO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const cublasStatus_t s = cublasCreate(&blas);
  if (s != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    check_blas(s, "cublasCreate");
  }
  check_blas(cublasSetStream(blas, stream), "cublasSetStream");
}

ExecContext::~ExecContext() {
  if (blas) cublasDestroy(blas);
  if (stream) cudaStreamDestroy(stream);
}

ContextPool::Lease ContextPool::acquire() {
  std::unique_ptr<ExecContext> c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      c = std::move(free_.back());
      free_.pop_back();
    }
  }
  if (!c) c = std::make_unique<ExecContext>(device_);
  // The calling thread may have another device current.
  MNEMO_CUDA_CHECK(cudaSetDevice(device_));
  return Lease(*this, std::move(c));
}

void ContextPool::give_back(std::unique_ptr<ExecContext> c) {
  if (!c) return;
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(c));
}

}  // namespace mnemo::cuda
