#include "store_model.h"

#include <cmath>
#include <cstring>

#include "topk_check.h"

namespace mt {

void StoreModel::add(const std::vector<uint64_t>& ids, const Matrix& m) {
  for (size_t r = 0; r < ids.size(); ++r) {
    std::vector<double> v(dim_);
    for (size_t j = 0; j < dim_; ++j) {
      double x = m.row(r)[j];
      // F32 input to a half store is rounded to nearest even on the way in.
      if (m.dtype == MNEMO_DTYPE_F32 && dtype_ == MNEMO_DTYPE_F16)
        x = ref::f16_value(ref::f16_from_f32(static_cast<float>(x)));
      if (m.dtype == MNEMO_DTYPE_F32 && dtype_ == MNEMO_DTYPE_BF16)
        x = ref::bf16_value(ref::bf16_from_f32(static_cast<float>(x)));
      v[j] = x;
    }
    e_[ids[r]].val = std::move(v);  // an existing entry keeps its bias
  }
}

size_t StoreModel::remove(const std::vector<uint64_t>& ids) {
  size_t n = 0;
  for (const uint64_t id : ids) {
    n += e_.erase(id);
    fields.remove(id);
  }
  return n;
}

std::vector<uint64_t> StoreModel::ids() const {
  std::vector<uint64_t> out;
  for (const auto& kv : e_) out.push_back(kv.first);
  return out;
}

std::vector<ref::Candidate> StoreModel::candidates(const double* q, bool apply_bias,
                                                   const std::set<uint64_t>* allow) const {
  std::vector<ref::Candidate> c;
  const bool hi = ref::higher_is_better(metric_);
  for (const auto& kv : e_) {
    if (allow && !allow->count(kv.first)) continue;
    const double raw = ref::score(metric_, q, kv.second.val.data(), dim_);
    double tol = ref::score_tol(metric_, q, kv.second.val.data(), dim_, raw);
    double s = raw;
    if (apply_bias) {
      const double b = kv.second.bias;
      s = hi ? raw + b : raw - b;
      tol += std::ldexp(std::fabs(raw) + std::fabs(b), -22);  // the f32 add
    }
    c.push_back({kv.first, s, tol});
  }
  return c;
}

mnemo_status store_add(mnemo_store* s, const std::vector<uint64_t>& ids, const Matrix& m) {
  Buf<uint64_t> b(ids.size());
  std::copy(ids.begin(), ids.end(), b.data());
  return mnemo_store_add(s, b.data(), m.data(), m.dtype, ids.size());
}

mnemo_status store_remove(mnemo_store* s, const std::vector<uint64_t>& ids, uint64_t* removed) {
  Buf<uint64_t> b(ids.size());
  std::copy(ids.begin(), ids.end(), b.data());
  return mnemo_store_remove(s, b.data(), ids.size(), removed);
}

mnemo_status store_set_bias(mnemo_store* s, const std::vector<uint64_t>& ids, const std::vector<float>& biases) {
  Buf<uint64_t> b(ids.size());
  Buf<float> f(biases.size());
  std::copy(ids.begin(), ids.end(), b.data());
  std::copy(biases.begin(), biases.end(), f.data());
  return mnemo_store_set_bias(s, b.data(), f.data(), ids.size());
}

mnemo_status store_search(const mnemo_store* s, const Matrix& q, size_t k, const mnemo_search_options* opts,
                          Results* r) {
  r->nq = q.rows;
  r->k = k;
  r->ids = Buf<uint64_t>(q.rows * k);
  r->scores = Buf<float>(q.rows * k);
  return mnemo_store_search(s, static_cast<const float*>(q.data()), q.rows, k, opts, r->ids.data(), r->scores.data());
}

void expect_results(const StoreModel& model, const Matrix& q, const Results& r, bool apply_bias,
                    const std::set<uint64_t>* allow) {
  for (size_t i = 0; i < q.rows; ++i) {
    EXPECT_TRUE(
        check_topk(model.metric(), model.candidates(q.row(i), apply_bias, allow), r.k, r.row_ids(i), r.row_scores(i)))
        << "query " << i << " of " << q.rows << ", k " << r.k << ", " << model.size() << " stored";
  }
}

bool same_results(const Results& a, const Results& b) {
  const size_t n = a.nq * a.k;
  return a.nq == b.nq && a.k == b.k && std::memcmp(a.ids.data(), b.ids.data(), n * sizeof(uint64_t)) == 0 &&
         std::memcmp(a.scores.data(), b.scores.data(), n * sizeof(float)) == 0;
}

bool StoreState::operator==(const StoreState& o) const {
  auto same_f = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
  };
  return count == o.count && slot_count == o.slot_count && get_status == o.get_status && slots == o.slots &&
         same_f(vectors, o.vectors) && result_ids == o.result_ids && same_f(result_scores, o.result_scores);
}

StoreState capture(const mnemo_store* s, const std::vector<uint64_t>& probe_ids, const Matrix& probe_queries) {
  StoreState st;
  EXPECT_OK(mnemo_store_count(s, &st.count));
  EXPECT_OK(mnemo_store_slot_count(s, &st.slot_count));
  uint64_t dim = 0;
  EXPECT_OK(mnemo_store_shape(s, &dim, nullptr, nullptr));
  Buf<float> v(dim);
  for (const uint64_t id : probe_ids) {
    v.fill_bytes(0);
    st.get_status.push_back(mnemo_store_get(s, id, v.data()));
    st.vectors.insert(st.vectors.end(), v.data(), v.data() + dim);
    uint64_t slot = MNEMO_NO_ID;
    st.get_status.push_back(mnemo_store_slot_of(s, id, &slot));
    st.slots.push_back(slot);
  }
  if (probe_queries.rows > 0) {
    mnemo_search_options o = mnemo_search_options_default();
    o.apply_bias = 1;
    Results r;
    EXPECT_OK(store_search(s, probe_queries, st.count + 2, &o, &r));
    st.result_ids.assign(r.ids.data(), r.ids.data() + r.nq * r.k);
    st.result_scores.assign(r.scores.data(), r.scores.data() + r.nq * r.k);
  }
  return st;
}

}  // namespace mt
