#include "runtime.h"

#include <algorithm>
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
  const uint32_t cpu_shards = std::max<uint32_t>(opts_.cpu_shards, 1);
  if (opts_.backend == BackendKind::cpu) {
    reason_ = "CPU backend requested";
    shards_ = cpu_shards;
    return;
  }
  // The first device decides between GPU and CPU as for one device.
  if (!opts_.devices.empty()) cfg.device_id = opts_.devices[0];
  if (opts_.all_devices) cfg.device_id = 0;
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
  if (!gpu_) {
    shards_ = cpu_shards;
    return;
  }
  open_more_devices(cfg);
}

void Runtime::open_more_devices(const BackendConfig& first) {
  devices_.push_back(first.device_id);
  shard_gpus_.push_back(gpu_.get());
  std::vector<int32_t> rest;
  if (opts_.all_devices) {
    // Every visible device: ids until the module says there is no such one.
    for (int32_t id = 1;; ++id) {
      BackendConfig cfg = first;
      cfg.device_id = id;
      std::string why;
      Code code;
      auto be = make_cuda_backend(cfg, why, code);
      if (!be) {
        if (code == Code::out_of_range) break;
        fail(code, "device " + std::to_string(id) + ": " + why);
      }
      devices_.push_back(id);
      shard_gpus_.push_back(be.get());
      more_gpus_.push_back(std::move(be));
    }
  } else {
    for (size_t i = 1; i < opts_.devices.size(); ++i) {
      BackendConfig cfg = first;
      cfg.device_id = opts_.devices[i];
      std::string why;
      Code code;
      auto be = make_cuda_backend(cfg, why, code);
      if (!be) fail(code, "devices[" + std::to_string(i) + "] = " + std::to_string(cfg.device_id) + ": " + why);
      devices_.push_back(cfg.device_id);
      shard_gpus_.push_back(be.get());
      more_gpus_.push_back(std::move(be));
    }
  }
  shards_ = static_cast<uint32_t>(devices_.size());
  if (shards_ > 1) reason_ += "; stores sharded over " + std::to_string(shards_) + " devices";
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
  r.device_id = gpu_ ? devices_.front() : -1;
  r.devices = devices_;
  r.shards = shards_;
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
