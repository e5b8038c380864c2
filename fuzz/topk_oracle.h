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

// Activation ranking (mnemo_search_options.activation) in float64: one
// candidate's relevance (its plain score as ranked: similarity, or the
// negated squared distance), that score's bound, last-access time,
// importance and bias (0 when not applied).
struct ActTerm {
  uint64_t id;
  double rel, rel_tol, time, imp, bias;
};
struct ActParams {
  double w_rel = 1, w_rec = 0, w_imp = 0, half_life = 86400, now = 0;
  bool normalize = false;
};
// The candidates as a search ranks them, with the bound of the f32
// evaluation: A = w_rel rel + w_rec rec + w_imp imp + bias, each of rel, rec
// and imp min-max scaled over the candidates when normalising; scores are A
// for similarities and -A for distances (`higher_is_better` false).
std::vector<ref::Candidate> activation_candidates(const std::vector<ActTerm>& terms, const ActParams& p,
                                                  bool higher_is_better);

}  // namespace fz
