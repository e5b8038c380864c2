// Activation search on the CUDA backend against a float64 reference and
// against the CPU backend on the same memories: plain and min-max
// normalised keys, every metric and storage dtype, stores below a warp and
// off the kernels' tile sizes, k = N, k > N and k past the small-list limit,
// filters keeping fewer than k, tombstones, times in the future, infinite
// and tiny half-lives, one query (fused scan) and batches (GEMM tiles in
// EXACT and FAST precision), query chunks of a small workspace, touch, the
// device-pointer entry point, and stores sharded over several GPUs.
// Outputs are poisoned before every call. Skips, saying why, where no CUDA
// backend can be created.
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "../store_model.h"
#include "../support.h"
#include "../topk_check.h"

#ifdef MNEMO_TEST_HAVE_CUDART
#include "dev_buf.h"
#endif

namespace {

using mt::Buf;
using mt::Matrix;

constexpr double kNow = 1.7e9;  // a UNIX time in 2023
const double kInf = std::numeric_limits<double>::infinity();

mt::RuntimePtr runtime_on(int32_t backend, int32_t precision = MNEMO_PRECISION_EXACT, uint64_t workspace = 0,
                          uint32_t devices = 0, std::string* why = nullptr) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = backend;
  o.precision = precision;
  o.workspace_bytes = workspace;
  o.device_count = devices;
  mnemo_runtime* rt = nullptr;
  const mnemo_status s = mnemo_runtime_create(&o, &rt);
  if (s != MNEMO_OK && why) *why = mnemo_last_error();
  return mt::RuntimePtr(s == MNEMO_OK ? rt : nullptr);
}

