// The CPU backend: always present inside libmnemo.so.
#pragma once

#include "../backend.h"

namespace mnemo::cpu {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendConfig& cfg) : cfg_(cfg) {}
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
};

}  // namespace mnemo::cpu
