// Merging the result lists of a store's shards on one GPU: a device-pointer
// search of a sharded store gathers every shard's lists on the caller's
// device and merges them there, so the caller's stream holds the answer
// without a trip through the host.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mnemo::cuda {

// Lists per call at most (one per shard, so one per device).
constexpr uint32_t kMergeMaxParts = 64;

// ids, scores: [parts x nq x k] (part p, query q, place j at
// (p * nq + q) * k + j), each list as a search writes it: sorted best first
// (higher score for dot and cosine, lower when lower_better; equal scores to
// the smaller id), padding (id kNoId or a NaN score) after its entries, ids
// unique across parts. out_ids, out_scores [nq x k]: per query the best k
// of all parts in that order, score bits kept, padded with kNoId and NaN.
// When device_status is not null it receives the first of statuses[parts]
// that is not 0 (or 0).
void launch_merge_parts(const uint64_t* ids, const float* scores, uint32_t parts, uint64_t nq, uint64_t k,
                        bool lower_better, uint64_t* out_ids, float* out_scores, const int32_t* statuses,
                        int32_t* device_status, cudaStream_t st);

}  // namespace mnemo::cuda
