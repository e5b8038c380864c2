#include "topk_oracle.h"

#include <mnemo.h>

#include <algorithm>
#include <cmath>
#include <limits>
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

namespace {

// The recency term 2^(-age / half_life) (1 for an age <= 0) in f64, and the
// bound of its f32 evaluation.
void recency_ref(double now, double t, double hl, double* rec, double* tol) {
  const double age = now - t;
  if (!(age > 0)) {
    *rec = 1.0, *tol = 0.0;
    return;
  }
  // An infinite half-life: no decay, whatever the age (which may itself
  // overflow f64 between times near its range).
  const double x = std::isinf(hl) ? 0.0 : age / hl;
  *rec = std::exp2(-x);
  // An underflowed power has no relative error to speak of (x may be inf).
  *tol = (*rec > 0 ? *rec * (x * std::ldexp(1.0, -22) + std::ldexp(1.0, -21)) : 0.0) + std::ldexp(1.0, -140);
}

// Min-max scaling in f64 with the bound of the f32 evaluation from values
// each known within `tol`. Where the range is within the error the scaled
// value may be anything in [0, 1].
double scaled(double x, double lo, double hi, double tol, double* out_tol) {
  if (!(hi > lo)) {
    *out_tol = tol > 0 ? 0.5 : 0.0;  // the f32 values may still differ
    return 0.5;
  }
  const double v = (x - lo) / (hi - lo);
  *out_tol = std::min(4.0 * tol / (hi - lo) + std::ldexp(1.0, -20), std::max(v, 1.0 - v) + std::ldexp(1.0, -20));
  return v;
}

}  // namespace

std::vector<ref::Candidate> activation_candidates(const std::vector<ActTerm>& terms, const ActParams& p,
                                                  bool higher_is_better) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> rec(terms.size()), rec_tol(terms.size());
  double rlo = inf, rhi = -inf, clo = inf, chi = -inf, ilo = inf, ihi = -inf, rtol = 0, ctol = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const ActTerm& t = terms[i];
    recency_ref(p.now, t.time, p.half_life, &rec[i], &rec_tol[i]);
    rlo = std::min(rlo, t.rel), rhi = std::max(rhi, t.rel), rtol = std::max(rtol, t.rel_tol);
    clo = std::min(clo, rec[i]), chi = std::max(chi, rec[i]), ctol = std::max(ctol, rec_tol[i]);
    ilo = std::min(ilo, t.imp), ihi = std::max(ihi, t.imp);
  }
  std::vector<ref::Candidate> c;
  for (size_t i = 0; i < terms.size(); ++i) {
    const ActTerm& t = terms[i];
    double rel = t.rel, rel_tol = t.rel_tol, rc = rec[i], rc_tol = rec_tol[i], imp = t.imp, imp_tol = 0;
    if (p.normalize) {
      rel = scaled(t.rel, rlo, rhi, rtol, &rel_tol);
      rc = scaled(rec[i], clo, chi, ctol, &rc_tol);
      imp = scaled(t.imp, ilo, ihi, 0.0, &imp_tol);
    }
    const double a = p.w_rel * rel + p.w_rec * rc + p.w_imp * imp + t.bias;
    const double tol =
        std::fabs(p.w_rel) * rel_tol + std::fabs(p.w_rec) * rc_tol + std::fabs(p.w_imp) * imp_tol +
        std::ldexp(std::fabs(p.w_rel * rel) + std::fabs(p.w_rec * rc) + std::fabs(p.w_imp * imp) + std::fabs(t.bias),
                   -21);
    c.push_back({t.id, higher_is_better ? a : -a, tol});
  }
  return c;
}

}  // namespace fz
