// Searches of a store sharded over several GPUs that merge on the first
// device: the queries copied to every shard's device, each shard searched on
// a stream of its own device (ordered after the caller's earlier work), its
// list written into the first device's memory (peer access, over NVLink
// where there is one; copied back where the devices are not peers) and
// merged there. Device buffers: on the caller's stream, and the
// call returns without waiting, as for an unsharded store. Host buffers
// (batches): copied once into pinned staging (over several threads), from
// which every device uploads its copy at once, and the merged lists
// downloaded once, instead of an upload, a download and a host merge per
// shard.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/backend.h"
#include "device/cuda_util.cuh"
#include "device/exec_context.h"

namespace mnemo::cuda {

// The streams, events and buffers of one such call, leased from a pool as
// an ExecContext is, so concurrent calls never share them and steady-state
// calls allocate nothing.
struct GatherSet {
  explicit GatherSet(const std::vector<int>& devices);
  ~GatherSet();
  GatherSet(const GatherSet&) = delete;
  GatherSet& operator=(const GatherSet&) = delete;
  // Destroys the streams and events and frees the buffers (each on its own
  // device); a constructor that fails part way calls it too.
  void release();

  std::vector<int> devices;           // shard i's device; [0] holds the caller's buffers
  std::vector<cudaStream_t> streams;  // [i]: shard i's searches and copies ([0]: host calls only)
  std::vector<cudaEvent_t> done;      // [i], i >= 1: shard i's lists are on device 0
  // [i], i >= 1: device i writes device 0's memory (peer access), so shard
  // i's search writes its lists straight into [0]'s; else they are copied.
  std::vector<char> writes_peer;
  // [0]: every shard's lists and statuses on device 0 (and, for host calls,
  // the queries and the merged lists); [i], i >= 1: shard i's queries,
  // lists and status on its device.
  std::vector<DeviceBuffer> bufs;
  PinnedBuffer staging;         // host calls: the queries up, the merged lists down
  cudaEvent_t ready = nullptr;  // device 0: the caller's work before the call
  cudaEvent_t last = nullptr;   // device 0: the last use of every buffer above
};

class GatherPool {
 public:
  GatherPool() = default;
  GatherPool(const GatherPool&) = delete;
  GatherPool& operator=(const GatherPool&) = delete;
  // A free set over these devices, or a new one.
  std::unique_ptr<GatherSet> acquire(const std::vector<int>& devices);
  void give_back(std::unique_ptr<GatherSet> s);

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<GatherSet>> free_;
};

// The gather of one call; devices[0] is the first shard's device, where
// device queries, ids, scores and place.device_status must be. `checks`
// (device 0's contexts) runs the device queries' non-finite check; up to
// `threads` host threads copy host queries to pinned staging.
std::unique_ptr<ShardGather> make_shard_gather(GatherPool& pool, ContextPool& checks, const std::vector<int>& devices,
                                               const Placement& place, Metric metric, const float* queries, uint64_t nq,
                                               uint64_t dim, uint64_t k, uint64_t* ids, float* scores, int threads);

}  // namespace mnemo::cuda