#define REQUIRE_CUDA(name, precision, workspace)                                    \
  std::string why_##name;                                                           \
  auto name = runtime_on(MNEMO_BACKEND_CUDA, precision, workspace, 0, &why_##name); \
  if (!name) GTEST_SKIP() << "no CUDA backend on this machine: " << why_##name

// ---- the float64 reference (the formulas of mnemo.h) -----------------------

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

// ---- stores ------------------------------------------------------------------

// Search results with poisoned outputs: ids 0xAB bytes, scores a quiet NaN
// that no search writes.
struct Out {
  size_t nq = 0, k = 0;
  Buf<uint64_t> ids;
  Buf<float> scores;
  const uint64_t* row_ids(size_t i) const { return ids.data() + i * k; }
  const float* row_scores(size_t i) const { return scores.data() + i * k; }
};

mnemo_status search(const mnemo_store* s, const Matrix& q, size_t k, const mnemo_search_options& o, Out* r) {
  r->nq = q.rows;
  r->k = k;
  r->ids = Buf<uint64_t>(q.rows * k, 0xAB);
  r->scores = Buf<float>(q.rows * k);
  mt::poison_f32(r->scores.data(), q.rows * k);
  return mnemo_store_search(s, static_cast<const float*>(q.data()), q.rows, k, &o, r->ids.data(), r->scores.data());
}

bool same_bits(const Out& a, const Out& b) {
  const size_t n = a.nq * a.k;
  return a.nq == b.nq && a.k == b.k && std::memcmp(a.ids.data(), b.ids.data(), n * 8) == 0 &&
         std::memcmp(a.scores.data(), b.scores.data(), n * 4) == 0;
}

// The same memories in a store on each given runtime (the first one is the
// GPU's), and their model: random vectors, times from decades back to the
// future, importances, biases, then a tenth removed (tombstones).
struct Stores {
  size_t dim;
  int32_t dtype, metric;
  std::vector<mt::StorePtr> s;
  std::map<uint64_t, Mem> mem;
  std::vector<uint64_t> ids;  // live

  Stores(std::mt19937_64& rng, size_t dim_, int32_t dtype_, int32_t metric_, size_t n,
         std::initializer_list<mnemo_runtime*> rts)
      : dim(dim_), dtype(dtype_), metric(metric_) {
    for (mnemo_runtime* rt : rts) s.push_back(mt::make_store(dim, dtype, metric, rt));
    const Matrix m = mt::random_matrix(rng, dtype, n, dim, metric == MNEMO_METRIC_DOT);
    Buf<uint64_t> id(n);
    Buf<double> t(n);
    Buf<float> imp(n), bias(n);
    for (size_t i = 0; i < n; ++i) {
      id[i] = 1000 + 7 * i + mt::rand_below(rng, 5);
      const uint64_t kind = mt::rand_below(rng, 4);
      const double span = kind == 0 ? 3e9 : kind == 1 ? 4e4 : kind == 2 ? 60.0 : -600.0;
      t[i] = std::floor(kNow - span * std::fabs(mt::rand_nonzero(rng)));
      imp[i] = 5.0f + 5.0f * mt::rand_nonzero(rng);
      bias[i] = 0.3f * mt::rand_nonzero(rng);
      Mem& e = mem[id[i]];
      e.val.assign(m.row(i), m.row(i) + dim);
      e.t = t[i], e.imp = imp[i], e.bias = bias[i];
    }
    std::vector<uint64_t> gone;
    for (size_t i = 3; i < n; i += 10) gone.push_back(id[i]);
    for (auto& st : s) {
      if (!st) return;
      EXPECT_OK(mnemo_store_add_memories(st.get(), id.data(), m.data(), m.dtype, n, t.data(), imp.data()));
      EXPECT_OK(mnemo_store_set_bias(st.get(), id.data(), bias.data(), n));
      uint64_t removed = 0;
      EXPECT_OK(mt::store_remove(st.get(), gone, &removed));
    }
    for (const uint64_t g : gone) mem.erase(g);
    for (const auto& e : mem) ids.push_back(e.first);
  }
  bool ok() const {
    for (const auto& st : s)
      if (!st) return false;
    return true;
  }
  mnemo_store* gpu() const { return s[0].get(); }

  void expect_reference(const Matrix& q, const Out& r, const Act& a, const std::string& what,
                        const std::set<uint64_t>* allow = nullptr) const {
    for (size_t i = 0; i < q.rows; ++i)
      EXPECT_TRUE(mt::check_topk(metric, act_candidates(metric, dim, mem, q.row(i), a, allow), r.k, r.row_ids(i),
                                 r.row_scores(i)))
          << what << ": query " << i << " of " << q.rows << ", k " << r.k;
  }

  // GPU against CPU: the same number of results, scores within the
  // reference's tolerances at every rank (ids may differ only in near-ties,
  // which the reference check covers).
  void expect_close(const Matrix& q, const Out& g, const Out& c, const Act& a, const std::string& what,
                    const std::set<uint64_t>* allow = nullptr) const {
    for (size_t i = 0; i < q.rows; ++i) {
      double tol = 0;
      for (const auto& cand : act_candidates(metric, dim, mem, q.row(i), a, allow)) tol = std::max(tol, cand.tol);
      for (size_t j = 0; j < g.k; ++j) {
        const uint64_t gi = g.row_ids(i)[j], ci = c.row_ids(i)[j];
        const float gs = g.row_scores(i)[j], cs = c.row_scores(i)[j];
        ASSERT_EQ(gi == MNEMO_NO_ID, ci == MNEMO_NO_ID) << what << ": query " << i << " place " << j;
        if (gi == MNEMO_NO_ID) {
          EXPECT_TRUE(std::isnan(gs) && std::isnan(cs)) << what << ": padding, query " << i << " place " << j;
          continue;
        }
        EXPECT_LE(std::fabs(static_cast<double>(gs) - cs), 2 * tol)
            << what << ": query " << i << " place " << j << " gpu id " << gi << " cpu id " << ci;
      }
    }
  }
};

// One search on every store: each against the reference, the GPU's
// against the CPU's.
void check_search(const Stores& st, const Matrix& q, size_t k, const Act& a, const std::string& what,
                  const mnemo_search_options* with = nullptr, const std::set<uint64_t>* allow = nullptr) {
  const mnemo_search_options o = with ? *with : options(a);
  std::vector<Out> r(st.s.size());
  for (size_t i = 0; i < st.s.size(); ++i) {
    ASSERT_OK(search(st.s[i].get(), q, k, o, &r[i]));
    st.expect_reference(q, r[i], a, what + (i == 0 ? " (gpu)" : " (cpu)"), allow);
  }
  for (size_t i = 1; i < r.size(); ++i) st.expect_close(q, r[0], r[i], a, what, allow);
}

std::string describe(int32_t dtype, int32_t metric, size_t n, size_t dim, size_t nq, size_t k, bool normalize) {
  return mt::case_name(dtype, metric, dim) + " n" + std::to_string(n) + " q" + std::to_string(nq) + " k" +
         std::to_string(k) + (normalize ? " normalized" : " plain");
}

// ---- suites ------------------------------------------------------------------

using Param = std::tuple<int32_t, int32_t, bool>;  // dtype, metric, normalize

class GpuActivation : public ::testing::TestWithParam<Param> {};

// Small stores, the fused scan (and the normalised path's small lists):
// N below a warp, k = N, k > N, a filter that keeps fewer than k.
TEST_P(GpuActivation, SmallStores) {
  const auto [dtype, metric, normalize] = GetParam();
  REQUIRE_CUDA(gpu, MNEMO_PRECISION_EXACT, 0);
  auto cpu = runtime_on(MNEMO_BACKEND_CPU);
  ASSERT_TRUE(cpu);
  auto rng = mt::rng_for_test();
  for (const size_t n : {size_t{5}, size_t{29}, size_t{300}}) {
    for (const size_t dim : {size_t{3}, size_t{37}}) {
      Stores st(rng, dim, dtype, metric, n, {gpu.get(), cpu.get()});
      ASSERT_TRUE(st.ok());
      const size_t live = st.ids.size();
      for (const size_t nq : {size_t{1}, size_t{3}}) {
        const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, dim, metric == MNEMO_METRIC_DOT);
        const Act a = random_act(rng, metric, normalize);
        for (const size_t k : {size_t{1}, size_t{7}, live, live + 3})
          check_search(st, q, k, a, describe(dtype, metric, n, dim, nq, k, normalize));
        // A filter that keeps fewer memories than k.
        std::set<uint64_t> keep;
        Buf<uint64_t> allow(4);
        for (size_t i = 0; i < 4; ++i) keep.insert(allow[i] = st.ids[(i * 3) % live]);
        mnemo_search_options o = options(a);
        o.filter_kind = MNEMO_FILTER_IDS;
        o.filter_ids = allow.data();
        o.filter_count = 4;
        check_search(st, q, 6, a, describe(dtype, metric, n, dim, nq, 6, normalize) + " filter", &o, &keep);
      }
    }
  }
}

