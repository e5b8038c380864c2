#include "topk_check.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

namespace mt {

::testing::AssertionResult check_topk(int32_t metric, const std::vector<ref::Candidate>& cands, size_t k,
                                      const uint64_t* ids, const float* scores) {
  const std::vector<ref::Candidate> r = ref::rank(metric, cands);
  std::unordered_map<uint64_t, const ref::Candidate*> by_id;
  double max_tol = 0;
  for (const auto& c : r) {
    by_id[c.id] = &c;
    max_tol = std::max(max_tol, c.tol);
  }
  const bool hi = ref::higher_is_better(metric);
  const size_t m = std::min(k, r.size());
  std::unordered_set<uint64_t> seen;

  for (size_t j = 0; j < m; ++j) {
    const uint64_t id = ids[j];
    const double s = scores[j];
    if (id == MNEMO_NO_ID)
      return ::testing::AssertionFailure() << "slot " << j << " is empty but " << r.size() << " candidates exist";
    const auto it = by_id.find(id);
    if (it == by_id.end())
      return ::testing::AssertionFailure() << "slot " << j << " holds id " << id << ", which is not a candidate";
    if (!seen.insert(id).second) return ::testing::AssertionFailure() << "id " << id << " returned twice";
    const ref::Candidate& c = *it->second;
    if (!(std::fabs(s - c.score) <= c.tol))
      return ::testing::AssertionFailure() << "slot " << j << " id " << id << ": score " << s << ", reference "
                                           << c.score << " (tolerance " << c.tol << ")";
    if (!(std::fabs(s - r[j].score) <= c.tol + r[j].tol))
      return ::testing::AssertionFailure() << "slot " << j << " id " << id << " score " << s << " is not the rank-" << j
                                           << " reference score " << r[j].score << " (id " << r[j].id << ")";
    // The id is pinned where no other candidate is within the tolerances.
    bool isolated = true;
    for (size_t q = j; q-- > 0;) {
      const double gap = std::fabs(r[j].score - r[q].score);
      if (gap > r[j].tol + max_tol) break;
      if (gap <= r[j].tol + r[q].tol) isolated = false;
    }
    for (size_t q = j + 1; q < r.size(); ++q) {
      const double gap = std::fabs(r[j].score - r[q].score);
      if (gap > r[j].tol + max_tol) break;
      if (gap <= r[j].tol + r[q].tol) isolated = false;
    }
    if (isolated && id != r[j].id)
      return ::testing::AssertionFailure() << "slot " << j << ": id " << id << " (score " << s << "), reference id "
                                           << r[j].id << " (score " << r[j].score << ")";
    if (j > 0) {
      const float p = scores[j - 1];
      const float q = scores[j];
      const bool ordered = hi ? p > q : p < q;
      if (!ordered && !(p == q && ids[j - 1] < ids[j]))
        return ::testing::AssertionFailure() << "slots " << j - 1 << ", " << j << " out of order: (id " << ids[j - 1]
                                             << ", " << p << ") before (id " << ids[j] << ", " << q << ")";
    }
  }
  for (size_t j = m; j < k; ++j) {
    if (ids[j] != MNEMO_NO_ID || !std::isnan(scores[j]))
      return ::testing::AssertionFailure() << "padding slot " << j << " holds id " << ids[j] << " score " << scores[j]
                                           << " (only " << r.size() << " candidates)";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace mt
