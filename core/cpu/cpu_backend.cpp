#include "cpu_backend.h"

#include <cstdlib>
#include <string>

#include "simd_kernels.h"

namespace mnemo::cpu {

CpuBackend::CpuBackend(const BackendConfig& cfg) : cfg_(cfg) {
  // A tuning knob for measuring the switch point; 0 or junk keeps the default.
  if (const char* v = std::getenv("MNEMO_CPU_GEMM_MIN_QUERIES")) {
    const unsigned long long n = std::strtoull(v, nullptr, 10);
    if (n > 0) gemm_min_queries_ = n;
  }
}

std::string CpuBackend::description() const {
  return "cpu (" + std::to_string(cfg_.num_threads) + " threads, " + simd::target_name() +
         " SIMD, OpenBLAS sgemm from " + std::to_string(gemm_min_queries_) + " queries)";
}

}  // namespace mnemo::cpu
