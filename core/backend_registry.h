// Creates the backends a runtime asks for: the built-in CPU backend and,
// through the module loader, the CUDA backend.
#pragma once

#include <memory>
#include <string>

#include "backend.h"
#include "error.h"

namespace mnemo {

std::unique_ptr<Backend> make_cpu_backend(const BackendConfig& cfg);

// The CUDA backend, or null with the reason it is unavailable (no module,
// no driver, no device) and the code to report: backend_unavailable, or
// out_of_range for a device id the machine does not have.
std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& cfg, std::string& reason, Code& code);

// Whether a CUDA backend could be created for `device_id` (probed once per
// process and id, without keeping it), with the reason when not.
bool cuda_usable(int32_t device_id, std::string& reason);

// Whether this build produced the CUDA module at all.
bool cuda_module_built();

}  // namespace mnemo
