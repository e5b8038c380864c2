// The device-pointer search of a store sharded over several GPUs: the
// caller's queries copied to every shard's device, each shard searched on a
// stream of its own device (ordered after the caller's earlier work), the
// lists copied back to the caller's device (over NVLink where the devices
// are peers) and merged there on the caller's stream. The call queues all of
// it and returns: the caller waits once, on its stream, as for an
// unsharded store.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/backend.h"
#include "device/cuda_util.cuh"

namespace mnemo::cuda {

// The streams, events and buffers of one such call, leased from a pool as
// an ExecContext is, so concurrent calls never share them and steady-state
// calls allocate nothing.
struct GatherSet {
  explicit GatherSet(const std::vector<int>& devices);
  ~GatherSet();
  GatherSet(const GatherSet&) = delete;
  GatherSet& operator=(const GatherSet&) = delete;

  std::vector<int> devices;           // shard i's device; [0] holds the caller's buffers
  std::vector<cudaStream_t> streams;  // [i], i >= 1: shard i's searches and copies
  std::vector<cudaEvent_t> done;      // [i], i >= 1: shard i's lists are on device 0
  // [0]: every shard's lists and statuses on device 0; [i], i >= 1: shard
  // i's queries, lists and status on its device.
  std::vector<DeviceBuffer> bufs;
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

// The gather of one call; devices[0] is the caller's device, where queries,
// ids, scores and place.device_status must be.
std::unique_ptr<ShardGather> make_shard_gather(GatherPool& pool, const std::vector<int>& devices,
                                               const Placement& place, Metric metric, const float* queries,
                                               uint64_t nq, uint64_t dim, uint64_t k, uint64_t* ids, float* scores);

}  // namespace mnemo::cuda
