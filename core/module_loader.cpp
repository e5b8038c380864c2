#include "module_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace mnemo {

namespace {

// The folder holding libmnemo.so itself, found through a symbol inside it.
std::string own_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_dir), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string p = info.dli_fname;
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? std::string(".") : p.substr(0, slash);
}

bool try_load(const std::string& path, LoadedModule& out, std::string& reason) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    reason = std::string("cannot load ") + path + ": " + (e ? e : "unknown error");
    return false;
  }
  auto version = reinterpret_cast<mnemo_module_interface_version_fn>(dlsym(h, "mnemo_module_interface_version"));
  auto create = reinterpret_cast<mnemo_module_create_fn>(dlsym(h, "mnemo_module_create"));
  if (version == nullptr || create == nullptr) {
    reason = path + " is not a mnemo backend module (entry points missing)";
    dlclose(h);
    return false;
  }
  if (version() != kModuleInterfaceVersion) {
    reason = path + " was built for backend interface " + std::to_string(version()) + ", this library needs " +
             std::to_string(kModuleInterfaceVersion);
    dlclose(h);
    return false;
  }
  out.handle = h;
  out.create = create;
  out.path = path;
  return true;
}

}  // namespace

bool load_module(const char* file_name, LoadedModule& out, std::string& reason) {
  // One load per process: the module stays mapped, backends come and go.
  static std::mutex mu;
  static LoadedModule cached;
  static std::string cached_reason;
  static bool tried = false;
  std::lock_guard<std::mutex> lock(mu);
  if (!tried) {
    tried = true;
    std::vector<std::string> candidates;
    if (const char* dir = std::getenv("MNEMO_BACKEND_DIR"); dir && *dir)
      candidates.push_back(std::string(dir) + "/" + file_name);
    const std::string mine = own_dir();
    if (!mine.empty()) candidates.push_back(mine + "/" + file_name);
#ifdef MNEMO_MODULE_BUILD_DIR
    // Statically linked programs: own_dir() is the program's folder.
    candidates.push_back(std::string(MNEMO_MODULE_BUILD_DIR) + "/" + file_name);
#endif
    std::string why;
    for (const auto& c : candidates) {
      std::string r;
      if (try_load(c, cached, r)) {
        why.clear();
        break;
      }
      why += (why.empty() ? "" : "; ") + r;
    }
    cached_reason = cached.handle ? "" : (why.empty() ? std::string("no location to search for ") + file_name : why);
  }
  out = cached;
  reason = cached_reason;
  return cached.handle != nullptr;
}

bool cuda_device_present(std::string& reason) {
  // Asked once per process. libcuda is the driver alone (a few MB); the
  // module would bring the CUDA runtime, cuBLAS and cuBLASLt (hundreds).
  static std::mutex mu;
  static int known = -1;
  static std::string why;
  std::lock_guard<std::mutex> lock(mu);
  if (known < 0) {
    known = 0;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = dlerror();
      why = std::string("no CUDA driver (cannot load libcuda.so.1: ") + (e ? e : "unknown error") + ")";
    } else {
      using init_fn = int (*)(unsigned);
      using count_fn = int (*)(int*);
      auto init = reinterpret_cast<init_fn>(dlsym(h, "cuInit"));
      auto count = reinterpret_cast<count_fn>(dlsym(h, "cuDeviceGetCount"));
      int n = 0, rc = 0;
      if (init == nullptr || count == nullptr)
        why = "libcuda.so.1 lacks cuInit or cuDeviceGetCount";
      else if ((rc = init(0)) != 0)
        why = "no usable CUDA device (cuInit failed with CUresult " + std::to_string(rc) + ")";
      else if ((rc = count(&n)) != 0)
        why = "no usable CUDA device (cuDeviceGetCount failed with CUresult " + std::to_string(rc) + ")";
      else if (n <= 0)
        why = "no CUDA device";
      else
        known = 1;
      // Without a device the driver goes again; with one it stays for the module.
      if (known == 0) dlclose(h);
    }
  }
  reason = why;
  return known == 1;
}

}  // namespace mnemo
