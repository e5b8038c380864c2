// Finds and loads a backend module (libmnemo_cuda.so) with dlopen.
#pragma once

#include <memory>
#include <string>

#include "backend.h"

namespace mnemo {

struct LoadedModule {
  void* handle = nullptr;  // dlopen handle, kept open for the process lifetime
  mnemo_module_create_fn create = nullptr;
  std::string path;
};

// Looks in $MNEMO_BACKEND_DIR, then next to libmnemo.so (or the program that
// links it statically), then in the build's library folder. Returns false with
// a reason (not found, unloadable, interface version mismatch).
bool load_module(const char* file_name, LoadedModule& out, std::string& reason);

// Whether the CUDA driver (libcuda.so.1, opened with dlopen: libmnemo.so does
// not link CUDA) initialises and sees at least one device; false with a
// reason otherwise. Asked once per process; loads neither the CUDA runtime
// nor cuBLAS.
bool cuda_device_present(std::string& reason);

}  // namespace mnemo
