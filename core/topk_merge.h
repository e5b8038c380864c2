// The one top-k merge: per-part result lists of a search (shards, hosts)
// into one list, in the library's order. Shared by sharded stores and the
// C ABI's mnemo_topk_merge, so every layer merges the same way.
#pragma once

#include <cstdint>

#include "dtype.h"

namespace mnemo {

// ids/scores: [parts x nq x k_in], each row a result list as a search writes
// it (padding: id kNoId or a NaN score, skipped). out: [nq x k_out], best
// first by metric (higher score for cosine/dot, lower for L2), equal scores
// to the smaller id; an id met in several lists is kept once, at its best
// place; fewer than k_out candidates leave kNoId / NaN padding.
void topk_merge(Metric metric, uint64_t parts, uint64_t nq, uint64_t k_in, const uint64_t* ids, const float* scores,
                uint64_t k_out, uint64_t* out_ids, float* out_scores);

}  // namespace mnemo
