#include "cpu_backend.h"

#include <string>

namespace mnemo::cpu {

std::string CpuBackend::description() const {
  return "cpu (" + std::to_string(cfg_.num_threads) + " threads, scalar f64-accumulating kernels)";
}

}  // namespace mnemo::cpu
