// Activation search (relevance, recency, importance and bias in one key)
// against a float64 reference: plain and min-max normalised, every metric
// and dtype, times spanning decades and seconds, equal and future times,
// half-life extremes, filters, touch, the metadata calls and their errors,
// persistence, and sharded stores against unsharded ones.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "store_model.h"
#include "support.h"
#include "topk_check.h"

namespace {

using mt::Buf;
using mt::Matrix;

constexpr double kNow = 1.7e9;  // a UNIX time in 2023
const double kInf = std::numeric_limits<double>::infinity();

struct Mem {
  std::vector<double> val;
  float bias = 0.0f;
  double t = 0.0;
  float imp = 0.0f;
};

struct Act {
  float w_rel = 1.0f, w_rec = 0.0f, w_imp = 0.0f;
  double half_life = 3600.0, now = kNow;
  bool normalize = false, bias = false;
};

mnemo_search_options options(const Act& a) {
  mnemo_search_options o = mnemo_search_options_default();
  o.activation = 1;
  o.normalize = a.normalize ? 1 : 0;
  o.apply_bias = a.bias ? 1 : 0;
  o.w_relevance = a.w_rel;
  o.w_recency = a.w_rec;
  o.w_importance = a.w_imp;
  o.half_life = a.half_life;
  o.now = a.now;
  return o;
}

// The recency term and the bound of its f32 evaluation.
void recency_ref(double now, double t, double hl, double* rec, double* tol) {
  const double age = now - t;
  if (!(age > 0)) {
    *rec = 1.0, *tol = 0.0;
    return;
  }
  const double x = age / hl;
  *rec = std::exp2(-x);
  // An underflowed power has no relative error to speak of (x may be inf).
  *tol = (*rec > 0 ? *rec * (x * std::ldexp(1.0, -22) + std::ldexp(1.0, -21)) : 0.0) + std::ldexp(1.0, -140);
}

// Min-max scaling in f64, with the bound of the f32 evaluation from values
// each known within `tol`.
double scaled(double x, double lo, double hi, double tol, double* out_tol) {
  if (!(hi > lo)) {
    *out_tol = 0.0;
    return 0.5;
  }
  *out_tol = 4.0 * tol / (hi - lo) + std::ldexp(1.0, -20);
  return (x - lo) / (hi - lo);
}

std::vector<ref::Candidate> act_candidates(int32_t metric, size_t dim, const std::map<uint64_t, Mem>& mem,
                                           const double* q, const Act& a, const std::set<uint64_t>* allow = nullptr) {
  const bool hi_better = ref::higher_is_better(metric);
  struct Term {
    uint64_t id;
    double rel, rel_tol, rec, rec_tol, imp, bias;
  };
  std::vector<Term> terms;
  for (const auto& [id, m] : mem) {
    if (allow && !allow->count(id)) continue;
    const double raw = ref::score(metric, q, m.val.data(), dim);
    Term t{id,    hi_better ? raw : -raw, ref::score_tol(metric, q, m.val.data(), dim, raw), 0, 0,
           m.imp, a.bias ? m.bias : 0.0};
    recency_ref(a.now, m.t, a.half_life, &t.rec, &t.rec_tol);
    terms.push_back(t);
  }
  double rlo = kInf, rhi = -kInf, clo = kInf, chi = -kInf, ilo = kInf, ihi = -kInf, rtol = 0, ctol = 0;
  for (const Term& t : terms) {
    rlo = std::min(rlo, t.rel), rhi = std::max(rhi, t.rel), rtol = std::max(rtol, t.rel_tol);
    clo = std::min(clo, t.rec), chi = std::max(chi, t.rec), ctol = std::max(ctol, t.rec_tol);
    ilo = std::min(ilo, t.imp), ihi = std::max(ihi, t.imp);
  }
  std::vector<ref::Candidate> c;
  for (const Term& t : terms) {
    double rel = t.rel, rel_tol = t.rel_tol, rec = t.rec, rec_tol = t.rec_tol, imp = t.imp, imp_tol = 0;
    if (a.normalize) {
      rel = scaled(t.rel, rlo, rhi, rtol, &rel_tol);
      rec = scaled(t.rec, clo, chi, ctol, &rec_tol);
      imp = scaled(t.imp, ilo, ihi, 0.0, &imp_tol);
    }
    const double A = a.w_rel * rel + a.w_rec * rec + a.w_imp * imp + t.bias;
    const double tol =
        std::fabs(a.w_rel) * rel_tol + std::fabs(a.w_rec) * rec_tol + std::fabs(a.w_imp) * imp_tol +
        std::ldexp(std::fabs(a.w_rel * rel) + std::fabs(a.w_rec * rec) + std::fabs(a.w_imp * imp) + std::fabs(t.bias),
                   -21);
    c.push_back({t.id, hi_better ? A : -A, tol});
  }
  return c;
}

// A store and its model, filled with random memories.
struct Fixture {
  size_t dim;
  int32_t dtype, metric;
  mt::StorePtr s;
  std::map<uint64_t, Mem> mem;
  std::vector<uint64_t> ids;

