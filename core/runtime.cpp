#include "runtime.h"

#include <thread>

#include "backend_registry.h"
#include "error.h"

namespace mnemo {

namespace {
uint32_t resolve_threads(uint32_t asked) {
  if (asked > 0) return asked;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? hw : 1;
}
}  // namespace

Runtime::Runtime(const RuntimeOptions& opts) : opts_(opts) {
  opts_.num_threads = resolve_threads(opts.num_threads);
  if (opts_.workspace_bytes == 0) opts_.workspace_bytes = kDefaultWorkspaceBytes;
  BackendConfig cfg;
  cfg.precision = opts_.precision;
  cfg.device_id = opts_.device_id;
  cfg.num_threads = opts_.num_threads;
  cfg.workspace_bytes = opts_.workspace_bytes;
  cpu_ = make_cpu_backend(cfg);
  if (opts_.backend == BackendKind::cpu) {
    reason_ = "CPU backend requested";
    return;
  }
  std::string why;
  Code code;
  gpu_ = make_cuda_backend(cfg, why, code);
  if (opts_.backend == BackendKind::cuda) {
    if (!gpu_) fail(code, why);
    reason_ = "CUDA backend requested";
  } else if (gpu_) {
    reason_ = "AUTO: GPU available; searches and similarity under " + std::to_string(kAutoGpuMinBytes) +
              " bytes run on the CPU";
    reason_ += "; pairs of host buffers from " + std::to_string(kAutoGpuMinBytesPairs) +
               " bytes of rows on the GPU; resampling and normalisation of host buffers on the CPU (their _device "
               "calls on the GPU)";
  }
  if (gpu_) {
    std::string cpu_ops;
    const std::pair<Op, const char*> ops[] = {{Op::similarity, "similarity"},    {Op::search, "search"},
                                              {Op::score_pairs, "pairs"},        {Op::resample, "resample"},
                                              {Op::normalize_rows, "normalize"}, {Op::layer_norm, "layer_norm"}};
    for (const auto& [op, name] : ops)
      if (!gpu_->implements(op)) cpu_ops += (cpu_ops.empty() ? "" : ", ") + std::string(name);
    if (!cpu_ops.empty()) reason_ += "; on the CPU: " + cpu_ops;
  } else {
    reason_ = "AUTO: using the CPU because " + why;
  }
}

Runtime::~Runtime() = default;

Backend& Runtime::pick(Op op, uint64_t work_bytes) const {
  if (!gpu_ || !gpu_->implements(op)) return *cpu_;
  if (opts_.backend == BackendKind::cuda) return *gpu_;
  return work_bytes >= auto_gpu_min_bytes(op) ? *gpu_ : *cpu_;
}

Backend& Runtime::device_backend(Op op) const {
  if (!gpu_)
    fail(Code::backend_unavailable,
         "device pointers need a runtime on the CUDA backend (this runtime runs on the CPU: " + reason_ + ")");
  if (!gpu_->implements(op)) fail(Code::unsupported, "the CUDA backend does not run this operation on device pointers");
  return *gpu_;
}

uint64_t auto_gpu_min_bytes(Op op) {
  switch (op) {
    case Op::similarity:
    case Op::search: return kAutoGpuMinBytes;
    case Op::score_pairs: return kAutoGpuMinBytesPairs;
    default: return kAutoGpuMinBytesRows;
  }
}

RuntimeReport Runtime::report() const {
  RuntimeReport r;
  r.requested = opts_.backend;
  r.active = gpu_ ? BackendKind::cuda : BackendKind::cpu;
  r.precision = opts_.precision;
  r.device_id = gpu_ ? opts_.device_id : -1;
  r.num_threads = opts_.num_threads;
  // A CPU runtime never starts CUDA; asking for its report probes once.
  std::string why;
  r.cuda_available = gpu_ != nullptr || (opts_.backend == BackendKind::cpu && cuda_usable(opts_.device_id, why));
  r.auto_gpu_min_bytes = opts_.backend == BackendKind::automatic && gpu_ ? kAutoGpuMinBytes : 0;
  r.device_name = gpu_ ? gpu_->description() : cpu_->description();
  r.reason = reason_;
  return r;
}

}  // namespace mnemo
