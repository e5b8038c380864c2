// mnemo_score_pairs: one score per (src, tgt) pair, in input order.
#include <string>

#include "arg_checks.h"
#include "barrier.h"
#include "core/checked.h"
#include "core/validate.h"
#include "mnemo.h"

using namespace mnemo;

namespace {

// Both entry points: the same argument checks; contents (indices, values)
// are checked here for host buffers and by the backend for device ones.
void score_pairs(mnemo_runtime* rt, int32_t metric, const void* table, int32_t table_dtype, uint64_t n_items,
                 uint64_t dim, const void* src, const void* tgt, int32_t index_dtype, uint64_t n_pairs, float* scores,
                 const Placement& place) {
  Runtime& r = cabi::runtime_of(rt);
  PairsArgs a;
  a.metric = cabi::metric_of(metric);
  const DType dt = cabi::storage_dtype(table_dtype, "table_dtype");
  const DType it = cabi::index_dtype(index_dtype, "index_dtype");
  cabi::need_positive(dim, "dim");
  cabi::need_data(table, "table");
  cabi::need_data(src, "src");
  cabi::need_data(tgt, "tgt");
  cabi::need_data(scores, "scores");
  const uint64_t t_elems = checked_mul(n_items, dim, "table");
  checked_bytes(checked_mul(t_elems, dtype_size(dt), "table"), "table");
  const uint64_t idx_bytes = checked_bytes(checked_mul(n_pairs, dtype_size(it), "src/tgt"), "src/tgt");
  checked_bytes(checked_mul(n_pairs, 4, "scores"), "scores");
  if (n_pairs == 0) return;
  cabi::need_disjoint(scores, n_pairs * 4, src, idx_bytes, "scores and src", false);
  cabi::need_disjoint(scores, n_pairs * 4, tgt, idx_bytes, "scores and tgt", false);
  cabi::need_disjoint(scores, n_pairs * 4, table, t_elems * dtype_size(dt), "scores and table", false);
  a.place = place;
  a.place.validate = r.validate();
  if (place.on_device) {
    a.table = MatrixView{table, dt, n_items, dim};
    a.src = src;
    a.tgt = tgt;
    a.index_dtype = it;
    a.n_pairs = n_pairs;
    a.scores = scores;
    r.device_backend(Op::score_pairs).score_pairs(a);
    return;
  }
  for (auto [idx, name] : {std::pair<const void*, const char*>{src, "src"}, {tgt, "tgt"}}) {
    const uint64_t bad = find_out_of_range(idx, it, n_pairs, n_items);
    if (bad != kNotFound)
      fail(Code::out_of_range, std::string(name) + " index of pair " + std::to_string(bad) +
                                   " is not below n_items = " + std::to_string(n_items));
  }
  cabi::need_finite(r, table, dt, t_elems, "table");
  a.table = MatrixView{table, dt, n_items, dim};
  a.src = src;
  a.tgt = tgt;
  a.index_dtype = it;
  a.n_pairs = n_pairs;
  a.scores = scores;
  r.pick(Op::score_pairs, n_pairs * 2 * dim * dtype_size(dt)).score_pairs(a);
}

}  // namespace

extern "C" MNEMO_API mnemo_status mnemo_score_pairs(mnemo_runtime* rt, int32_t metric, const void* table,
                                                    int32_t table_dtype, uint64_t n_items, uint64_t dim,
                                                    const void* src, const void* tgt, int32_t index_dtype,
                                                    uint64_t n_pairs, float* scores) {
  return cabi::guarded("mnemo_score_pairs", [&] {
    score_pairs(rt, metric, table, table_dtype, n_items, dim, src, tgt, index_dtype, n_pairs, scores, Placement{});
  });
}

extern "C" MNEMO_API mnemo_status mnemo_score_pairs_device(mnemo_runtime* rt, int32_t metric, const void* table,
                                                           int32_t table_dtype, uint64_t n_items, uint64_t dim,
                                                           const void* src, const void* tgt, int32_t index_dtype,
                                                           uint64_t n_pairs, float* scores, void* stream) {
  return cabi::guarded("mnemo_score_pairs_device", [&] {
    score_pairs(rt, metric, table, table_dtype, n_items, dim, src, tgt, index_dtype, n_pairs, scores,
                Placement{true, stream, true});
  });
}
