// Per-call execution state: a stream, a cuBLAS handle, scratch memory and
// pinned staging. A backend keeps a small pool so concurrent calls from
// several host threads each get their own, without device-wide syncs; the
// buffers only grow, so steady-state calls allocate (and free) nothing.
#pragma once

#include <cublas_v2.h>

#include <memory>
#include <mutex>
#include <vector>

#include "device/cuda_util.cuh"
#include "device/graph_cache.h"

namespace mnemo::cuda {

struct ExecContext {
  explicit ExecContext(int device);
  ~ExecContext();
  ExecContext(const ExecContext&) = delete;
  ExecContext& operator=(const ExecContext&) = delete;

  // Scratch of at least `bytes`, carved by the caller; contents undefined.
  void* scratch(size_t bytes) {
    // Growing frees the old buffer: work queued on a caller's stream may
    // still be using it.
    if (bytes > work.size()) MNEMO_CUDA_CHECK(cudaEventSynchronize(last_use));
    work.reserve(bytes);
    return work.get();
  }
  void sync() { MNEMO_CUDA_CHECK(cudaStreamSynchronize(stream)); }
  // Pinned staging of at least `bytes`. Growing it frees the old buffer,
  // which cached search graphs copy from and to: they go first.
  void reserve_staging(size_t bytes) {
    if (bytes <= staging.size()) return;
    graphs.clear();
    staging.reserve(bytes);
  }

  // Calls on device pointers run on the caller's stream `st` and return
  // without waiting: begin_on orders this context's earlier work (on any
  // stream) before st's, end_on marks st's new work as the last use.
  void begin_on(cudaStream_t st) {
    MNEMO_CUDA_CHECK(cudaStreamWaitEvent(st, last_use, 0));
    if (st != stream) MNEMO_CUDA_CHECK(cudaStreamWaitEvent(stream, last_use, 0));
  }
  void end_on(cudaStream_t st) { MNEMO_CUDA_CHECK(cudaEventRecord(last_use, st)); }

  // Runs content checks that leave first-offending positions in `n` device
  // words (set to UINT64_MAX first), then copies them back, waiting on st.
  template <class F>
  const uint64_t* check_words(cudaStream_t st, int n, F&& launch) {
    checks.reserve(static_cast<size_t>(n) * 8);
    checks_host.reserve(static_cast<size_t>(n) * 8);
    MNEMO_CUDA_CHECK(cudaMemsetAsync(checks.get(), 0xff, static_cast<size_t>(n) * 8, st));
    launch(checks.get<unsigned long long>());
    MNEMO_CUDA_CHECK(
        cudaMemcpyAsync(checks_host.get(), checks.get(), static_cast<size_t>(n) * 8, cudaMemcpyDeviceToHost, st));
    MNEMO_CUDA_CHECK(cudaStreamSynchronize(st));
    return checks_host.get<uint64_t>();
  }

  int device;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  DeviceBuffer work;
  DeviceBuffer work2;  // a second region for outputs that outlive a scratch phase
  DeviceBuffer io;     // inputs and outputs of one call (queries, results)
  DeviceBuffer dense;  // a filtered batch's dense plan (bitmaps, masks, its queries)
  PinnedBuffer staging;
  DeviceBuffer checks;  // first-offending positions of device content checks
  PinnedBuffer checks_host;
  cudaEvent_t last_use = nullptr;  // the last work that used these buffers
  // Zeroed words for kernels whose last block to finish does the final step
  // (a ticket, a work counter, the groups of per-query bounds from word
  // kCounterGroups on); such a kernel leaves them zero again.
  DeviceBuffer counters;
  static constexpr size_t kCounterGroups = 16;
  static constexpr size_t kCounterFill = kCounterGroups + 4 * 256;  // 4 queries, k <= kSmallKMax
  static constexpr size_t kCounterWords = kCounterFill + 4;         // a fill word per query of a pass
  // Host-call searches captured as CUDA graphs, over the buffers above.
  SearchGraphs graphs;
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
