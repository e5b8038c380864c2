#include <string>

#include "cuda_backend.h"

namespace mnemo::cuda {

CudaBackend::CudaBackend(const BackendConfig& cfg, const std::string& device_name, int sm_count, size_t memory)
    : cfg_(cfg), sm_count_(sm_count), pool_(cfg.device_id) {
  description_ = device_name + " (device " + std::to_string(cfg.device_id) + ", " + std::to_string(sm_count) +
                 " SMs, " + std::to_string(memory >> 20) + " MiB)";
}

// Pair scoring, resampling and normalisation have no GPU kernels in this
// module yet: implements() reports them and the runtime runs them on the
// CPU, so these are never reached.
void CudaBackend::score_pairs(const PairsArgs&) { fail(Code::internal, "score_pairs routed to the CUDA backend"); }
void CudaBackend::resample(const ResampleArgs&) { fail(Code::internal, "resample routed to the CUDA backend"); }
void CudaBackend::normalize_rows(const NormArgs&) { fail(Code::internal, "normalize_rows routed to the CUDA backend"); }
void CudaBackend::layer_norm(const NormArgs&) { fail(Code::internal, "layer_norm routed to the CUDA backend"); }

}  // namespace mnemo::cuda