// A store off every tile size: the scan over many blocks, k past the
// small-list limit (radix selection), and batches for the GEMM paths in
// EXACT and FAST precision.
TEST_P(GpuActivation, LargerStoresAndBatches) {
  const auto [dtype, metric, normalize] = GetParam();
  REQUIRE_CUDA(exact, MNEMO_PRECISION_EXACT, 0);
  auto fast = runtime_on(MNEMO_BACKEND_CUDA, MNEMO_PRECISION_FAST);
  auto cpu = runtime_on(MNEMO_BACKEND_CPU);
  ASSERT_TRUE(fast && cpu);
  auto rng = mt::rng_for_test();
  const size_t n = 4099, dim = 40;
  for (mnemo_runtime* g : {exact.get(), fast.get()}) {
    const std::string prec = g == exact.get() ? " exact" : " fast";
    Stores st(rng, dim, dtype, metric, n, {g, cpu.get()});
    ASSERT_TRUE(st.ok());
    struct Shape {
      size_t nq, k;
    };
    for (const Shape sh : {Shape{1, 10}, Shape{2, 300}, Shape{70, 9}, Shape{70, 300}}) {
      const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, sh.nq, dim, metric == MNEMO_METRIC_DOT);
      const Act a = random_act(rng, metric, normalize);
      check_search(st, q, sh.k, a, describe(dtype, metric, n, dim, sh.nq, sh.k, normalize) + prec);
    }
  }
}

// Single queries and a pass of three over a store the scan samples for its
// starting bound (k = 100 over 60013 rows of 24: short rows, several a
// warp): activation keys in the sample and the scan alike.
TEST_P(GpuActivation, SampledBoundOnShortRows) {
  const auto [dtype, metric, normalize] = GetParam();
  REQUIRE_CUDA(gpu, MNEMO_PRECISION_EXACT, 0);
  auto cpu = runtime_on(MNEMO_BACKEND_CPU);
  ASSERT_TRUE(cpu);
  auto rng = mt::rng_for_test();
  const size_t n = 60013, dim = 24;
  Stores st(rng, dim, dtype, metric, n, {gpu.get(), cpu.get()});
  ASSERT_TRUE(st.ok());
  for (const size_t nq : {size_t{1}, size_t{3}}) {
    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, dim, metric == MNEMO_METRIC_DOT);
    const Act a = random_act(rng, metric, normalize);
    check_search(st, q, 100, a, describe(dtype, metric, n, dim, nq, 100, normalize) + " sampled");
  }
}

