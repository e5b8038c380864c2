#include "backend_registry.h"

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

std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& cfg, std::string& reason) {
  LoadedModule m;
  if (!load_module("libmnemo_cuda.so", m, reason)) {
    if (!cuda_module_built()) reason = "this build has no CUDA module (configured with MNEMO_CUDA=OFF or no nvcc); " + reason;
    return nullptr;
  }
  Backend* raw = nullptr;
  char err[512] = {0};
  const int32_t rc = m.create(&cfg, &raw, err, sizeof err);
  if (rc != 0 || raw == nullptr) {
    reason = std::string("CUDA backend unavailable: ") + (err[0] ? err : "module refused to start");
    return nullptr;
  }
  return std::unique_ptr<Backend>(raw);
}

}  // namespace mnemo
