#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "device/exec_context.h"

namespace mnemo::cuda {

namespace {

// cuBLAS handles live as long as the process and are reused by later
// contexts of the same device. cublasDestroy synchronises the whole device
// context (cuCtxSynchronize), and that crashed inside the driver (H200,
// driver 580: a null dereference in cuCtxSynchronize under cublasDestroy
// under mnemo_runtime_destroy) in 5 of 49 runs of the Rust differential
// tests, which create and destroy CUDA runtimes on many threads at once.
// Never destroying a handle takes that call out (0 of 20 runs after).
std::mutex blas_mu;
std::map<int, std::vector<cublasHandle_t>>& spare_blas() {
  static auto* spare = new std::map<int, std::vector<cublasHandle_t>>();  // never destroyed, as the handles
  return *spare;
}

cublasStatus_t take_blas(int device, cublasHandle_t* h) {
  {
    std::lock_guard<std::mutex> lock(blas_mu);
    auto& v = spare_blas()[device];
    if (!v.empty()) {
      *h = v.back();
      v.pop_back();
      return CUBLAS_STATUS_SUCCESS;
    }
  }
  return cublasCreate(h);
}

void give_back_blas(int device, cublasHandle_t h) {
  // Detached from the stream that is about to go.
  cublasSetStream(h, nullptr);
  std::lock_guard<std::mutex> lock(blas_mu);
  spare_blas()[device].push_back(h);
}

}  // namespace

void check_blas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  if (s == CUBLAS_STATUS_ALLOC_FAILED) fail(Code::out_of_memory, std::string(what) + ": cuBLAS out of memory");
  fail(Code::backend, std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}

ExecContext::ExecContext(int dev) : device(dev) {
  MNEMO_CUDA_CHECK(cudaSetDevice(device));
  MNEMO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const cublasStatus_t s = take_blas(device, &blas);
  if (s != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    check_blas(s, "cublasCreate");
  }
  check_blas(cublasSetStream(blas, stream), "cublasSetStream");
  counters.reserve(kCounterWords * 4);
  MNEMO_CUDA_CHECK(cudaMemsetAsync(counters.get(), 0, kCounterWords * 4, stream));
  MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&last_use, cudaEventDisableTiming));
  // Recorded once so every wait on it is well defined.
  MNEMO_CUDA_CHECK(cudaEventRecord(last_use, stream));
}

ExecContext::~ExecContext() {
  if (last_use) {
    cudaEventSynchronize(last_use);
    cudaEventDestroy(last_use);
  }
  graphs.clear();  // before the buffers and the stream they use
  if (blas) give_back_blas(device, blas);
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
  // Work a device-pointer call left on a caller's stream may still use the
  // buffers: this context's own stream waits for it.
  MNEMO_CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->last_use, 0));
  return Lease(*this, std::move(c));
}

void ContextPool::give_back(std::unique_ptr<ExecContext> c) {
  if (!c) return;
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(c));
}

}  // namespace mnemo::cuda