INSTANTIATE_TEST_SUITE_P(AllShapes, GpuActivation,
                         ::testing::Combine(::testing::ValuesIn(mt::storage_dtypes()),
                                            ::testing::ValuesIn(mt::metrics()), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return std::string(mt::dtype_name(std::get<0>(p.param))) + "_" +
                                  mt::metric_name(std::get<1>(p.param)) +
                                  (std::get<2>(p.param) ? "_normalized" : "_plain");
                         });

// Weights that leave only the relevance: the plain search's results, bit for
// bit, on the scan and on the GEMM path in both precisions.
TEST(GpuActivationCases, NeutralWeightsGivePlainSearchBitForBit) {
  REQUIRE_CUDA(exact, MNEMO_PRECISION_EXACT, 0);
  auto fast = runtime_on(MNEMO_BACKEND_CUDA, MNEMO_PRECISION_FAST);
  ASSERT_TRUE(fast);
  auto rng = mt::rng_for_test();
  for (mnemo_runtime* g : {exact.get(), fast.get()}) {
    for (const int32_t metric : mt::metrics()) {
      Stores st(rng, 768, MNEMO_DTYPE_F32, metric, 3000, {g});
      ASSERT_TRUE(st.ok());
      for (const size_t nq : {size_t{1}, size_t{70}}) {
        const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, 768);
        Out act, plain;
        ASSERT_OK(search(st.gpu(), q, 10, options(Act{}), &act));
        ASSERT_OK(search(st.gpu(), q, 10, mnemo_search_options_default(), &plain));
        EXPECT_TRUE(same_bits(act, plain)) << mt::metric_name(metric) << " nq " << nq;
      }
    }
  }
}

TEST(GpuActivationCases, HalfLifeExtremesAndFutureTimes) {
  REQUIRE_CUDA(gpu, MNEMO_PRECISION_EXACT, 0);
  auto cpu = runtime_on(MNEMO_BACKEND_CPU);
  ASSERT_TRUE(cpu);
  auto rng = mt::rng_for_test();
  Stores st(rng, 8, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, 60, {gpu.get(), cpu.get()});
  ASSERT_TRUE(st.ok());
  const size_t live = st.ids.size();
  for (const size_t nq : {size_t{2}, size_t{70}}) {
    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, 8);
    for (const double hl : {kInf, 1e-300, 1e-3, 1e300}) {
      for (const bool normalize : {false, true}) {
        Act a;
        a.w_rec = 2.0f;
        a.half_life = hl;
        a.normalize = normalize;
        check_search(st, q, live, a, "half_life " + std::to_string(hl) + (normalize ? " normalized" : " plain"));
      }
    }
  }
  // Recency alone with an infinite half-life: every memory's recency is 1,
  // so every key is 1 and the order is by id.
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 1, 8);
  Act a;
  a.w_rel = 0.0f;
  a.w_rec = 1.0f;
  a.half_life = kInf;
  Out r;
  ASSERT_OK(search(st.gpu(), q, 5, options(a), &r));
  for (size_t j = 0; j < 5; ++j) {
    EXPECT_EQ(r.row_scores(0)[j], 1.0f);
    EXPECT_EQ(r.row_ids(0)[j], st.ids[j]);
  }
  // Every time in the future counts as now: recency 1.
  Buf<uint64_t> ids(live);
  Buf<double> times(live);
  for (size_t i = 0; i < live; ++i) {
    ids[i] = st.ids[i];
    times[i] = kNow + 1.0 + static_cast<double>(i);
    st.mem[st.ids[i]].t = times[i];
  }
  for (const auto& s : st.s) ASSERT_OK(mnemo_store_set_times(s.get(), ids.data(), times.data(), live));
  a.half_life = 1.0;
  ASSERT_OK(search(st.gpu(), q, 3, options(a), &r));
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(r.row_scores(0)[j], 1.0f);
  // Normalised, every recency equal: one half each.
  a.normalize = true;
  ASSERT_OK(search(st.gpu(), q, 3, options(a), &r));
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(r.row_scores(0)[j], 0.5f);
  a.w_rel = 1.0f;
  a.w_imp = 0.3f;
  check_search(st, q, 20, a, "future times normalized");
}

