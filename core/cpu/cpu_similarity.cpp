// The raw score matrix: every query against every target row. Threads take
// blocks of target rows; each block is scored against the queries a few at
// a time with the streaming kernel, so a row is read once per query group.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_backend.h"
#include "simd_kernels.h"

namespace mnemo::cpu {

void CpuBackend::similarity(const SimilarityArgs& a) {
  const uint64_t n = a.targets.rows, dim = a.targets.cols, nq = a.nq;
  const size_t row_bytes = dim * dtype_size(a.targets.dtype);
  const auto* base = static_cast<const unsigned char*>(a.targets.data);
  const bool l2 = a.metric == Metric::l2sq, cosine = a.metric == Metric::cosine;
  std::vector<float> qnorm(nq);
  for (uint64_t i = 0; i < nq; ++i) qnorm[i] = std::sqrt(simd::sumsq(a.queries + i * dim, DType::f32, dim));

  constexpr uint64_t kBlock = 32, G = simd::kMaxQueries;
  const int64_t blocks = static_cast<int64_t>((n + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static) num_threads(threads())
  for (int64_t b = 0; b < blocks; ++b) {
    const uint64_t r0 = static_cast<uint64_t>(b) * kBlock, m = std::min(kBlock, n - r0);
    const unsigned char* rows = base + r0 * row_bytes;
    float xn[kBlock], buf[G * kBlock];
    if (cosine)
      for (uint64_t r = 0; r < m; ++r) xn[r] = std::sqrt(simd::sumsq(rows + r * row_bytes, a.targets.dtype, dim));
    for (uint64_t q0 = 0; q0 < nq; q0 += G) {
      const uint64_t g = std::min(G, nq - q0);
      simd::score_rows(a.queries + q0 * dim, g, rows, a.targets.dtype, dim, m, l2, buf);
      for (uint64_t j = 0; j < g; ++j) {
        float* out = a.scores + (q0 + j) * n + r0;
        for (uint64_t r = 0; r < m; ++r) {
          const float v = buf[j * m + r];
          out[r] = !cosine ? v : (qnorm[q0 + j] == 0.0f || xn[r] == 0.0f) ? 0.0f : v / (qnorm[q0 + j] * xn[r]);
        }
      }
    }
  }
}

}  // namespace mnemo::cpu