  Fixture(std::mt19937_64& rng, size_t dim_, int32_t dtype_, int32_t metric_, size_t n, mnemo_runtime* rt = nullptr)
      : dim(dim_), dtype(dtype_), metric(metric_), s(mt::make_store(dim_, dtype_, metric_, rt)) {
    if (!s) return;
    const Matrix m = mt::random_matrix(rng, dtype, n, dim, metric == MNEMO_METRIC_DOT);
    Buf<uint64_t> id(n);
    Buf<double> t(n);
    Buf<float> imp(n), bias(n);
    for (size_t i = 0; i < n; ++i) {
      id[i] = 1000 + 7 * i + mt::rand_below(rng, 5);
      // Decades back, hours back, seconds back, and some in the future.
      const uint64_t kind = mt::rand_below(rng, 4);
      const double span = kind == 0 ? 3e9 : kind == 1 ? 4e4 : kind == 2 ? 60.0 : -600.0;
      t[i] = std::floor(kNow - span * std::fabs(mt::rand_nonzero(rng)));
      imp[i] = 5.0f + 5.0f * mt::rand_nonzero(rng);
      bias[i] = 0.3f * mt::rand_nonzero(rng);
      Mem& e = mem[id[i]];
      e.val.assign(m.row(i), m.row(i) + dim);
      e.t = t[i], e.imp = imp[i], e.bias = bias[i];
      ids.push_back(id[i]);
    }
    EXPECT_OK(mnemo_store_add_memories(s.get(), id.data(), m.data(), m.dtype, n, t.data(), imp.data()));
    EXPECT_OK(mnemo_store_set_bias(s.get(), id.data(), bias.data(), n));
  }

  mt::Results search(const Matrix& q, size_t k, const mnemo_search_options& o) {
    mt::Results r;
    EXPECT_OK(mt::store_search(s.get(), q, k, &o, &r));
    return r;
  }

