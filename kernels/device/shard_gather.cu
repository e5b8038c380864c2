#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "core/checked.h"
#include "device/device_args.h"
#include "device/host_copy.h"
#include "device/shard_gather.h"
#include "select/part_merge.h"

namespace mnemo::cuda {

namespace {

constexpr size_t kAlign = 256;
// A host batch's queries are copied to staging by a thread per 512 KB: one
// thread's copy of 3 MB (1000 queries of 768) takes longer than its upload.
constexpr size_t kQueryBytesPerThread = size_t{512} << 10;
size_t up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Copies between the devices go straight over NVLink or PCIe once each side
// may address the other; without that (no peer path) the driver stages them
// through the host. Enabling is process-wide and lasts, so each pair is
// enabled once per process (a repeat is an API error that sanitizers
// report); a pair the caller enabled first is accepted.
// Returns whether device a may now address device b's memory.
bool enable_peers(int a, int b) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, bool> done;
  std::lock_guard<std::mutex> lock(mu);
  auto it = done.find({a, b});
  if (it != done.end()) return it->second;
  int can = 0;
  MNEMO_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
  if (can) {
    MNEMO_CUDA_CHECK(cudaSetDevice(a));
    const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled)
      cudaGetLastError();  // clear it
    else
      MNEMO_CUDA_CHECK(e);
  }
  done.emplace(std::make_pair(a, b), can != 0);
  return can != 0;
}

