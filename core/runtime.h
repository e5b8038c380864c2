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

// AUTO sends work touching fewer bytes than this to the CPU. Provisional
// until the GPU break-even is measured on the target device.
constexpr uint64_t kAutoGpuMinBytes = 8ull << 20;
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
