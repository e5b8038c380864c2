// The two entry points libmnemo.so looks up with dlsym. Everything else in
// this module is hidden.
#include <cstdio>
#include <cstring>
#include <new>

#include "device/cuda_backend.h"

namespace {

void set_err(char* err, size_t len, const std::string& msg) {
  if (err && len) std::snprintf(err, len, "%s", msg.c_str());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int32_t mnemo_module_interface_version(void) {
  return mnemo::kModuleInterfaceVersion;
}

extern "C" __attribute__((visibility("default"))) int32_t mnemo_module_create(const mnemo::BackendConfig* cfg,
                                                                              mnemo::Backend** out, char* err,
                                                                              size_t err_len) {
  using mnemo::Code;
  try {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      set_err(err, err_len, std::string("no usable CUDA driver or device: ") + cudaGetErrorString(e));
      cudaGetLastError();
      return static_cast<int32_t>(Code::backend_unavailable);
    }
    if (count == 0) {
      set_err(err, err_len, "no CUDA device present");
      return static_cast<int32_t>(Code::backend_unavailable);
    }
    if (cfg->device_id >= count) {
      set_err(err, err_len,
              "device_id " + std::to_string(cfg->device_id) + " but only " + std::to_string(count) +
                  " CUDA device(s) present");
      return static_cast<int32_t>(Code::out_of_range);
    }
    cudaDeviceProp prop{};
    mnemo::cuda::check(cudaGetDeviceProperties(&prop, cfg->device_id), "cudaGetDeviceProperties");
    *out = new mnemo::cuda::CudaBackend(*cfg, prop.name, prop.multiProcessorCount, prop.totalGlobalMem);
    return 0;
  } catch (const mnemo::Error& x) {
    set_err(err, err_len, x.what());
    return static_cast<int32_t>(x.code());
  } catch (const std::exception& x) {
    set_err(err, err_len, x.what());
    return static_cast<int32_t>(Code::internal);
  }
}
