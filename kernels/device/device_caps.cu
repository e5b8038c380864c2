// Device attributes the kernels' launch choices ask for on every search,
// read from the driver once per device.
#include <cuda_runtime.h>

#include <atomic>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "device/cuda_util.cuh"
#include "device/device_caps.h"

namespace mnemo::cuda {

namespace {

// The attribute of the current device, cached in cache[device] (0: not yet
// read; an attribute of 0 is read again each time, which none of these is).
int cached_attribute(std::atomic<int> (&cache)[64], cudaDeviceAttr attr) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 0;
  int v = cache[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    if (cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess) return 0;
    cache[dev].store(v, std::memory_order_relaxed);
  }
  return v;
}

}  // namespace

int device_major() {
  static std::atomic<int> major[64];
  return cached_attribute(major, cudaDevAttrComputeCapabilityMajor);
}

size_t device_smem_optin() {
  static std::atomic<int> optin[64];
  return static_cast<size_t>(cached_attribute(optin, cudaDevAttrMaxSharedMemoryPerBlockOptin));
}

int resident_grid(const void* kernel, int threads, size_t smem, size_t smem_limit) {
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, int, size_t>, int> known;
  // The limit each kernel has on each device: only ever raised, so that a
  // launch cached with more shared memory never meets a lower limit set
  // for a smaller one since.
  static std::map<std::pair<int, const void*>, size_t> limit;
  int dev = 0;
  check(cudaGetDevice(&dev), "resident grid: device");
  const auto key = std::make_tuple(dev, kernel, threads, smem);
  std::lock_guard<std::mutex> g(mu);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  const size_t want = smem_limit < smem ? smem : smem_limit;
  size_t& have = limit[{dev, kernel}];
  if (want > 48 * 1024 && want > have) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(want)),
          "resident grid: shared memory");
    have = want;
  }
  int per = 0, sms = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kernel, threads, smem), "resident grid: occupancy");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "resident grid: SMs");
  return known[key] = per * sms;
}

}  // namespace mnemo::cuda