class DeviceGather final : public ShardGather {
 public:
  DeviceGather(GatherPool& pool, ContextPool& checks, const std::vector<int>& devices, const Placement& place,
               Metric metric, const float* queries, uint64_t nq, uint64_t dim, uint64_t k, uint64_t* ids, float* scores,
               int threads)
      : pool_(pool),
        place_(place),
        host_(!place.on_device),
        lower_(metric == Metric::l2sq),
        queries_(queries),
        nq_(nq),
        k_(k),
        ids_(ids),
        scores_(scores) {
    const int d0 = devices[0];
    const size_t n = devices.size();
    if (n < 2 || n > kMergeMaxParts) fail(Code::internal, "a gather over " + std::to_string(n) + " devices");
    if (!host_) {
      need_device_memory(queries, "queries", d0);
      need_device_memory(ids, "ids", d0);
      need_device_memory(scores, "scores", d0);
      if (place.device_status) need_device_memory(place.device_status, "opts->device_status", d0);
    }
    const uint64_t per = checked_mul(nq, k, "nq * k");
    const size_t q_raw = checked_bytes(checked_mul(nq, dim, 4, "queries"), "queries");
    q_bytes_ = up(q_raw);
    id_bytes_ = up(checked_bytes(checked_mul(per, 8, "ids"), "ids"));
    score_bytes_ = up(checked_bytes(checked_mul(per, 4, "scores"), "scores"));
    // Device 0 holds the lists back to back ([shards x nq x k] ids, then
    // scores, as the merge reads them), then the statuses; for host calls
    // also the queries and the merged lists.
    all_ids_ = up(checked_bytes(checked_mul(n, per, 8, "nq * k * shards"), "lists"));
    all_scores_ = up(n * per * 4);
    const size_t all = all_ids_ + all_scores_ + kAlign + (host_ ? q_bytes_ + id_bytes_ + score_bytes_ : 0);
    const size_t lane = q_bytes_ + id_bytes_ + score_bytes_ + kAlign;
    // The device queries' check, once for every shard (it waits for the
    // stream, as an unsharded search's does); with check_on_device each
    // shard checks its copy inside its search. Host queries were checked by
    // the caller.
    parts_validate_ = !host_ && place.validate && place.check_on_device;
    if (!host_ && place.validate && !place.check_on_device) {
      auto ctx = checks.acquire();
      need_finite_on_device(*ctx, static_cast<cudaStream_t>(place.stream), queries, DType::f32, nq * dim, "queries");
    }
    set_ = pool_.acquire(devices);
    GatherSet& g = *set_;
    MNEMO_CUDA_CHECK(cudaSetDevice(d0));
    stream_ = host_ ? g.streams[0] : static_cast<cudaStream_t>(place.stream);
    // This set's buffers are free once its last call's merge is done.
    MNEMO_CUDA_CHECK(cudaStreamWaitEvent(stream_, g.last, 0));
    // Growing frees a buffer that queued work may still use, and a host
    // batch rewrites the staging that a failed call's uploads may still read.
    bool wait = host_ || g.bufs[0].size() < all;
    for (size_t i = 1; i < n; ++i) wait = wait || g.bufs[i].size() < lane;
    if (wait) MNEMO_CUDA_CHECK(cudaEventSynchronize(g.last));
    g.bufs[0].reserve(all);
    // Host queries go up from pinned staging to every device at once (each
    // over its own link), filled by several threads; device queries are
    // copied from device 0 over the peer path.
    const float* src = queries;
    MNEMO_CUDA_CHECK(cudaEventRecord(g.ready, stream_));
    if (host_) {
      g.staging.reserve(q_raw + per * 12);
      copy_rows(g.staging.get(), queries, 1, q_raw, threads, kQueryBytesPerThread);
      float* dq = reinterpret_cast<float*>(g.bufs[0].get<unsigned char>() + all_ids_ + all_scores_ + kAlign);
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(dq, g.staging.get(), q_raw, cudaMemcpyHostToDevice, stream_));
      src = g.staging.get<const float>();
      queries_ = dq;
    }
    for (size_t i = 1; i < n; ++i) {
      MNEMO_CUDA_CHECK(cudaSetDevice(g.devices[i]));
      g.bufs[i].reserve(lane);
      MNEMO_CUDA_CHECK(cudaStreamWaitEvent(g.streams[i], g.ready, 0));
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(g.bufs[i].get(), src, q_raw, cudaMemcpyDefault, g.streams[i]));
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
    Placement pl;
    pl.on_device = true;
    pl.stream = stream_;
    pl.validate = parts_validate_;
    pl.check_on_device = parts_validate_;
    Part p{};
    if (i == 0) {
      p.queries = queries_;
      p.ids = g.bufs[0].get<uint64_t>();
      p.scores = reinterpret_cast<float*>(g.bufs[0].get<unsigned char>() + all_ids_);
      if (place_.device_status && parts_validate_) pl.device_status = statuses();
    } else if (g.writes_peer[i]) {
      // The lists go straight to their place on device 0.
      const uint64_t per = nq_ * k_;
      p.queries = g.bufs[i].get<const float>();
      p.ids = g.bufs[0].get<uint64_t>() + i * per;
      p.scores = reinterpret_cast<float*>(g.bufs[0].get<unsigned char>() + all_ids_) + i * per;
      pl.stream = g.streams[i];
      pl.peer_outputs = true;
      if (place_.device_status && parts_validate_) pl.device_status = statuses() + i;
    } else {
      auto* b = g.bufs[i].get<unsigned char>();
      p.queries = reinterpret_cast<const float*>(b);
      p.ids = reinterpret_cast<uint64_t*>(b + q_bytes_);
      p.scores = reinterpret_cast<float*>(b + q_bytes_ + id_bytes_);
      pl.stream = g.streams[i];
      if (place_.device_status && parts_validate_)
        pl.device_status = reinterpret_cast<int32_t*>(b + q_bytes_ + id_bytes_ + score_bytes_);
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
      if (!g.writes_peer[i]) {
        MNEMO_CUDA_CHECK(cudaMemcpyAsync(ids + i * per, p.ids, per * 8, cudaMemcpyDefault, g.streams[i]));
        MNEMO_CUDA_CHECK(cudaMemcpyAsync(scores + i * per, p.scores, per * 4, cudaMemcpyDefault, g.streams[i]));
        if (p.place.device_status)
          MNEMO_CUDA_CHECK(cudaMemcpyAsync(statuses() + i, p.place.device_status, 4, cudaMemcpyDefault, g.streams[i]));
      }
      MNEMO_CUDA_CHECK(cudaEventRecord(g.done[i], g.streams[i]));
    }
    MNEMO_CUDA_CHECK(cudaSetDevice(g.devices[0]));
    for (size_t i = 1; i < n; ++i) MNEMO_CUDA_CHECK(cudaStreamWaitEvent(stream_, g.done[i], 0));
    // Host calls: merged into device 0's region past the queries, then one
    // download.
    unsigned char* out = all + all_ids_ + all_scores_ + kAlign + q_bytes_;
    uint64_t* out_ids = host_ ? reinterpret_cast<uint64_t*>(out) : ids_;
    float* out_scores = host_ ? reinterpret_cast<float*>(out + id_bytes_) : scores_;
    // The verdicts exist where the shards checked their queries (as an
    // unsharded search writes device_status only then).
    int32_t* verdict = parts_validate_ ? place_.device_status : nullptr;
    launch_merge_parts(ids, scores, static_cast<uint32_t>(n), nq_, k_, lower_, out_ids, out_scores, statuses(), verdict,
                       stream_);
    unsigned char* staged = g.staging.get<unsigned char>();
    if (host_) {
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(staged, out_ids, per * 8, cudaMemcpyDeviceToHost, stream_));
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(staged + per * 8, out_scores, per * 4, cudaMemcpyDeviceToHost, stream_));
    }
    MNEMO_CUDA_CHECK(cudaEventRecord(g.last, stream_));
    merged_ = true;
    if (!host_) return;
    MNEMO_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::memcpy(ids_, staged, per * 8);
    std::memcpy(scores_, staged + per * 8, per * 4);
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
  bool host_;             // host buffers: uploaded, merged, downloaded
  bool lower_;            // L2: the smaller score first
  const float* queries_;  // on device 0 (for host calls, the uploaded copy)
  uint64_t nq_, k_;
  uint64_t* ids_;
  float* scores_;
  cudaStream_t stream_ = nullptr;                        // the caller's, or the set's own for host calls
  bool parts_validate_ = false;                          // each shard checks its queries (check_on_device)
  size_t q_bytes_ = 0, id_bytes_ = 0, score_bytes_ = 0;  // a shard's regions on its device
  size_t all_ids_ = 0, all_scores_ = 0;                  // every shard's lists on device 0
  bool merged_ = false;
};

}  // namespace

