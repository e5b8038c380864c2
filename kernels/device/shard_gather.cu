#include "device/shard_gather.h"

#include <algorithm>
#include <string>

#include "core/checked.h"
#include "device/device_args.h"
#include "select/part_merge.h"

namespace mnemo::cuda {

namespace {

constexpr size_t kAlign = 256;
size_t up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Copies between the devices go straight over NVLink or PCIe once each side
// may address the other; without that (no peer path) the driver stages them
// through the host. Enabling is process-wide and lasts: a repeat is benign.
void enable_peers(int a, int b) {
  int can = 0;
  MNEMO_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
  if (!can) return;
  MNEMO_CUDA_CHECK(cudaSetDevice(a));
  const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled)
    cudaGetLastError();  // clear it
  else
    MNEMO_CUDA_CHECK(e);
}

class DeviceGather final : public ShardGather {
 public:
  DeviceGather(GatherPool& pool, const std::vector<int>& devices, const Placement& place, Metric metric,
               const float* queries, uint64_t nq, uint64_t dim, uint64_t k, uint64_t* ids, float* scores)
      : pool_(pool), place_(place), lower_(metric == Metric::l2sq), queries_(queries), nq_(nq), k_(k), ids_(ids),
        scores_(scores) {
    const int d0 = devices[0];
    const size_t n = devices.size();
    if (n < 2 || n > kMergeMaxParts) fail(Code::internal, "a gather over " + std::to_string(n) + " devices");
    need_device_memory(queries, "queries", d0);
    need_device_memory(ids, "ids", d0);
    need_device_memory(scores, "scores", d0);
    if (place.device_status) need_device_memory(place.device_status, "opts->device_status", d0);
    const uint64_t per = checked_mul(nq, k, "nq * k");
    q_bytes_ = up(checked_bytes(checked_mul(nq, dim, 4, "queries"), "queries"));
    id_bytes_ = up(checked_bytes(checked_mul(per, 8, "ids"), "ids"));
    score_bytes_ = up(checked_bytes(checked_mul(per, 4, "scores"), "scores"));
    set_ = pool_.acquire(devices);
    GatherSet& g = *set_;
    stream_ = static_cast<cudaStream_t>(place.stream);
    MNEMO_CUDA_CHECK(cudaSetDevice(d0));
    // This set's buffers are free once its last call's merge is done.
    MNEMO_CUDA_CHECK(cudaStreamWaitEvent(stream_, g.last, 0));
    // Device 0 holds the lists back to back ([shards x nq x k] ids, then
    // scores, as the merge reads them), then the statuses.
    all_ids_ = up(checked_bytes(checked_mul(n, per, 8, "nq * k * shards"), "lists"));
    all_scores_ = up(n * per * 4);
    const size_t all = all_ids_ + all_scores_ + up(n * 4);
    const size_t lane = q_bytes_ + id_bytes_ + score_bytes_ + kAlign;
    // Growing frees a buffer that queued work may still use.
    bool grow = g.bufs[0].size() < all;
    for (size_t i = 1; i < n; ++i) grow = grow || g.bufs[i].size() < lane;
    if (grow) MNEMO_CUDA_CHECK(cudaEventSynchronize(g.last));
    g.bufs[0].reserve(all);
    MNEMO_CUDA_CHECK(cudaEventRecord(g.ready, stream_));
    for (size_t i = 1; i < n; ++i) {
      MNEMO_CUDA_CHECK(cudaSetDevice(g.devices[i]));
      g.bufs[i].reserve(lane);
      MNEMO_CUDA_CHECK(cudaStreamWaitEvent(g.streams[i], g.ready, 0));
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(g.bufs[i].get(), queries, nq * dim * 4, cudaMemcpyDefault, g.streams[i]));
    }
    MNEMO_CUDA_CHECK(cudaSetDevice(d0));
  }

  ~DeviceGather() override {
    if (!set_) return;
    if (!merged_) {
      // A shard failed: the caller's buffers are left as they were, and the
      // set's last use still covers every shard's queued work.
      try {
        join();
      } catch (...) {
        return;  // the set is dropped, not reused
      }
    }
    pool_.give_back(std::move(set_));
  }

  Part part(size_t i) const override {
    const GatherSet& g = *set_;
    Placement pl = place_;
    Part p{};
    if (i == 0) {
      p.queries = queries_;
      p.ids = g.bufs[0].get<uint64_t>();
      p.scores = reinterpret_cast<float*>(g.bufs[0].get<unsigned char>() + all_ids_);
      if (pl.device_status) pl.device_status = statuses();
    } else {
      auto* b = g.bufs[i].get<unsigned char>();
      p.queries = reinterpret_cast<const float*>(b);
      p.ids = reinterpret_cast<uint64_t*>(b + q_bytes_);
      p.scores = reinterpret_cast<float*>(b + q_bytes_ + id_bytes_);
      pl.stream = g.streams[i];
      if (pl.device_status) pl.device_status = reinterpret_cast<int32_t*>(b + q_bytes_ + id_bytes_ + score_bytes_);
    }
    p.place = pl;
    return p;
  }

