// A runtime: the backends in use, the precision and threading choices, and
// the AUTO dispatch rule between CPU and GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"

namespace mnemo {

struct RuntimeOptions {
  BackendKind backend = BackendKind::automatic;
  Precision precision = Precision::exact;
  int32_t device_id = 0;
  uint32_t num_threads = 0;  // 0 = all cores
  bool validate = true;
  uint64_t workspace_bytes = 0;  // 0 = default
  // Sharding (store_shards.cpp). CPU: `cpu_shards` shards per store (0 or 1:
  // none). CUDA: one shard per device of `devices`; empty = device_id alone;
  // `all_devices` = every visible device.
  uint32_t cpu_shards = 0;
  std::vector<int32_t> devices;
  bool all_devices = false;
};

struct RuntimeReport {
  BackendKind requested, active;
  Precision precision;
  int32_t device_id;
  std::vector<int32_t> devices;  // one per shard of a GPU runtime
  uint32_t shards;               // shards of each store (1: unsharded)
  uint32_t num_threads;
  bool cuda_available;
  uint64_t auto_gpu_min_bytes;
  std::string device_name;
  std::string reason;
};

// AUTO sends work touching fewer bytes than this to the CPU. Measured on the
// H200 machine (16 cores) with the SIMD CPU backend (bench/gpu/gpu_bench.cu,
// bench_break_even; bench/results/h200-break-even.jsonl): one 768-dim f32
// query, k = 10, the whole host call: CPU 0.015 ms against CUDA 0.095 ms at
// 256 vectors (768 KiB), 0.115 against 0.100 ms at 1024 vectors (3 MiB),
// and CUDA faster at every larger size (0.92 against 0.19 ms at 65536).
constexpr uint64_t kAutoGpuMinBytes = 3ull << 20;
// Pair scoring, resampling and normalisation of host buffers: the GPU must
// first receive every input byte over PCIe and send the output back, while
// the CPU reads them in place. Measured on the same machine
// (bench/gpu/ops_bench.cu, "break-even ... (host call)" rows): pairs over a
// 10k x 1024 f16 table, CPU 4.08 ms against CUDA 5.15 ms at 10k pairs
// (41 MB of rows), 5.97 against 5.20 ms at 100k pairs (410 MB), 30.6 against
// 12.0 ms at 1M; normalising n x 768 f32 rows (1k to 1M rows) and
// resampling b x 512 -> 256 x 64 f32 (b = 64 to 4096) the CPU was faster
// at every size, so AUTO keeps them on the CPU (UINT64_MAX) for host
// buffers.
constexpr uint64_t kAutoGpuMinBytesPairs = 128ull << 20;
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
  // CPU threads for the host-side work of stores (resolved: at least 1).
  int threads() const { return static_cast<int>(opts_.num_threads); }
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

  // Shards of every store made on this runtime (1: a store is not sharded).
  uint32_t shard_count() const { return shards_; }
  // The GPU backend of shard i (one per device), or null on a CPU runtime.
  Backend* shard_gpu(uint32_t i) const { return shard_gpus_.empty() ? nullptr : shard_gpus_[i]; }
  // The backend whose memory shard i lives in.
  Backend& shard_home(uint32_t i) const { return shard_gpus_.empty() ? *cpu_ : *shard_gpus_[i]; }

 private:
  RuntimeOptions opts_;
  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<Backend> gpu_;
  // A sharded GPU runtime: the backends of the devices after the first
  // (gpu_), and every device's backend in shard order.
  std::vector<std::unique_ptr<Backend>> more_gpus_;
  std::vector<Backend*> shard_gpus_;
  std::vector<int32_t> devices_;
  uint32_t shards_ = 1;
  void open_more_devices(const BackendConfig& cfg);
  std::string reason_;
};

}  // namespace mnemo