  void expect(const Matrix& q, const mt::Results& r, const Act& a, const std::set<uint64_t>* allow = nullptr) {
    for (size_t i = 0; i < q.rows; ++i)
      EXPECT_TRUE(mt::check_topk(metric, act_candidates(metric, dim, mem, q.row(i), a, allow), r.k, r.row_ids(i),
                                 r.row_scores(i)))
          << "query " << i << ", k " << r.k << ", " << mt::metric_name(metric) << " " << mt::dtype_name(dtype)
          << (a.normalize ? " normalized" : "");
  }
};

// Weights under which every term moves the ranking.
Act random_act(std::mt19937_64& rng, int32_t metric, bool normalize) {
  Act a;
  a.normalize = normalize;
  a.bias = mt::rand_below(rng, 2) == 1;
  a.w_rel = metric == MNEMO_METRIC_L2SQ && !normalize ? 0.1f : 1.0f;
  a.w_rec = 0.5f * std::fabs(mt::rand_nonzero(rng)) + 0.1f;
  a.w_imp = 0.05f * mt::rand_nonzero(rng);
  if (normalize) a.w_imp *= 10.0f;
  a.half_life = 3600.0 * (1.0 + 24.0 * std::fabs(mt::rand_nonzero(rng)));
  return a;
}

using Param = std::tuple<int32_t, int32_t, bool>;  // dtype, metric, normalize

class Activation : public ::testing::TestWithParam<Param> {};

TEST_P(Activation, MatchesReference) {
  const auto [dtype, metric, normalize] = GetParam();
  auto rng = mt::rng_for_test();
  for (const size_t n : {size_t{5}, size_t{29}, size_t{300}}) {
    for (const size_t dim : {size_t{3}, size_t{37}}) {
      Fixture f(rng, dim, dtype, metric, n);
      ASSERT_TRUE(f.s);
      const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 3, dim, metric == MNEMO_METRIC_DOT);
      const Act a = random_act(rng, metric, normalize);
      for (const size_t k : {size_t{1}, size_t{7}, n, n + 3}) f.expect(q, f.search(q, k, options(a)), a);
      // A filter that keeps fewer memories than k.
      std::set<uint64_t> keep;
      Buf<uint64_t> allow(4);
      for (size_t i = 0; i < 4; ++i) keep.insert(allow[i] = f.ids[(i * 3) % n]);
      mnemo_search_options o = options(a);
      o.filter_kind = MNEMO_FILTER_IDS;
      o.filter_ids = allow.data();
      o.filter_count = 4;
      f.expect(q, f.search(q, 6, o), a, &keep);
    }
  }
}

// A batch large enough for the GEMM paths, in both precisions.
TEST_P(Activation, QueryBatch) {
  const auto [dtype, metric, normalize] = GetParam();
  auto rng = mt::rng_for_test();
  const size_t dim = 24;
  Fixture f(rng, dim, dtype, metric, 2000);
  ASSERT_TRUE(f.s);
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 70, dim, metric == MNEMO_METRIC_DOT);
  const Act a = random_act(rng, metric, normalize);
  f.expect(q, f.search(q, 9, options(a)), a);
}

INSTANTIATE_TEST_SUITE_P(AllShapes, Activation,
                         ::testing::Combine(::testing::ValuesIn(mt::storage_dtypes()),
                                            ::testing::ValuesIn(mt::metrics()), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return std::string(mt::dtype_name(std::get<0>(p.param))) + "_" +
                                  mt::metric_name(std::get<1>(p.param)) +
                                  (std::get<2>(p.param) ? "_normalized" : "_plain");
                         });

TEST(ActivationCases, NeutralWeightsGivePlainSearchBitForBit) {
  auto rng = mt::rng_for_test();
  for (const int32_t metric : mt::metrics()) {
    Fixture f(rng, 19, MNEMO_DTYPE_F32, metric, 100);
    ASSERT_TRUE(f.s);
    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 19);
    Act a;
    a.w_rec = 0.0f;
    const mt::Results act = f.search(q, 10, options(a));
    const mt::Results plain = f.search(q, 10, mnemo_search_options_default());
    EXPECT_TRUE(mt::same_results(act, plain)) << mt::metric_name(metric);
  }
}

