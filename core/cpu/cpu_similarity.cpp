// The raw score matrix: every query against every target row.
#include <vector>

#include "cpu_backend.h"
#include "row_ops.h"

namespace mnemo::cpu {

void CpuBackend::similarity(const SimilarityArgs& a) {
  const uint64_t n = a.targets.rows, dim = a.targets.cols, nq = a.nq;
  const size_t row_bytes = dim * dtype_size(a.targets.dtype);
  const auto* base = static_cast<const unsigned char*>(a.targets.data);
  std::vector<double> qnorm(nq);
  for (uint64_t i = 0; i < nq; ++i) qnorm[i] = norm_f32(a.queries + i * dim, dim);

  with_elem(a.targets.dtype, [&](auto e) {
    using E = decltype(e);
    const int64_t total = static_cast<int64_t>(n);
#pragma omp parallel for schedule(static) num_threads(threads())
    for (int64_t j = 0; j < total; ++j) {
      const void* row = base + static_cast<uint64_t>(j) * row_bytes;
      const double xn = a.metric == Metric::cosine ? norm_row<E>(row, dim) : 0.0;
      for (uint64_t i = 0; i < nq; ++i) {
        const float* q = a.queries + i * dim;
        double s;
        if (a.metric == Metric::l2sq)
          s = l2sq_row<E>(q, row, dim);
        else if (a.metric == Metric::dot)
          s = dot_row<E>(q, row, dim);
        else
          s = cosine_of(dot_row<E>(q, row, dim), qnorm[i], xn);
        a.scores[i * n + static_cast<uint64_t>(j)] = static_cast<float>(s);
      }
    }
  });
}

}  // namespace mnemo::cpu
