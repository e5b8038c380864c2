#include "coarse.h"

#include <algorithm>
#include <cmath>

#include "../cpu/simd_kernels.h"

namespace mnemo {

Coarse::Coarse(Backend& be, uint64_t dim, Metric metric, std::vector<float> centroids)
    : be_(be), dim_(dim), c_(std::move(centroids)) {
  const uint64_t n = c_.size() / dim;
  ids_.resize(n);
  norms_.resize(n);
  zeros_.assign(n, 0.0f);
  times_.assign(n, 0.0);
  for (uint64_t i = 0; i < n; ++i) {
    ids_[i] = i;
    norms_[i] = std::sqrt(cpu::simd::sumsq(c_.data() + i * dim, DType::f32, dim));
  }
  view_.vectors = c_.data();
  view_.dtype = DType::f32;
  view_.metric = metric;
  view_.dim = dim;
  view_.slots = n;
  view_.ids = ids_.data();
  view_.norms = norms_.data();
  view_.biases = zeros_.data();
  view_.times = times_.data();
  view_.importance = zeros_.data();
  mirror_ = be_.attach_store(view_);
  if (mirror_) mirror_->update(view_, 0, n);
}

void Coarse::assign(const float* rows, uint64_t n, uint32_t* lists, int threads) const {
  if (n == 0) return;
  if (be_.kind() == BackendKind::cpu)
    return assign_rows_cpu(rows, n, dim_, c_.data(), norms_.data(), nlist(), view_.metric, threads, lists);
  std::vector<uint64_t> ids(n);
  std::vector<float> scores(n);
  SearchArgs a;
  a.store = &view_;
  a.mirror = mirror_.get();
  a.queries = rows;
  a.nq = n;
  a.k = 1;
  a.ids = ids.data();
  a.scores = scores.data();
  be_.search(a);
  // A row scoring NaN against every centroid cannot happen for finite rows;
  // list 0 keeps it reachable all the same.
  for (uint64_t i = 0; i < n; ++i) lists[i] = ids[i] < ids_.size() ? static_cast<uint32_t>(ids[i]) : 0u;
}

}  // namespace mnemo