TEST(ActivationCases, HalfLifeExtremesAndFutureTimes) {
  auto rng = mt::rng_for_test();
  Fixture f(rng, 8, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, 60);
  ASSERT_TRUE(f.s);
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 8);
  for (const double hl : {kInf, 1e-300, 1e-3, 1e300}) {
    for (const bool normalize : {false, true}) {
      Act a;
      a.w_rec = 2.0f;
      a.half_life = hl;
      a.normalize = normalize;
      f.expect(q, f.search(q, 60, options(a)), a);
    }
  }
  // Recency alone with an infinite half-life: every memory's recency is 1,
  // so the order is the similarity order.
  Act a;
  a.w_rel = 0.0f;
  a.w_rec = 1.0f;
  a.half_life = kInf;
  const mt::Results r = f.search(q, 5, options(a));
  for (size_t j = 0; j < 5; ++j) {
    EXPECT_EQ(r.row_scores(0)[j], 1.0f);
    if (j > 0) {
      EXPECT_LT(r.row_ids(0)[j - 1], r.row_ids(0)[j]);  // equal keys: smaller id first
    }
  }
  // Every time in the future counts as now: recency 1.
  Buf<uint64_t> ids(f.ids.size());
  Buf<double> times(f.ids.size());
  for (size_t i = 0; i < f.ids.size(); ++i) {
    ids[i] = f.ids[i];
    times[i] = kNow + 1.0 + static_cast<double>(i);
    f.mem[f.ids[i]].t = times[i];
  }
  ASSERT_OK(mnemo_store_set_times(f.s.get(), ids.data(), times.data(), f.ids.size()));
  a.half_life = 1.0;
  const mt::Results fut = f.search(q, 3, options(a));
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(fut.row_scores(0)[j], 1.0f);
}

TEST(ActivationCases, EqualTimesAndImportancesNormalizeToOneHalf) {
  auto rng = mt::rng_for_test();
  Fixture f(rng, 8, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, 40);
  ASSERT_TRUE(f.s);
  const size_t n = f.ids.size();
  Buf<uint64_t> ids(n);
  Buf<double> times(n);
  Buf<float> imp(n);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = f.ids[i];
    times[i] = kNow - 100.0;
    imp[i] = 3.0f;
    f.mem[ids[i]].t = times[i];
    f.mem[ids[i]].imp = imp[i];
  }
  ASSERT_OK(mnemo_store_set_times(f.s.get(), ids.data(), times.data(), n));
  ASSERT_OK(mnemo_store_set_importance(f.s.get(), ids.data(), imp.data(), n));
  Act a;
  a.normalize = true;
  a.w_rel = 0.0f;
  a.w_rec = 1.0f;
  a.w_imp = 1.0f;
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 1, 8);
  const mt::Results r = f.search(q, 4, options(a));
  for (size_t j = 0; j < 4; ++j) EXPECT_EQ(r.row_scores(0)[j], 1.0f);
  f.expect(q, r, a);
  a.w_rel = 1.0f;
  f.expect(q, f.search(q, 40, options(a)), a);
}

TEST(ActivationCases, TouchSetsReturnedTimesOnly) {
  auto rng = mt::rng_for_test();
  Fixture f(rng, 12, MNEMO_DTYPE_F16, MNEMO_METRIC_COSINE, 50);
  ASSERT_TRUE(f.s);
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 12);
  Act a;
  a.w_rec = 0.5f;
  mnemo_search_options o = options(a);
  o.touch = 1;
  o.now = kNow + 12345.5;
  const mt::Results r = f.search(q, 3, o);
  std::set<uint64_t> returned(r.ids.data(), r.ids.data() + 6);
  const size_t n = f.ids.size();
  Buf<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = f.ids[i];
  Buf<double> t(n);
  Buf<float> imp(n), bias(n);
  ASSERT_OK(mnemo_store_get_meta(f.s.get(), ids.data(), n, t.data(), imp.data(), bias.data()));
  for (size_t i = 0; i < n; ++i) {
    const Mem& m = f.mem[ids[i]];
    EXPECT_EQ(t[i], returned.count(ids[i]) ? o.now : m.t) << "id " << ids[i];
    EXPECT_EQ(imp[i], m.imp);
    EXPECT_EQ(bias[i], m.bias);
  }
  // The touched memories now rank by the new times.
  for (uint64_t id : returned) f.mem[id].t = o.now;
  a.now = o.now;
  f.expect(q, f.search(q, 10, options(a)), a);
}

