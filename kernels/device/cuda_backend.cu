#include <algorithm>
#include <cmath>
#include <string>

#include "device/cuda_backend.h"

namespace mnemo::cuda {

CudaBackend::CudaBackend(const BackendConfig& cfg, const std::string& device_name, int sm_count, size_t memory)
    : cfg_(cfg), sm_count_(sm_count), pool_(cfg.device_id) {
  description_ = device_name + " (device " + std::to_string(cfg.device_id) + ", " + std::to_string(sm_count) +
                 " SMs, " + std::to_string(memory >> 20) + " MiB)";
}

void CudaBackend::copy_to_host(void* dst, const void* src, uint64_t bytes, void* stream) {
  // The pool's contexts do the same: calls may come from any host thread.
  MNEMO_CUDA_CHECK(cudaSetDevice(cfg_.device_id));
  const auto st = static_cast<cudaStream_t>(stream);
  MNEMO_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, st));
  MNEMO_CUDA_CHECK(cudaStreamSynchronize(st));
}

namespace {

class DeviceBytes final : public DeviceCopy {
 public:
  explicit DeviceBytes(uint64_t bytes) : buf_(std::max<uint64_t>(bytes, 16)) {}
  const void* data() const override { return buf_.get(); }
  void* get() { return buf_.get(); }

 private:
  DeviceBuffer buf_;
};

}  // namespace

std::unique_ptr<DeviceCopy> CudaBackend::copy_to_device(const void* src, uint64_t bytes) {
  auto ctx = pool_.acquire();  // sets the device
  auto copy = std::make_unique<DeviceBytes>(bytes);
  // Waited for: the copy is made when an index is built, the source may
  // change once this returns, and searches on other streams read it.
  if (bytes > 0) {
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(copy->get(), src, bytes, cudaMemcpyHostToDevice, ctx->stream));
    ctx->sync();
  }
  return copy;
}

std::unique_ptr<ShardGather> CudaBackend::gather_shards(const std::vector<Backend*>& shards, const Placement& place,
                                                        Metric metric, const float* queries, uint64_t nq, uint64_t dim,
                                                        uint64_t k, uint64_t* ids, float* scores) {
  std::vector<int> devices;
  for (Backend* b : shards) {
    auto* c = dynamic_cast<CudaBackend*>(b);
    if (c == nullptr) return nullptr;  // a shard in host memory
    devices.push_back(c->device());
  }
  if (devices.empty() || devices[0] != device()) fail(Code::internal, "a gather led by another device");
  // Host calls of few queries keep each shard's own search: its fused-scan
  // call replays as a CUDA graph that writes pinned results, which a gather
  // (an upload, peer copies, a merge, a download) would only add to.
  if (!place.on_device && nq < kGemmMinQueries) return nullptr;
  return make_shard_gather(gathers_, pool_, devices, place, metric, queries, nq, dim, k, ids, scores,
                           static_cast<int>(cfg_.num_threads));
}

bool fast_queries_fit(DType storage, const float* queries, uint64_t nq, uint64_t dim) {
  if (storage != DType::f16) return true;
  for (uint64_t i = 0; i < nq; ++i) {
    float m = 0.0f;
    for (uint64_t d = 0; d < dim; ++d) m = std::max(m, std::fabs(queries[i * dim + d]));
    // Half the largest f16 (65504) keeps rounding from reaching infinity;
    // 2^-10 keeps the largest entry at least 16 times above f16's smallest
    // normal value.
    if (m > 32768.0f || (m > 0.0f && m < 0x1p-10f)) return false;
  }
  return true;
}

}  // namespace mnemo::cuda
