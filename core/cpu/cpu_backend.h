// The CPU backend: always present inside libmnemo.so.
#pragma once

#include "../backend.h"

namespace mnemo::cpu {

// Query batches of at least this many queries go to the GEMM search path
// (measured switch point, docs/benchmarks.md); MNEMO_CPU_GEMM_MIN_QUERIES
// overrides it when the backend is created.
constexpr uint64_t kGemmMinQueriesDefault = 6;
// Stores smaller than this are always streamed.
constexpr uint64_t kGemmMinSlots = 2048;
// Below this many slots a search splits queries, not slots, among threads.
constexpr uint64_t kSplitMinSlots = 16384;

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendConfig& cfg);
  BackendKind kind() const override { return BackendKind::cpu; }
  std::string description() const override;

  void similarity(const SimilarityArgs& a) override;
  void search(const SearchArgs& a) override;
  void score_pairs(const PairsArgs& a) override;
  void resample(const ResampleArgs& a) override;
  void normalize_rows(const NormArgs& a) override;
  void layer_norm(const NormArgs& a) override;
  std::unique_ptr<StoreMirror> attach_store(const StoreView&) override { return nullptr; }

  int threads() const { return static_cast<int>(cfg_.num_threads); }

 private:
  BackendConfig cfg_;
  uint64_t gemm_min_queries_ = kGemmMinQueriesDefault;
};

}  // namespace mnemo::cpu