TEST(ActivationCases, MetadataCalls) {
  auto rng = mt::rng_for_test();
  auto s = mt::make_store(4, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE);
  ASSERT_TRUE(s);
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 3, 4);
  Buf<uint64_t> ids(3);
  ids[0] = 5, ids[1] = 6, ids[2] = 5;  // a repeated id takes its last entry
  Buf<double> t(3);
  t[0] = 1.0, t[1] = 2.0, t[2] = 3.0;
  ASSERT_OK(mnemo_store_add_memories(s.get(), ids.data(), m.data(), m.dtype, 3, t.data(), nullptr));
  Buf<double> got_t(2);
  Buf<float> got_i(2), got_b(2);
  ASSERT_OK(mnemo_store_get_meta(s.get(), ids.data(), 2, got_t.data(), got_i.data(), got_b.data()));
  EXPECT_EQ(got_t[0], 3.0);
  EXPECT_EQ(got_t[1], 2.0);
  EXPECT_EQ(got_i[0], 0.0f);
  EXPECT_EQ(got_b[1], 0.0f);
  // An upsert without times keeps them; with importance sets it.
  Buf<float> imp(2);
  imp[0] = 7.0f, imp[1] = -1.5f;
  ASSERT_OK(mnemo_store_add_memories(s.get(), ids.data(), m.data(), m.dtype, 2, nullptr, imp.data()));
  ASSERT_OK(mnemo_store_get_meta(s.get(), ids.data(), 2, got_t.data(), got_i.data(), nullptr));
  EXPECT_EQ(got_t[0], 3.0);
  EXPECT_EQ(got_i[1], -1.5f);
  // A plain add of a new id gives it zeros; of an existing id keeps them.
  ASSERT_OK(mnemo_store_add(s.get(), ids.data(), m.data(), m.dtype, 1));
  ASSERT_OK(mnemo_store_get_meta(s.get(), ids.data(), 1, got_t.data(), got_i.data(), nullptr));
  EXPECT_EQ(got_t[0], 3.0);
  EXPECT_EQ(got_i[0], 7.0f);

  // Errors change nothing and write nothing.
  Buf<uint64_t> bad(2);
  bad[0] = 6, bad[1] = 99;
  Buf<double> out(2, 0xCD);
  const auto snap = out.snapshot();
  EXPECT_TRUE(mt::failed_with(mnemo_store_get_meta(s.get(), bad.data(), 2, out.data(), nullptr, nullptr),
                              MNEMO_E_NOT_FOUND, "ids"));
  EXPECT_TRUE(out.same_as(snap));
  Buf<double> nt(2);
  nt[0] = 50.0, nt[1] = 60.0;
  EXPECT_TRUE(mt::failed_with(mnemo_store_set_times(s.get(), bad.data(), nt.data(), 2), MNEMO_E_NOT_FOUND, "ids"));
  nt[1] = std::nan("");
  EXPECT_TRUE(mt::failed_with(mnemo_store_set_times(s.get(), ids.data(), nt.data(), 2), MNEMO_E_NON_FINITE, "times"));
  Buf<float> ni(2);
  ni[0] = 1.0f, ni[1] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(
      mt::failed_with(mnemo_store_set_importance(s.get(), ids.data(), ni.data(), 2), MNEMO_E_NON_FINITE, "importance"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_add_memories(s.get(), ids.data(), m.data(), m.dtype, 2, nt.data(), nullptr),
                              MNEMO_E_NON_FINITE, "times"));
  EXPECT_TRUE(
      mt::failed_with(mnemo_store_set_times(s.get(), ids.data(), nt.misaligned(), 1), MNEMO_E_MISALIGNED, "times"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_set_times(s.get(), ids.data(), nullptr, 1), MNEMO_E_NULL_POINTER, "times"));
  ASSERT_OK(mnemo_store_get_meta(s.get(), ids.data(), 2, got_t.data(), got_i.data(), nullptr));
  EXPECT_EQ(got_t[0], 3.0);
  EXPECT_EQ(got_t[1], 2.0);
  EXPECT_EQ(got_i[0], 7.0f);
  EXPECT_EQ(got_i[1], -1.5f);
}

