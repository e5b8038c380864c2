// The top-k contract as a plain check (no test framework), for harnesses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference.h"

namespace fz {

// One result row (k ids, k scores) against every candidate of its query.
// Returns "" when the row keeps the contract, else what is wrong:
// each of the first min(k, candidates) slots holds a distinct candidate whose
// score is within its tolerance of the reference score and of the reference
// score at that rank; where no other candidate is within the tolerances (plus
// `select_tol` on each side, the candidate-finding error of FAST precision)
// the id is the reference id; the row is best first with equal scores by
// smaller id; the remaining slots hold MNEMO_NO_ID and NaN.
std::string check_topk(int32_t metric, const std::vector<ref::Candidate>& cands, uint64_t k, const uint64_t* ids,
                       const float* scores, double select_tol = 0.0);

}  // namespace fz
