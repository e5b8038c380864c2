// mnemo_topk_merge: the merge sharded stores use, for every other caller.
#include "arg_checks.h"
#include "barrier.h"
#include "core/checked.h"
#include "core/topk_merge.h"
#include "mnemo.h"

using namespace mnemo;

extern "C" {

MNEMO_API mnemo_status mnemo_topk_merge(int32_t metric, uint64_t n_lists, uint64_t nq, uint64_t k, const uint64_t* ids,
                                        const float* scores, uint64_t* out_ids, float* out_scores) {
  return cabi::guarded("mnemo_topk_merge", [&] {
    const Metric m = cabi::metric_of(metric);
    cabi::need_positive(k, "k");
    const uint64_t out_n = checked_mul(nq, k, "nq * k");
    const uint64_t in_n = checked_mul(out_n, n_lists, "n_lists * nq * k");
    checked_bytes(checked_mul(in_n, 8, "ids"), "ids");
    checked_bytes(checked_mul(out_n, 8, "out_ids"), "out_ids");
    cabi::need_data(out_ids, "out_ids");
    cabi::need_data(out_scores, "out_scores");
    if (in_n > 0) {
      cabi::need_data(ids, "ids");
      cabi::need_data(scores, "scores");
    }
    if (out_n == 0) return;
    cabi::need_disjoint(out_ids, out_n * 8, out_scores, out_n * 4, "out_ids and out_scores", false);
    if (in_n > 0) {
      cabi::need_disjoint(out_ids, out_n * 8, ids, in_n * 8, "out_ids and ids", false);
      cabi::need_disjoint(out_ids, out_n * 8, scores, in_n * 4, "out_ids and scores", false);
      cabi::need_disjoint(out_scores, out_n * 4, ids, in_n * 8, "out_scores and ids", false);
      cabi::need_disjoint(out_scores, out_n * 4, scores, in_n * 4, "out_scores and scores", false);
    }
    topk_merge(m, n_lists, nq, k, ids, scores, k, out_ids, out_scores);
  });
}

}  // extern "C"
