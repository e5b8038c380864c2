// The coarse quantizer of an inverted-file index: nlist centroids held as a
// small store (f32 rows, ids 0..nlist-1) on a backend, so assigning rows to
// lists and probing lists for queries are ordinary searches of that store
// (the GEMM path for batches on the CPU, the batch kernels on a GPU).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "../backend.h"

namespace mnemo {

class Coarse {
 public:
  // centroids: [nlist x dim] f32; `metric` ranks rows against them.
  Coarse(Backend& be, uint64_t dim, Metric metric, std::vector<float> centroids);
  uint32_t nlist() const { return static_cast<uint32_t>(ids_.size()); }
  uint64_t dim() const { return dim_; }
  Metric metric() const { return view_.metric; }
  const std::vector<float>& centroids() const { return c_; }
  const StoreView& view() const { return view_; }
  const StoreMirror* mirror() const { return mirror_.get(); }
  Backend& backend() const { return be_; }
  // The best list of each of n rows (f32 [n x dim]) into lists[n]: a search
  // of the centroids on a GPU backend, sgemm tiles on the CPU (`threads`).
  void assign(const float* rows, uint64_t n, uint32_t* lists, int threads = 1) const;

 private:
  Backend& be_;
  uint64_t dim_;
  std::vector<float> c_;
  std::vector<uint64_t> ids_;
  std::vector<float> norms_, zeros_;
  std::vector<double> times_;
  StoreView view_;
  std::unique_ptr<StoreMirror> mirror_;
};

// Rows to their best centroid with OpenBLAS on `threads` threads
// (assign_cpu.cpp); cnorm: the centroids' L2 norms.
void assign_rows_cpu(const float* rows, uint64_t n, uint64_t dim, const float* c, const float* cnorm, uint32_t nlist,
                     Metric metric, int threads, uint32_t* lists);

// k-means (kmeans.cpp): nlist centroids of the n rows x (f32 [n x dim]),
// `iters` rounds of assignment on `be` and mean updates, seeded. Cosine
// centroids are kept on the unit sphere; dot and L2 use squared L2.
std::vector<float> train_kmeans(Backend& be, const float* x, uint64_t n, uint64_t dim, uint32_t nlist, uint32_t iters,
                                uint64_t seed, Metric metric, int threads);

}  // namespace mnemo
