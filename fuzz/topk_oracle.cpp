#include "topk_oracle.h"

#include <mnemo.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace fz {

std::string check_topk(int32_t metric, const std::vector<ref::Candidate>& cands, uint64_t k, const uint64_t* ids,
                       const float* scores, double select_tol) {
  const std::vector<ref::Candidate> r = ref::rank(metric, cands);
  std::unordered_map<uint64_t, const ref::Candidate*> by_id;
  double max_tol = 0;
  for (const auto& c : r) {
    by_id[c.id] = &c;
    max_tol = std::max(max_tol, c.tol);
  }
  const bool hi = ref::higher_is_better(metric);
  const uint64_t m = std::min<uint64_t>(k, r.size());
  std::unordered_set<uint64_t> seen;
  std::ostringstream why;
  for (uint64_t j = 0; j < m; ++j) {
    const uint64_t id = ids[j];
    const double s = scores[j];
    if (id == MNEMO_NO_ID) {
      why << "slot " << j << " is empty but " << r.size() << " candidates exist";
      return why.str();
    }
    const auto it = by_id.find(id);
    if (it == by_id.end()) {
      why << "slot " << j << " holds id " << id << ", which is not a candidate";
      return why.str();
    }
    if (!seen.insert(id).second) {
      why << "id " << id << " returned twice";
      return why.str();
    }
    const ref::Candidate& c = *it->second;
    if (!(std::fabs(s - c.score) <= c.tol)) {
      why << "slot " << j << " id " << id << ": score " << s << ", reference " << c.score << " (tolerance " << c.tol
          << ")";
      return why.str();
    }
    if (!(std::fabs(s - r[j].score) <= c.tol + r[j].tol + 2 * select_tol)) {
      why << "slot " << j << " id " << id << " score " << s << " is not the rank-" << j << " reference score "
          << r[j].score << " (id " << r[j].id << ")";
      return why.str();
    }
    // The id is pinned where no other candidate is within the tolerances.
    const double slack = max_tol + 2 * select_tol;
    bool isolated = true;
    for (uint64_t q = j; q-- > 0;) {
      const double gap = std::fabs(r[j].score - r[q].score);
      if (gap > r[j].tol + slack) break;
      if (gap <= r[j].tol + r[q].tol + 2 * select_tol) isolated = false;
    }
    for (uint64_t q = j + 1; q < r.size(); ++q) {
      const double gap = std::fabs(r[j].score - r[q].score);
      if (gap > r[j].tol + slack) break;
      if (gap <= r[j].tol + r[q].tol + 2 * select_tol) isolated = false;
    }
    if (isolated && id != r[j].id) {
      why << "slot " << j << ": id " << id << " (score " << s << "), reference id " << r[j].id << " (score "
          << r[j].score << ")";
      return why.str();
    }
    if (j > 0) {
      const float p = scores[j - 1], q = scores[j];
      const bool ordered = hi ? p > q : p < q;
      if (!ordered && !(p == q && ids[j - 1] < ids[j])) {
        why << "slots " << j - 1 << ", " << j << " out of order: (id " << ids[j - 1] << ", " << p << ") before (id "
            << ids[j] << ", " << q << ")";
        return why.str();
      }
    }
  }
  for (uint64_t j = m; j < k; ++j) {
    if (ids[j] != MNEMO_NO_ID || !std::isnan(scores[j])) {
      why << "padding slot " << j << " holds id " << ids[j] << " score " << scores[j] << " (only " << r.size()
          << " candidates)";
      return why.str();
    }
  }
  return "";
}

}  // namespace fz