TEST(ActivationCases, OptionErrorsWriteNothing) {
  auto rng = mt::rng_for_test();
  Fixture f(rng, 6, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, 10);
  ASSERT_TRUE(f.s);
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 1, 6);
  Buf<uint64_t> ids(3);
  Buf<float> scores(3);
  const auto si = ids.snapshot(), ss = scores.snapshot();
  auto bad = [&](const mnemo_search_options& o, const char* arg) {
    EXPECT_TRUE(mt::failed_with(
        mnemo_store_search(f.s.get(), static_cast<const float*>(q.data()), 1, 3, &o, ids.data(), scores.data()),
        MNEMO_E_INVALID_ARGUMENT, arg));
    EXPECT_TRUE(ids.same_as(si) && scores.same_as(ss));
  };
  mnemo_search_options o = mnemo_search_options_default();
  o.normalize = 1;
  bad(o, "normalize");
  o = mnemo_search_options_default();
  o.touch = 1;
  bad(o, "touch");
  o = options(Act{});
  o.activation = 2;
  bad(o, "activation");
  for (const double hl : {0.0, -5.0, std::nan("")}) {
    o = options(Act{});
    o.half_life = hl;
    bad(o, "half_life");
  }
  o = options(Act{});
  o.now = kInf;
  bad(o, "now");
  o = options(Act{});
  o.w_recency = std::numeric_limits<float>::quiet_NaN();
  bad(o, "w_recency");
  o = options(Act{});
  o.w_importance = std::numeric_limits<float>::infinity();
  bad(o, "w_importance");
  // A caller of the first ABI (40-byte options) gets a plain search even if
  // the bytes after its struct say otherwise.
  o = options(Act{});
  o.w_relevance = 2.0f;
  o.struct_size = 40;
  mt::Results old;
  ASSERT_OK(mt::store_search(f.s.get(), q, 3, &o, &old));
  mt::Results plain;
  const mnemo_search_options d = mnemo_search_options_default();
  ASSERT_OK(mt::store_search(f.s.get(), q, 3, &d, &plain));
  EXPECT_TRUE(mt::same_results(old, plain));
  // The default `now` is the current time: every past memory ages.
  o = options(Act{});
  o.now = std::nan("");
  o.w_relevance = 0.0f;
  o.w_recency = 1.0f;
  ASSERT_OK(mt::store_search(f.s.get(), q, 3, &o, &old));
  EXPECT_LT(old.row_scores(0)[0], 1.0f);
}

TEST(ActivationCases, SaveOpenKeepsTimesAndImportance) {
  auto rng = mt::rng_for_test();
  Fixture f(rng, 10, MNEMO_DTYPE_BF16, MNEMO_METRIC_L2SQ, 70);
  ASSERT_TRUE(f.s);
  char tmpl[] = "/tmp/mnemo-act-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/s.mnemo";
  ASSERT_OK(mnemo_store_save(f.s.get(), path.c_str()));
  mnemo_store* raw = nullptr;
  ASSERT_OK(mnemo_store_open(mt::rt(), path.c_str(), &raw));
  mt::StorePtr back(raw);
  const size_t n = f.ids.size();
  Buf<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = f.ids[i];
  Buf<double> t(n);
  Buf<float> imp(n);
  ASSERT_OK(mnemo_store_get_meta(back.get(), ids.data(), n, t.data(), imp.data(), nullptr));
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(t[i], f.mem[ids[i]].t);
    EXPECT_EQ(imp[i], f.mem[ids[i]].imp);
  }
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 10);
  const Act a = random_act(rng, MNEMO_METRIC_L2SQ, false);
  mt::Results r1, r2;
  const mnemo_search_options o = options(a);
  ASSERT_OK(mt::store_search(f.s.get(), q, 8, &o, &r1));
  ASSERT_OK(mt::store_search(back.get(), q, 8, &o, &r2));
  EXPECT_TRUE(mt::same_results(r1, r2));
  std::remove(path.c_str());
  rmdir(tmpl);
}