// Importances and times updated after the store reached the GPU, and touch:
// the device copy follows every write.
TEST(GpuActivationCases, UpdatesAndTouchReachTheDevice) {
  REQUIRE_CUDA(gpu, MNEMO_PRECISION_EXACT, 0);
  auto cpu = runtime_on(MNEMO_BACKEND_CPU);
  ASSERT_TRUE(cpu);
  auto rng = mt::rng_for_test();
  Stores st(rng, 16, MNEMO_DTYPE_F16, MNEMO_METRIC_DOT, 500, {gpu.get(), cpu.get()});
  ASSERT_TRUE(st.ok());
  const size_t live = st.ids.size();
  Buf<uint64_t> ids(live);
  Buf<float> imp(live);
  for (size_t i = 0; i < live; ++i) {
    ids[i] = st.ids[i];
    imp[i] = 20.0f * std::fabs(mt::rand_nonzero(rng));
    st.mem[ids[i]].imp = imp[i];
  }
  for (const auto& s : st.s) ASSERT_OK(mnemo_store_set_importance(s.get(), ids.data(), imp.data(), live));
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 3, 16, true);
  for (const bool normalize : {false, true}) {
    Act a = random_act(rng, MNEMO_METRIC_DOT, normalize);
    check_search(st, q, 12, a, normalize ? "new importances normalized" : "new importances plain");
    // Touch on the GPU store; the CPU store then takes the same times.
    mnemo_search_options o = options(a);
    o.touch = 1;
    o.now = kNow + 777.25 + (normalize ? 1.0 : 0.0);
    Out r;
    ASSERT_OK(search(st.gpu(), q, 4, o, &r));
    for (size_t i = 0; i < 12; ++i) st.mem[r.ids[i]].t = o.now;
    Buf<double> t(live);
    ASSERT_OK(mnemo_store_get_meta(st.gpu(), ids.data(), live, t.data(), nullptr, nullptr));
    for (size_t i = 0; i < live; ++i) {
      EXPECT_EQ(t[i], st.mem[ids[i]].t) << "id " << ids[i];
      t[i] = st.mem[ids[i]].t;
    }
    ASSERT_OK(mnemo_store_set_times(st.s[1].get(), ids.data(), t.data(), live));
    a.now = o.now;
    check_search(st, q, 12, a, normalize ? "after touch normalized" : "after touch plain");
  }
}

// A workspace too small for every query's keys at once: the normalised path
// works in query chunks (and the plain one in its own).
TEST(GpuActivationCases, QueryChunksOfASmallWorkspace) {
  REQUIRE_CUDA(gpu, MNEMO_PRECISION_EXACT, 1ull << 20);  // raised to the 64 MB floor
  auto cpu = runtime_on(MNEMO_BACKEND_CPU);
  ASSERT_TRUE(cpu);
  auto rng = mt::rng_for_test();
  Stores st(rng, 12, MNEMO_DTYPE_BF16, MNEMO_METRIC_L2SQ, 50000, {gpu.get(), cpu.get()});
  ASSERT_TRUE(st.ok());
  // 200 queries x 50000 slots x 4 bytes = 40 MB of keys, against half of
  // the 64 MB floor for them: two chunks.
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 200, 12);
  for (const bool normalize : {true, false}) {
    const Act a = random_act(rng, MNEMO_METRIC_L2SQ, normalize);
    for (const size_t k : {size_t{5}, size_t{400}}) check_search(st, q, k, a, normalize ? "normalized" : "plain");
  }
}

// Stores of 2^17 slots or more form every slot's memory terms in a pass
// ahead of the scan (read as a bias); smaller ones form them inline. Both
// sides of that size against the reference and the CPU, with and without
// the memories' own biases, one query (the scan) and a batch, with a filter.
TEST(GpuActivationCases, TermsAheadOfTheScanAtBothSizes) {
  REQUIRE_CUDA(gpu, MNEMO_PRECISION_EXACT, 0);
  auto cpu = runtime_on(MNEMO_BACKEND_CPU);
  ASSERT_TRUE(cpu);
  auto rng = mt::rng_for_test();
  struct Case {
    size_t n;
    int32_t metric;
  };
  for (const Case c :
       {Case{120011, MNEMO_METRIC_COSINE}, Case{150001, MNEMO_METRIC_COSINE}, Case{150001, MNEMO_METRIC_L2SQ}}) {
    const size_t n = c.n;
    const int32_t metric = c.metric;
    Stores st(rng, 13, MNEMO_DTYPE_F32, metric, n, {gpu.get(), cpu.get()});
    ASSERT_TRUE(st.ok());
    for (const size_t nq : {size_t{1}, size_t{3}, size_t{33}}) {
      const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, 13);
      for (const bool bias : {false, true}) {
        Act a = random_act(rng, metric, false);
        a.bias = bias;
        const std::string what = "n" + std::to_string(n) + " q" + std::to_string(nq) + (bias ? " bias" : "");
        check_search(st, q, 10, a, what);
        std::set<uint64_t> keep;
        Buf<uint64_t> allow(50);
        for (size_t i = 0; i < 50; ++i) keep.insert(allow[i] = st.ids[(i * 2311) % st.ids.size()]);
        mnemo_search_options o = options(a);
        o.filter_kind = MNEMO_FILTER_IDS;
        o.filter_ids = allow.data();
        o.filter_count = 50;
        check_search(st, q, 7, a, what + " filter", &o, &keep);
      }
    }
  }
}

