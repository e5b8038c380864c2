// mnemo_similarity: the raw score matrix.
#include "arg_checks.h"
#include "barrier.h"
#include "core/checked.h"
#include "mnemo.h"

using namespace mnemo;

namespace {

// Both entry points: the same argument checks; values are checked here for
// host buffers and by the backend for device ones.
void similarity(mnemo_runtime* rt, int32_t metric, const float* queries, uint64_t nq, const void* targets,
                int32_t target_dtype, uint64_t n, uint64_t dim, float* scores, const Placement& place) {
  Runtime& r = cabi::runtime_of(rt);
  SimilarityArgs a;
  a.metric = cabi::metric_of(metric);
  const DType dt = cabi::storage_dtype(target_dtype, "target_dtype");
  cabi::need_positive(dim, "dim");
  cabi::need_data(queries, "queries");
  cabi::need_data(targets, "targets");
  cabi::need_data(scores, "scores");
  const uint64_t q_elems = checked_mul(nq, dim, "queries");
  const uint64_t t_elems = checked_mul(n, dim, "targets");
  const uint64_t s_elems = checked_mul(nq, n, "scores");
  checked_bytes(checked_mul(q_elems, 4, "queries"), "queries");
  checked_bytes(checked_mul(t_elems, dtype_size(dt), "targets"), "targets");
  checked_bytes(checked_mul(s_elems, 4, "scores"), "scores");
  if (place.on_device) r.device_backend(Op::similarity);  // refuses a runtime without a GPU first
  if (nq == 0 || n == 0) return;
  cabi::need_disjoint(scores, s_elems * 4, queries, q_elems * 4, "scores and queries", false);
  cabi::need_disjoint(scores, s_elems * 4, targets, t_elems * dtype_size(dt), "scores and targets", false);
  a.place = place;
  a.place.validate = r.validate();
  a.queries = queries;
  a.nq = nq;
  a.targets = MatrixView{targets, dt, n, dim};
  a.scores = scores;
  if (place.on_device) {
    r.device_backend(Op::similarity).similarity(a);
    return;
  }
  cabi::need_finite(r, queries, DType::f32, q_elems, "queries");
  cabi::need_finite(r, targets, dt, t_elems, "targets");
  r.pick(Op::similarity, t_elems * dtype_size(dt) + s_elems * 4).similarity(a);
}

}  // namespace

extern "C" MNEMO_API mnemo_status mnemo_similarity(mnemo_runtime* rt, int32_t metric, const float* queries, uint64_t nq,
                                                   const void* targets, int32_t target_dtype, uint64_t n, uint64_t dim,
                                                   float* scores) {
  return cabi::guarded("mnemo_similarity", [&] {
    similarity(rt, metric, queries, nq, targets, target_dtype, n, dim, scores, Placement{});
  });
}

extern "C" MNEMO_API mnemo_status mnemo_similarity_device(mnemo_runtime* rt, int32_t metric, const float* queries,
                                                          uint64_t nq, const void* targets, int32_t target_dtype,
                                                          uint64_t n, uint64_t dim, float* scores, void* stream) {
  return cabi::guarded("mnemo_similarity_device", [&] {
    Placement place;
    place.on_device = true;
    place.stream = stream;
    similarity(rt, metric, queries, nq, targets, target_dtype, n, dim, scores, place);
  });
}
