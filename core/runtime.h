// A runtime: the backends in use, the precision and threading choices, and
// the AUTO dispatch rule between CPU and GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend.h"

namespace mnemo {

struct RuntimeOptions {
  BackendKind backend = BackendKind::automatic;
  Precision precision = Precision::exact;
  int32_t device_id = 0;
  uint32_t num_threads = 0;  // 0 = all cores
  bool validate = true;
  uint64_t workspace_bytes = 0;  // 0 = default
};

struct RuntimeReport {
  BackendKind requested, active;
  Precision precision;
  int32_t device_id;
  uint32_t num_threads;
  bool cuda_available;
  uint64_t auto_gpu_min_bytes;
  std::string device_name;
  std::string reason;
};

// AUTO sends work touching fewer bytes than this to the CPU. Measured on an
// H200 machine (bench/gpu/gpu_bench.cu, bench_break_even; results in
// bench/results/h200-break-even.jsonl): one 768-dim f32 query, k = 10, the
// whole host call: CUDA 0.065 ms against the CPU backend's 0.156 ms already
// at 256 vectors (768 KiB), the smallest size measured, and faster at every
// larger size. Re-measure when the CPU kernels change.
constexpr uint64_t kAutoGpuMinBytes = 768ull << 10;
// Pair scoring, resampling and normalisation of host buffers: the GPU must
// first receive every input byte over PCIe and send the output back, while
// the CPU reads them in place. Measured on the H200 machine
// (bench/gpu/ops_bench.cu, "break-even ... (host call)" rows): pairs over a
// 10k x 1024 f16 table, CPU 9.2 ms against CUDA 10.4 ms at 1k pairs (4 MB
// of rows), 15.0 against 10.0 ms at 10k pairs (41 MB); normalising
// n x 768 f32 rows, the CPU was faster at every size from 1k rows (0.78
// against 1.22 ms) to 1M rows (0.74 against 1.28 s), so AUTO keeps row
// operations of host buffers on the CPU (UINT64_MAX).
constexpr uint64_t kAutoGpuMinBytesPairs = 16ull << 20;
constexpr uint64_t kAutoGpuMinBytesRows = UINT64_MAX;
// The AUTO threshold of one operation on host buffers.
uint64_t auto_gpu_min_bytes(Op op);
constexpr uint64_t kDefaultWorkspaceBytes = 1ull << 30;

class Runtime {
 public:
  explicit Runtime(const RuntimeOptions& opts);  // throws Error(backend_unavailable)
  ~Runtime();

  const RuntimeOptions& options() const { return opts_; }
  bool validate() const { return opts_.validate; }
  Backend& cpu() const { return *cpu_; }
  Backend* gpu() const { return gpu_.get(); }
  // The backend for one call of `op` touching `work_bytes` of data.
  Backend& pick(Op op, uint64_t work_bytes) const;
  // The backend for a call on device pointers: the GPU one, or
  // BACKEND_UNAVAILABLE.
  Backend& device_backend(Op op) const;
  // The backend whose memory new stores live in (GPU when one is in use).
  Backend& store_home() const { return gpu_ ? *gpu_ : *cpu_; }
  RuntimeReport report() const;

 private:
  RuntimeOptions opts_;
  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<Backend> gpu_;
  std::string reason_;
};

}  // namespace mnemo
