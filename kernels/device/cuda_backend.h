// The CUDA backend: one device, a pool of execution contexts, and the
// search and similarity paths. Lives in libmnemo_cuda.so.
#pragma once

#include <memory>
#include <string>

#include "core/backend.h"
#include "device/exec_context.h"
#include "device/shard_gather.h"

namespace mnemo::cuda {

// Queries at or above this count use the GEMM path instead of the fused
// scan (the scan re-reads the store once per 4 queries).
constexpr uint64_t kGemmMinQueries = 16;

// Pair scoring sorts pairs by source when there are at least this many
// pairs over a table of at least this many bytes (below, the rows stay in
// L2 or the sort costs more than the repeated source reads it saves).
// Measured on an H200 (bench/gpu/ops_bench.cu, "break-even pairs gather vs
// sorted" rows, 1024-dim f16): over 1M rows the gather wins up to 262k
// pairs (0.28 against 0.36 ms), ties at 1M (1.00 / 1.01 ms) and loses at
// 4M (3.61 against 3.09 ms); over 10k rows (20 MB, inside L2) the gather
// wins at every count up to 4M.
constexpr uint64_t kPairsSortMinPairs = 2ull << 20;
constexpr uint64_t kPairsSortMinTableBytes = 64ull << 20;
bool pairs_use_sort(uint64_t n_pairs, uint64_t n_items, uint64_t dim, DType dt);

// FAST mode on f16 storage multiplies f16 copies of the queries: a query
// entry beyond f16's range would become infinite, and a query whose
// largest entry is below f16's normal range would lose its digits. Such
// calls (host queries [nq x dim]) run in EXACT mode instead.
bool fast_queries_fit(DType storage, const float* queries, uint64_t nq, uint64_t dim);

class CudaBackend final : public Backend {
 public:
  CudaBackend(const BackendConfig& cfg, const std::string& device_name, int sm_count, size_t memory);
  BackendKind kind() const override { return BackendKind::cuda; }
  std::string description() const override { return description_; }

  void similarity(const SimilarityArgs& a) override;
  void search(const SearchArgs& a) override;
  void score_pairs(const PairsArgs& a) override;
  void resample(const ResampleArgs& a) override;
  void normalize_rows(const NormArgs& a) override;
  void layer_norm(const NormArgs& a) override;
  std::unique_ptr<StoreMirror> attach_store(const StoreView& view) override;
  void copy_to_host(void* dst, const void* src, uint64_t bytes, void* stream) override;
  // Device memory holding a copy of host bytes (uploaded at once).
  std::unique_ptr<DeviceCopy> copy_to_device(const void* src, uint64_t bytes) override;
  // Device-pointer searches of a store sharded over this device (first) and
  // other devices of this module (shard_gather.h).
  std::unique_ptr<ShardGather> gather_shards(const std::vector<Backend*>& shards, const Placement& place, Metric metric,
                                             const float* queries, uint64_t nq, uint64_t dim, uint64_t k, uint64_t* ids,
                                             float* scores) override;

  int sm_count() const { return sm_count_; }
  int device() const { return cfg_.device_id; }

 private:
  // A filter's selective plan (list_search.cu): host buffers, lists given.
  void search_lists(const SearchArgs& a);
  // Filters evaluated on the device (program_search.cu): host buffers.
  void search_programs(const SearchArgs& a);

  BackendConfig cfg_;
  std::string description_;
  int sm_count_;
  ContextPool pool_;
  GatherPool gathers_;
};

}  // namespace mnemo::cuda
