// Store search: one pass over the slots per query, scores fed straight into a
// bounded top-k (no score array). Deterministic for any thread count because
// the (key, id) order is total and ids are unique.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../topk.h"
#include "cpu_backend.h"
#include "parallel_errors.h"
#include "row_ops.h"

namespace mnemo::cpu {

namespace {

struct QueryScan {
  const StoreView& s;
  const SearchArgs& a;
  size_t row_bytes;

  // Scores slots [lo, hi) for query q into top.
  template <class E>
  void run(const float* q, double qnorm, uint64_t lo, uint64_t hi, TopK& top) const {
    const auto* base = static_cast<const unsigned char*>(s.vectors);
    for (uint64_t slot = lo; slot < hi; ++slot) {
      const uint64_t id = s.ids[slot];
      if (id == kNoId) continue;
      if (a.allow && !((a.allow[slot >> 6] >> (slot & 63)) & 1u)) continue;
      const void* row = base + slot * row_bytes;
      float key;
      if (s.metric == Metric::l2sq) {
        float d = static_cast<float>(l2sq_row<E>(q, row, s.dim));
        if (a.apply_bias) d -= s.biases[slot];
        key = -d;
      } else {
        const double dot = dot_row<E>(q, row, s.dim);
        float v = static_cast<float>(s.metric == Metric::dot ? dot : cosine_of(dot, qnorm, s.norms[slot]));
        if (a.apply_bias) v += s.biases[slot];
        key = v;
      }
      top.push(key, id);
    }
  }
};

void write_row(std::vector<Hit> hits, const SearchArgs& a, uint64_t qi, Metric metric) {
  uint64_t* ids = a.ids + qi * a.k;
  float* scores = a.scores + qi * a.k;
  const uint64_t m = std::min<uint64_t>(hits.size(), a.k);
  for (uint64_t j = 0; j < m; ++j) {
    ids[j] = hits[j].id;
    scores[j] = metric == Metric::l2sq ? -hits[j].key : hits[j].key;
  }
  for (uint64_t j = m; j < a.k; ++j) {
    ids[j] = kNoId;
    scores[j] = std::numeric_limits<float>::quiet_NaN();
  }
}

}  // namespace

void CpuBackend::search(const SearchArgs& a) {
  const StoreView& s = *a.store;
  const QueryScan scan{s, a, s.dim * dtype_size(s.dtype)};
  // The selector never needs more room than there are slots.
  const uint64_t cap = std::min<uint64_t>(a.k, std::max<uint64_t>(s.slots, 1));
  const int nt = threads();

  // scan is captured by name: clang 14 misses the implicit capture of a
  // variable used only in dependent calls inside OpenMP regions.
  with_elem(s.dtype, [&, &scan = scan](auto e) {
    using E = decltype(e);
    if (a.nq >= static_cast<uint64_t>(nt) || s.slots < 4096) {
      // Enough queries to keep every thread busy: one query per thread.
      const int64_t nq = static_cast<int64_t>(a.nq);
      ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
      for (int64_t qi = 0; qi < nq; ++qi) {
        errors.run([&] {
          const float* q = a.queries + static_cast<uint64_t>(qi) * s.dim;
          TopK top(cap);
          scan.run<E>(q, norm_f32(q, s.dim), 0, s.slots, top);
          write_row(top.take_sorted(), a, static_cast<uint64_t>(qi), s.metric);
        });
      }
      errors.rethrow();
      return;
    }
    // Few queries: split the slots among threads, merge the partial top-k.
    for (uint64_t qi = 0; qi < a.nq; ++qi) {
      const float* q = a.queries + qi * s.dim;
      const double qn = norm_f32(q, s.dim);
      std::vector<TopK> parts(static_cast<size_t>(nt), TopK(cap));
      ParallelErrors errors;
#pragma omp parallel num_threads(nt)
      errors.run([&] {
#ifdef _OPENMP
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
#else
        const int t = 0, T = 1;
#endif
        const uint64_t lo = s.slots * static_cast<uint64_t>(t) / static_cast<uint64_t>(T);
        const uint64_t hi = s.slots * static_cast<uint64_t>(t + 1) / static_cast<uint64_t>(T);
        scan.run<E>(q, qn, lo, hi, parts[static_cast<size_t>(t)]);
      });
      errors.rethrow();
      for (size_t t = 1; t < parts.size(); ++t) parts[0].merge(parts[t]);
      write_row(parts[0].take_sorted(), a, qi, s.metric);
    }
  });
}

}  // namespace mnemo::cpu
