#include <string>

#include "cuda_backend.h"

namespace mnemo::cuda {

CudaBackend::CudaBackend(const BackendConfig& cfg, const std::string& device_name, int sm_count, size_t memory)
    : cfg_(cfg), sm_count_(sm_count), pool_(cfg.device_id) {
  description_ = device_name + " (device " + std::to_string(cfg.device_id) + ", " + std::to_string(sm_count) +
                 " SMs, " + std::to_string(memory >> 20) + " MiB)";
}

}  // namespace mnemo::cuda