// Shards see only their part of the memories; normalised ranges must still
// be the whole store's, and every result bit-identical to one store.
TEST(ActivationCases, ShardedStoresAgreeWithOneStore) {
  auto rng = mt::rng_for_test();
  mnemo_runtime_options o1 = mnemo_runtime_options_default();
  o1.backend = MNEMO_BACKEND_CPU;
  mnemo_runtime_options o3 = o1;
  o3.cpu_shards = 3;
  auto rt1 = mt::make_runtime(o1), rt3 = mt::make_runtime(o3);
  ASSERT_TRUE(rt1 && rt3);
  for (const int32_t metric : mt::metrics()) {
    auto seed = rng();
    std::mt19937_64 r1(seed), r3(seed);
    Fixture one(r1, 16, MNEMO_DTYPE_F32, metric, 500, rt1.get());
    Fixture many(r3, 16, MNEMO_DTYPE_F32, metric, 500, rt3.get());
    ASSERT_TRUE(one.s && many.s);
    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 5, 16);
    for (const bool normalize : {false, true}) {
      const Act a = random_act(rng, metric, normalize);
      mnemo_search_options o = options(a);
      o.touch = 1;
      const mt::Results x = one.search(q, 12, o), y = many.search(q, 12, o);
      EXPECT_TRUE(mt::same_results(x, y)) << mt::metric_name(metric) << (normalize ? " normalized" : "");
      one.expect(q, x, a);
      const size_t n = one.ids.size();
      Buf<uint64_t> ids(n);
      for (size_t i = 0; i < n; ++i) ids[i] = one.ids[i];
      Buf<double> t1(n), t3(n);
      ASSERT_OK(mnemo_store_get_meta(one.s.get(), ids.data(), n, t1.data(), nullptr, nullptr));
      ASSERT_OK(mnemo_store_get_meta(many.s.get(), ids.data(), n, t3.data(), nullptr, nullptr));
      EXPECT_EQ(std::memcmp(t1.data(), t3.data(), n * 8), 0);
      for (size_t i = 0; i < n; ++i) one.mem[ids[i]].t = t1[i];
    }
  }
}

}  // namespace

namespace {

// An infinite half-life never decays, even for an age that overflows f64.
TEST(ActivationCases, InfiniteHalfLifeWithAnInfiniteAge) {
  auto s = mt::make_store(2, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
  ASSERT_TRUE(s);
  Buf<float> v(4), q(2);
  v[0] = 1.0f, v[1] = 0.0f, v[2] = 0.0f, v[3] = 1.0f;
  q[0] = 1.0f, q[1] = 1.0f;
  Buf<uint64_t> ids(2);
  ids[0] = 1, ids[1] = 2;
  Buf<double> t(2);
  t[0] = -1e308, t[1] = 0.0;
  ASSERT_OK(mnemo_store_add_memories(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 2, t.data(), nullptr));
  for (const uint32_t normalize : {0u, 1u}) {
    mnemo_search_options o = mnemo_search_options_default();
    o.activation = 1;
    o.normalize = normalize;
    o.w_recency = 1.0f;
    o.half_life = kInf;
    o.now = 1e308;
    Buf<uint64_t> got(2);
    Buf<float> sc(2);
    ASSERT_OK(mnemo_store_search(s.get(), q.data(), 1, 2, &o, got.data(), sc.data()));
    EXPECT_EQ(got[0], 1u);
    EXPECT_EQ(got[1], 2u);
    EXPECT_EQ(sc[0], sc[1]) << "normalize " << normalize;
    EXPECT_EQ(sc[0], normalize ? 1.0f : 2.0f);
  }
}

}  // namespace