// Normalised ranges equal to one half: equal times and importances.
TEST(GpuActivationCases, EqualTimesAndImportancesNormalizeToOneHalf) {
  REQUIRE_CUDA(gpu, MNEMO_PRECISION_EXACT, 0);
  auto rng = mt::rng_for_test();
  Stores st(rng, 8, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, 40, {gpu.get()});
  ASSERT_TRUE(st.ok());
  const size_t n = st.ids.size();
  Buf<uint64_t> ids(n);
  Buf<double> times(n);
  Buf<float> imp(n);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = st.ids[i];
    times[i] = kNow - 100.0;
    imp[i] = 3.0f;
    st.mem[ids[i]].t = times[i];
    st.mem[ids[i]].imp = imp[i];
  }
  ASSERT_OK(mnemo_store_set_times(st.gpu(), ids.data(), times.data(), n));
  ASSERT_OK(mnemo_store_set_importance(st.gpu(), ids.data(), imp.data(), n));
  Act a;
  a.normalize = true;
  a.w_rel = 0.0f;
  a.w_rec = 1.0f;
  a.w_imp = 1.0f;
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 1, 8);
  Out r;
  ASSERT_OK(search(st.gpu(), q, 4, options(a), &r));
  for (size_t j = 0; j < 4; ++j) EXPECT_EQ(r.row_scores(0)[j], 1.0f);
  st.expect_reference(q, r, a, "equal terms");
  a.w_rel = 1.0f;
  ASSERT_OK(search(st.gpu(), q, n, options(a), &r));
  st.expect_reference(q, r, a, "equal terms with relevance");
}

// A store sharded over several GPUs: normalised searches take every shard's
// ranges first, then search with the combined ones; results must equal one
// GPU's bit for bit.
TEST(GpuActivationCases, ShardedOverDevicesMatchesOneDevice) {
  REQUIRE_CUDA(one, MNEMO_PRECISION_EXACT, 0);
  std::string why;
  auto many = runtime_on(MNEMO_BACKEND_CUDA, MNEMO_PRECISION_EXACT, 0, MNEMO_ALL_DEVICES, &why);
  ASSERT_TRUE(many) << why;
  mnemo_runtime_report rep;
  rep.struct_size = sizeof rep;
  ASSERT_OK(mnemo_runtime_info(many.get(), &rep));
  if (rep.device_count < 2) GTEST_SKIP() << "fewer than two GPUs (" << rep.device_count << ")";
  auto rng = mt::rng_for_test();
  for (const int32_t metric : mt::metrics()) {
    Stores st(rng, 24, MNEMO_DTYPE_F32, metric, 3001, {one.get(), many.get()});
    ASSERT_TRUE(st.ok());
    for (const size_t nq : {size_t{1}, size_t{70}}) {
      const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, 24);
      for (const bool normalize : {false, true}) {
        const Act a = random_act(rng, metric, normalize);
        for (const size_t k : {size_t{10}, size_t{300}}) {
          Out x, y;
          ASSERT_OK(search(st.s[0].get(), q, k, options(a), &x));
          ASSERT_OK(search(st.s[1].get(), q, k, options(a), &y));
          EXPECT_TRUE(same_bits(x, y)) << describe(MNEMO_DTYPE_F32, metric, 3001, 24, nq, k, normalize);
          st.expect_reference(q, x, a, describe(MNEMO_DTYPE_F32, metric, 3001, 24, nq, k, normalize));
        }
      }
    }
  }
}

