// k-means for the coarse quantizer. Each round assigns the rows to their
// nearest centroid through a Coarse (a search on the backend: GEMM on the
// CPU, the batch kernels on a GPU) and moves every centroid to the mean of
// its rows, summed in f64. An empty list takes half of the largest one: a
// copy of its centroid nudged apart, as is usual for k-means in this role.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "coarse.h"

namespace mnemo {

namespace {

void unit_rows(float* c, uint64_t n, uint64_t dim) {
  for (uint64_t i = 0; i < n; ++i) {
    double ss = 0;
    for (uint64_t j = 0; j < dim; ++j) ss += double(c[i * dim + j]) * c[i * dim + j];
    if (ss <= 0) continue;
    const float inv = static_cast<float>(1.0 / std::sqrt(ss));
    for (uint64_t j = 0; j < dim; ++j) c[i * dim + j] *= inv;
  }
}

}  // namespace

std::vector<float> train_kmeans(Backend& be, const float* x, uint64_t n, uint64_t dim, uint32_t nlist, uint32_t iters,
                                uint64_t seed, Metric metric, int threads) {
  // Cosine rows cluster on the sphere; dot stores cluster by L2, as FAISS's
  // IVF does for inner products (assignment by dot would let a few long
  // centroids take every row).
  const Metric train_metric = metric == Metric::cosine ? Metric::cosine : Metric::l2sq;
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), uint64_t{0});
  for (uint64_t i = 0; i < nlist; ++i) std::swap(order[i], order[i + rng() % (n - i)]);
  std::vector<float> c(static_cast<size_t>(nlist) * dim);
  for (uint64_t i = 0; i < nlist; ++i) std::copy(x + order[i] * dim, x + (order[i] + 1) * dim, c.data() + i * dim);
  if (train_metric == Metric::cosine) unit_rows(c.data(), nlist, dim);

  std::vector<uint32_t> lists(n);
  std::vector<double> sums(static_cast<size_t>(nlist) * dim);
  std::vector<uint64_t> counts(nlist);
  for (uint32_t it = 0; it < iters; ++it) {
    Coarse(be, dim, train_metric, c).assign(x, n, lists.data(), threads);
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(counts.begin(), counts.end(), 0);
    for (uint64_t i = 0; i < n; ++i) ++counts[lists[i]];
      // Sums per list over the threads, each thread a band of dimensions.
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t b = 0; b < static_cast<int64_t>(dim); b += 64) {
      const uint64_t lo = static_cast<uint64_t>(b), hi = std::min<uint64_t>(dim, lo + 64);
      for (uint64_t i = 0; i < n; ++i) {
        double* s = sums.data() + uint64_t{lists[i]} * dim;
        const float* r = x + i * dim;
        for (uint64_t j = lo; j < hi; ++j) s[j] += r[j];
      }
    }
    for (uint64_t l = 0; l < nlist; ++l)
      if (counts[l] > 0)
        for (uint64_t j = 0; j < dim; ++j) c[l * dim + j] = static_cast<float>(sums[l * dim + j] / double(counts[l]));
    // Empty lists split the largest.
    for (uint64_t l = 0; l < nlist; ++l) {
      if (counts[l] > 0) continue;
      const uint64_t big = static_cast<uint64_t>(std::max_element(counts.begin(), counts.end()) - counts.begin());
      for (uint64_t j = 0; j < dim; ++j) {
        const float v = c[big * dim + j];
        const float eps = (j % 2 ? 1.0f : -1.0f) * 1.0f / 1024.0f;
        c[l * dim + j] = v * (1.0f + eps);
        c[big * dim + j] = v * (1.0f - eps);
      }
      counts[l] = counts[big] / 2;
      counts[big] -= counts[l];
    }
    if (train_metric == Metric::cosine) unit_rows(c.data(), nlist, dim);
  }
  return c;
}

}  // namespace mnemo
