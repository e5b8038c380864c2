// Creates the backends a runtime asks for: the built-in CPU backend and,
// through the module loader, the CUDA backend.
#pragma once

#include <memory>
#include <string>

#include "backend.h"

namespace mnemo {

std::unique_ptr<Backend> make_cpu_backend(const BackendConfig& cfg);

// The CUDA backend, or null with the reason it is unavailable (no module,
// no driver, no device, bad device id).
std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& cfg, std::string& reason);

// Whether this build produced the CUDA module at all.
bool cuda_module_built();

}  // namespace mnemo
