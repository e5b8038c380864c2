#include "backend_registry.h"

#include <map>
#include <mutex>

#include "cpu/cpu_backend.h"
#include "module_loader.h"

namespace mnemo {

std::unique_ptr<Backend> make_cpu_backend(const BackendConfig& cfg) { return std::make_unique<cpu::CpuBackend>(cfg); }

bool cuda_module_built() {
#ifdef MNEMO_WITH_CUDA_MODULE
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& cfg, std::string& reason, Code& code) {
  code = Code::backend_unavailable;
  // The driver first: without a usable device the module (and cuBLAS) is
  // never loaded, so a runtime on a machine without a GPU stays light.
  if (!cuda_device_present(reason)) {
    reason = std::string(cuda_module_built() ? "" : "this build has no CUDA module; ") +
             "CUDA backend unavailable: " + reason;
    return nullptr;
  }
  LoadedModule m;
  if (!load_module("libmnemo_cuda.so", m, reason)) {
    if (!cuda_module_built())
      reason = "this build has no CUDA module (configured with MNEMO_CUDA=OFF or no nvcc); " + reason;
    return nullptr;
  }
  Backend* raw = nullptr;
  char err[512] = {0};
  const int32_t rc = m.create(&cfg, &raw, err, sizeof err);
  if (rc != 0 || raw == nullptr) {
    reason = std::string("CUDA backend unavailable: ") + (err[0] ? err : "module refused to start");
    if (rc == static_cast<int32_t>(Code::out_of_range)) code = Code::out_of_range;
    return nullptr;
  }
  return std::unique_ptr<Backend>(raw);
}

bool cuda_usable(int32_t device_id, std::string& reason) {
  static std::mutex mu;
  static std::map<int32_t, std::pair<bool, std::string>> seen;
  std::lock_guard<std::mutex> lock(mu);
  auto it = seen.find(device_id);
  if (it == seen.end()) {
    BackendConfig cfg;
    cfg.device_id = device_id;
    cfg.num_threads = 1;
    std::string why;
    Code code;
    const bool ok = make_cuda_backend(cfg, why, code) != nullptr;
    it = seen.emplace(device_id, std::make_pair(ok, why)).first;
  }
  reason = it->second.second;
  return it->second.first;
}

}  // namespace mnemo