#ifdef MNEMO_TEST_HAVE_CUDART

// mnemo_store_search_device with activation: the host call's results bit
// for bit, on every path; with touch, the times of what it returned.
TEST(GpuActivationCases, DeviceEntryPointMatchesHostCall) {
  REQUIRE_CUDA(gpu, MNEMO_PRECISION_EXACT, 0);
  auto fast = runtime_on(MNEMO_BACKEND_CUDA, MNEMO_PRECISION_FAST);
  ASSERT_TRUE(fast);
  auto rng = mt::rng_for_test();
  for (mnemo_runtime* g : {gpu.get(), fast.get()}) {
    for (const int32_t metric : mt::metrics()) {
      // 37 is not a multiple of 8: the queries get a padded device copy;
      // 64 is read in place.
      for (const size_t dim : {size_t{37}, size_t{64}}) {
        Stores st(rng, dim, MNEMO_DTYPE_F16, metric, 2500, {g});
        ASSERT_TRUE(st.ok());
        for (const size_t nq : {size_t{1}, size_t{70}}) {
          const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, dim, metric == MNEMO_METRIC_DOT);
          for (const bool normalize : {false, true}) {
            const Act a = random_act(rng, metric, normalize);
            for (const size_t k : {size_t{10}, size_t{300}, st.ids.size() + 5}) {
              const std::string what = describe(MNEMO_DTYPE_F16, metric, 2500, dim, nq, k, normalize);
              const mnemo_search_options o = options(a);
              Out host;
              ASSERT_OK(search(st.gpu(), q, k, o, &host));
              st.expect_reference(q, host, a, what);
              mt::DevBuf dq(q.data(), nq * dim * 4), di(nq * k * 8), ds(nq * k * 4);
              std::vector<unsigned char> poison(nq * k * 8, 0xAB);
              cudaMemcpy(di.get(), poison.data(), nq * k * 8, cudaMemcpyHostToDevice);
              cudaMemcpy(ds.get(), poison.data(), nq * k * 4, cudaMemcpyHostToDevice);
              cudaDeviceSynchronize();  // pageable copies may land late (dev_buf.h)
              mt::Stream sm;
              ASSERT_OK(mnemo_store_search_device(st.gpu(), dq.as<float>(), nq, k, &o, di.as<uint64_t>(),
                                                  ds.as<float>(), sm.s));
              ASSERT_EQ(cudaStreamSynchronize(sm.s), cudaSuccess);
              const auto ids = di.bytes(), scores = ds.bytes();
              EXPECT_EQ(std::memcmp(ids.data(), host.ids.data(), nq * k * 8), 0) << what << ": ids differ";
              EXPECT_EQ(std::memcmp(scores.data(), host.scores.data(), nq * k * 4), 0) << what << ": scores differ";
            }
          }
        }
      }
    }
  }
  // Touch through the device entry point: the returned ids' times become now.
  Stores st(rng, 16, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, 200, {gpu.get()});
  ASSERT_TRUE(st.ok());
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 16);
  Act a;
  a.w_rec = 0.7f;
  a.normalize = true;
  mnemo_search_options o = options(a);
  o.touch = 1;
  o.now = kNow + 99.5;
  mt::DevBuf dq(q.data(), 2 * 16 * 4), di(2 * 5 * 8), ds(2 * 5 * 4);
  mt::Stream sm;
  ASSERT_OK(mnemo_store_search_device(st.gpu(), dq.as<float>(), 2, 5, &o, di.as<uint64_t>(), ds.as<float>(), sm.s));
  ASSERT_EQ(cudaStreamSynchronize(sm.s), cudaSuccess);
  const auto raw = di.bytes();
  std::vector<uint64_t> got(10);
  std::memcpy(got.data(), raw.data(), 80);
  const std::set<uint64_t> touched(got.begin(), got.end());
  const size_t live = st.ids.size();
  Buf<uint64_t> ids(live);
  Buf<double> t(live);
  for (size_t i = 0; i < live; ++i) ids[i] = st.ids[i];
  ASSERT_OK(mnemo_store_get_meta(st.gpu(), ids.data(), live, t.data(), nullptr, nullptr));
  for (size_t i = 0; i < live; ++i)
    EXPECT_EQ(t[i], touched.count(ids[i]) ? o.now : st.mem[ids[i]].t) << "id " << ids[i];
}

#endif  // MNEMO_TEST_HAVE_CUDART

}  // namespace
