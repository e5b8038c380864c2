// Pair scoring: one score per (src, tgt) pair, in input order. The pairs are
// visited sorted by source (a counting sort keeps the input position), so a
// source row is read, and its norm taken, once per run of equal sources and
// then stays in L1 while its targets stream past.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_backend.h"
#include "simd_kernels.h"

namespace mnemo::cpu {

namespace {

inline uint64_t index_at(const void* p, DType t, uint64_t i) {
  return t == DType::u32 ? static_cast<const uint32_t*>(p)[i] : static_cast<const uint64_t*>(p)[i];
}

// Pair positions ordered by source index (stable).
std::vector<uint64_t> order_by_source(const PairsArgs& a) {
  const uint64_t n = a.n_pairs, rows = a.table.rows;
  std::vector<uint64_t> perm(n);
  if (rows <= 4 * n + 1024) {
    std::vector<uint64_t> start(rows + 1, 0);
    for (uint64_t p = 0; p < n; ++p) ++start[index_at(a.src, a.index_dtype, p) + 1];
    std::partial_sum(start.begin(), start.end(), start.begin());
    for (uint64_t p = 0; p < n; ++p) perm[start[index_at(a.src, a.index_dtype, p)]++] = p;
  } else {
    std::iota(perm.begin(), perm.end(), uint64_t{0});
    std::stable_sort(perm.begin(), perm.end(), [&](uint64_t x, uint64_t y) {
      return index_at(a.src, a.index_dtype, x) < index_at(a.src, a.index_dtype, y);
    });
  }
  return perm;
}

}  // namespace

void CpuBackend::score_pairs(const PairsArgs& a) {
  const uint64_t dim = a.table.cols, n = a.n_pairs;
  const DType t = a.table.dtype;
  const size_t row_bytes = dim * dtype_size(t);
  const auto* base = static_cast<const unsigned char*>(a.table.data);
  const std::vector<uint64_t> perm = order_by_source(a);
#pragma omp parallel num_threads(threads())
  {
#ifdef _OPENMP
    const uint64_t th = static_cast<uint64_t>(omp_get_thread_num()), T = static_cast<uint64_t>(omp_get_num_threads());
#else
    const uint64_t th = 0, T = 1;
#endif
    uint64_t prev = ~uint64_t{0};
    float src_norm = 0.0f;
    const uint64_t end = n * (th + 1) / T;
    for (uint64_t o = n * th / T; o < end; ++o) {
      // The targets are gathered at random: fetch the one two pairs ahead
      // while this one is scored.
      if (o + 2 < end) {
        const unsigned char* ahead = base + index_at(a.tgt, a.index_dtype, perm[o + 2]) * row_bytes;
        for (size_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(ahead + b);
      }
      const uint64_t p = perm[o];
      const uint64_t i = index_at(a.src, a.index_dtype, p), j = index_at(a.tgt, a.index_dtype, p);
      const unsigned char* x = base + i * row_bytes;
      const unsigned char* y = base + j * row_bytes;
      float s;
      if (a.metric == Metric::l2sq) {
        s = simd::pair_l2sq(x, y, t, dim);
      } else {
        float dot, y2;
        simd::pair_dot(x, y, t, dim, &dot, &y2);
        if (a.metric == Metric::dot) {
          s = dot;
        } else {
          if (i != prev) src_norm = std::sqrt(simd::sumsq(x, t, dim));
          const float yn = std::sqrt(y2);
          s = (src_norm == 0.0f || yn == 0.0f) ? 0.0f : dot / (src_norm * yn);
        }
      }
      prev = i;
      a.scores[p] = s;
    }
  }
}

}  // namespace mnemo::cpu
