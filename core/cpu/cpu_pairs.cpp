// Pair scoring: one score per (src, tgt) pair, in input order.
#include "cpu_backend.h"
#include "row_ops.h"

namespace mnemo::cpu {

namespace {
inline uint64_t index_at(const void* p, DType t, uint64_t i) {
  return t == DType::u32 ? static_cast<const uint32_t*>(p)[i] : static_cast<const uint64_t*>(p)[i];
}
}  // namespace

void CpuBackend::score_pairs(const PairsArgs& a) {
  const uint64_t dim = a.table.cols;
  const size_t row_bytes = dim * dtype_size(a.table.dtype);
  const auto* base = static_cast<const unsigned char*>(a.table.data);
  with_elem(a.table.dtype, [&](auto e) {
    using E = decltype(e);
    const int64_t n = static_cast<int64_t>(a.n_pairs);
#pragma omp parallel for schedule(static) num_threads(threads())
    for (int64_t p = 0; p < n; ++p) {
      const uint64_t i = index_at(a.src, a.index_dtype, static_cast<uint64_t>(p));
      const uint64_t j = index_at(a.tgt, a.index_dtype, static_cast<uint64_t>(p));
      double dot, na, nb, l2;
      pair_terms<E>(base + i * row_bytes, base + j * row_bytes, dim, dot, na, nb, l2);
      double s = a.metric == Metric::dot ? dot : a.metric == Metric::l2sq ? l2 : cosine_of(dot, na, nb);
      a.scores[p] = static_cast<float>(s);
    }
  });
}

}  // namespace mnemo::cpu
