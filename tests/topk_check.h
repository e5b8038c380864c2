// Checks search results against the reference top-k, robustly to near-ties.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "reference.h"

namespace mt {

// One result row (k ids, k scores) against every candidate of the query.
// Checked: each of the first min(k, candidates) slots holds a distinct
// candidate whose returned score is within its tolerance of the reference and
// of the reference score at that rank; where the reference score at a rank
// is farther than the tolerances from every other candidate, the id is the
// reference id; the row is ordered best first with equal returned scores by
// smaller id; the remaining slots are MNEMO_NO_ID with a NaN score.
::testing::AssertionResult check_topk(int32_t metric, const std::vector<ref::Candidate>& cands, size_t k,
                                      const uint64_t* ids, const float* scores);

}  // namespace mt