GatherSet::GatherSet(const std::vector<int>& devs) : devices(devs) {
  const size_t n = devices.size();
  streams.assign(n, nullptr);
  done.assign(n, nullptr);
  writes_peer.assign(n, 0);
  bufs.resize(n);
  try {
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) {
        enable_peers(devices[0], devices[i]);
        writes_peer[i] = enable_peers(devices[i], devices[0]);
      }
      MNEMO_CUDA_CHECK(cudaSetDevice(devices[i]));
      MNEMO_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
      MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
    }
    MNEMO_CUDA_CHECK(cudaSetDevice(devices[0]));
    MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&last, cudaEventDisableTiming));
    MNEMO_CUDA_CHECK(cudaEventRecord(last, nullptr));  // nothing to wait for yet
  } catch (...) {
    // The members are destroyed after this; the CUDA handles are not theirs.
    release();
    throw;
  }
}

GatherSet::~GatherSet() { release(); }

void GatherSet::release() {
  // The calling thread keeps its current device.
  int current = 0;
  const bool restore = cudaGetDevice(&current) == cudaSuccess;
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
  if (restore) cudaSetDevice(current);
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

std::unique_ptr<ShardGather> make_shard_gather(GatherPool& pool, ContextPool& checks, const std::vector<int>& devices,
                                               const Placement& place, Metric metric, const float* queries, uint64_t nq,
                                               uint64_t dim, uint64_t k, uint64_t* ids, float* scores, int threads) {
  return std::make_unique<DeviceGather>(pool, checks, devices, place, metric, queries, nq, dim, k, ids, scores,
                                        threads);
}

}  // namespace mnemo::cuda