  void merge() override {
    GatherSet& g = *set_;
    const size_t n = g.devices.size();
    auto* all = g.bufs[0].get<unsigned char>();
    auto* ids = reinterpret_cast<uint64_t*>(all);
    auto* scores = reinterpret_cast<float*>(all + all_ids_);
    const uint64_t per = nq_ * k_;
    for (size_t i = 1; i < n; ++i) {
      const Part p = part(i);
      MNEMO_CUDA_CHECK(cudaSetDevice(g.devices[i]));
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(ids + i * per, p.ids, per * 8, cudaMemcpyDefault, g.streams[i]));
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(scores + i * per, p.scores, per * 4, cudaMemcpyDefault, g.streams[i]));
      if (place_.device_status)
        MNEMO_CUDA_CHECK(
            cudaMemcpyAsync(statuses() + i, p.place.device_status, 4, cudaMemcpyDefault, g.streams[i]));
      MNEMO_CUDA_CHECK(cudaEventRecord(g.done[i], g.streams[i]));
    }
    MNEMO_CUDA_CHECK(cudaSetDevice(g.devices[0]));
    for (size_t i = 1; i < n; ++i) MNEMO_CUDA_CHECK(cudaStreamWaitEvent(stream_, g.done[i], 0));
    launch_merge_parts(ids, scores, static_cast<uint32_t>(n), nq_, k_, lower_, ids_, scores_, statuses(),
                       place_.device_status, stream_);
    MNEMO_CUDA_CHECK(cudaEventRecord(g.last, stream_));
    merged_ = true;
  }

 private:
  int32_t* statuses() const {
    return reinterpret_cast<int32_t*>(set_->bufs[0].get<unsigned char>() + all_ids_ + all_scores_);
  }
  // Orders every shard stream's queued work before the set's last use.
  void join() {
    GatherSet& g = *set_;
    for (size_t i = 1; i < g.devices.size(); ++i) {
      MNEMO_CUDA_CHECK(cudaSetDevice(g.devices[i]));
      MNEMO_CUDA_CHECK(cudaEventRecord(g.done[i], g.streams[i]));
    }
    MNEMO_CUDA_CHECK(cudaSetDevice(g.devices[0]));
    for (size_t i = 1; i < g.devices.size(); ++i) MNEMO_CUDA_CHECK(cudaStreamWaitEvent(stream_, g.done[i], 0));
    MNEMO_CUDA_CHECK(cudaEventRecord(g.last, stream_));
  }

  GatherPool& pool_;
  std::unique_ptr<GatherSet> set_;
  Placement place_;
  bool lower_;
  const float* queries_;
  uint64_t nq_, k_;
  uint64_t* ids_;
  float* scores_;
  cudaStream_t stream_ = nullptr;
  size_t q_bytes_ = 0, id_bytes_ = 0, score_bytes_ = 0;  // a shard's regions on its device
  size_t all_ids_ = 0, all_scores_ = 0;                  // every shard's lists on device 0
  bool merged_ = false;
};

}  // namespace

GatherSet::GatherSet(const std::vector<int>& devs) : devices(devs) {
  const size_t n = devices.size();
  streams.assign(n, nullptr);
  done.assign(n, nullptr);
  bufs.resize(n);
  try {
    for (size_t i = 1; i < n; ++i) {
      enable_peers(devices[0], devices[i]);
      enable_peers(devices[i], devices[0]);
      MNEMO_CUDA_CHECK(cudaSetDevice(devices[i]));
      MNEMO_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
      MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
    }
    MNEMO_CUDA_CHECK(cudaSetDevice(devices[0]));
    MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&last, cudaEventDisableTiming));
    MNEMO_CUDA_CHECK(cudaEventRecord(last, nullptr));  // nothing to wait for yet
  } catch (...) {
    this->~GatherSet();
    throw;
  }
}

GatherSet::~GatherSet() {
  for (size_t i = 0; i < devices.size(); ++i) {
    cudaSetDevice(devices[i]);
    if (streams[i]) cudaStreamDestroy(streams[i]);
    if (done[i]) cudaEventDestroy(done[i]);
    streams[i] = nullptr;
    done[i] = nullptr;
    bufs[i] = DeviceBuffer();
    if (i == 0) {
      if (ready) cudaEventDestroy(ready);
      if (last) cudaEventDestroy(last);
      ready = last = nullptr;
    }
  }
}

std::unique_ptr<GatherSet> GatherPool::acquire(const std::vector<int>& devices) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if ((*it)->devices == devices) {
        auto s = std::move(*it);
        free_.erase(it);
        return s;
      }
  }
  return std::make_unique<GatherSet>(devices);
}

void GatherPool::give_back(std::unique_ptr<GatherSet> s) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(s));
}

std::unique_ptr<ShardGather> make_shard_gather(GatherPool& pool, const std::vector<int>& devices,
                                               const Placement& place, Metric metric, const float* queries,
                                               uint64_t nq, uint64_t dim, uint64_t k, uint64_t* ids, float* scores) {
  return std::make_unique<DeviceGather>(pool, devices, place, metric, queries, nq, dim, k, ids, scores);
}

}  // namespace mnemo::cuda
