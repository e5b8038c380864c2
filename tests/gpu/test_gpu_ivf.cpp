// The CUDA backend's inverted-file search against the CPU backend's on the
// same hand-built store views: lists of very different sizes (empty ones
// included), tombstones, a hot tier or none, every storage dtype and
// metric, awkward row widths; plain, filtered, biased and activation
// rankings (plain and normalised); host and device placement; outputs
// poisoned first. Plain results are also checked against a float64
// reference over the same candidates, and an index whose every non-empty
// list is probed must answer as the full scan. The backends are made
// directly (the CPU class, the CUDA module through the loader), so the
// search arguments are exactly those written here. Skips, saying why,
// where no CUDA backend can be created.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../reference.h"
#include "../support.h"
#include "../topk_check.h"
#include "core/backend.h"
#include "core/cpu/cpu_backend.h"
#include "core/module_loader.h"

#ifdef MNEMO_TEST_HAVE_CUDART
#include "dev_buf.h"
#endif

namespace {

using mnemo::Backend;
using mnemo::IvfProbe;
using mnemo::SearchArgs;
using mnemo::StoreView;

// The two backends, made once per process (never destroyed: mirrors and
// device copies made by the CUDA one may outlive a test's scope at exit).
struct Backends {
  Backend* cpu = nullptr;
  Backend* gpu = nullptr;
  std::string why;
};

Backends& backends() {
  static Backends b = [] {
    Backends r;
    mnemo::BackendConfig cfg;
    cfg.num_threads = 2;
    cfg.workspace_bytes = 256ull << 20;
    r.cpu = new mnemo::cpu::CpuBackend(cfg);
    std::string reason;
    if (!mnemo::cuda_device_present(reason)) {
      r.why = reason;
      return r;
    }
    mnemo::LoadedModule m;
    if (!mnemo::load_module("libmnemo_cuda.so", m, reason)) {
      r.why = reason;
      return r;
    }
    char err[512] = {0};
    Backend* be = nullptr;
    const int32_t rc = m.create(&cfg, &be, err, sizeof err);
    if (rc != 0 || be == nullptr) {
      r.why = std::string("module create failed: ") + err;
      return r;
    }
    r.gpu = be;
    return r;
  }();
  return b;
}

#define REQUIRE_GPU()                                                                     \
  Backends& be_ = backends();                                                             \
  if (be_.gpu == nullptr) GTEST_SKIP() << "no CUDA backend on this machine: " << be_.why; \
  Backend& gpu = *be_.gpu;                                                                \
  Backend& cpu = *be_.cpu

mnemo::DType dtype_of(int32_t d) {
  return d == MNEMO_DTYPE_F16 ? mnemo::DType::f16 : d == MNEMO_DTYPE_BF16 ? mnemo::DType::bf16 : mnemo::DType::f32;
}
mnemo::Metric metric_of(int32_t m) {
  return m == MNEMO_METRIC_DOT    ? mnemo::Metric::dot
         : m == MNEMO_METRIC_L2SQ ? mnemo::Metric::l2sq
                                  : mnemo::Metric::cosine;
}

double norm_of(const double* x, size_t dim) {
  double s = 0;
  for (size_t i = 0; i < dim; ++i) s += x[i] * x[i];
  return std::sqrt(s);
}

// A store laid out list by list, a hot tier after, and its index.
struct IvfStore {
  int32_t dtype, metric;
  size_t dim, slots, nlist, hot_begin;
  std::vector<unsigned char> vec;  // [slots x dim] of dtype
  std::vector<double> val;         // the stored (rounded) values
  std::vector<uint64_t> ids;
  std::vector<float> norms, biases, importance;
  std::vector<double> times;
  std::vector<float> cent, cnorms, czero;
  std::vector<uint64_t> cids;
  std::vector<double> ctimes;
  std::vector<uint64_t> offsets;  // [nlist + 1]
  StoreView view, cview;
  std::unique_ptr<mnemo::StoreMirror> mirror, cmirror;
  std::unique_ptr<mnemo::DeviceCopy> doffsets;
};

// list_sizes: the lists in slot order; hot: rows of the hot tier. Every
// twentieth slot or so is a tombstone. far_last: the last list's centroid
// at -100 e0 (with queries of a large first entry, the worst list for
// every metric).
std::unique_ptr<IvfStore> make_store(Backend& gpu, std::mt19937_64& rng, int32_t dtype, int32_t metric, size_t dim,
                                     const std::vector<size_t>& list_sizes, size_t hot, bool far_last = false) {
  auto s = std::make_unique<IvfStore>();
  s->dtype = dtype;
  s->metric = metric;
  s->dim = dim;
  s->nlist = list_sizes.size();
  s->offsets.push_back(0);
  for (size_t n : list_sizes) s->offsets.push_back(s->offsets.back() + n);
  s->hot_begin = s->offsets.back();
  s->slots = s->hot_begin + hot;
  const size_t n = s->slots, es = ref::dtype_size(dtype);
  s->vec.assign(n * dim * es, 0);
  s->val.assign(n * dim, 0.0);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  // Each list's rows around its own centre, so the coarse step matters.
  std::vector<std::vector<double>> centre(s->nlist, std::vector<double>(dim));
  for (auto& c : centre)
    for (auto& x : c) x = 0.6 * mt::rand_nonzero(rng);
  for (size_t r = 0; r < n; ++r) {
    size_t l = s->nlist;
    for (size_t j = 0; j < s->nlist; ++j)
      if (r >= s->offsets[j] && r < s->offsets[j + 1]) l = j;
    for (size_t i = 0; i < dim; ++i) {
      const double x = (l < s->nlist ? centre[l][i] : 0.0) + 0.5 * mt::rand_nonzero(rng);
      ref::store(s->vec.data(), dtype, r * dim + i, x);
      s->val[r * dim + i] = ref::load(s->vec.data(), dtype, r * dim + i);
    }
  }
  std::set<uint64_t> seen;
  for (size_t r = 0; r < n; ++r) {
    uint64_t id;
    do id = rng() >> 2;
    while (!seen.insert(id).second);
    s->ids.push_back(mt::rand_below(rng, 20) == 0 ? mnemo::kNoId : id);
    s->norms.push_back(static_cast<float>(norm_of(&s->val[r * dim], dim)));
    s->biases.push_back(mt::rand_below(rng, 4) == 0 ? 0.3f * mt::rand_nonzero(rng) : 0.0f);
    s->times.push_back(1.0e6 - 2.0e5 * u01(rng));
    s->importance.push_back(static_cast<float>(u01(rng)));
  }
  // Centroids: the lists' centres (f32), ids 0..nlist-1, zero extras.
  s->cent.resize(s->nlist * dim);
  for (size_t l = 0; l < s->nlist; ++l)
    for (size_t i = 0; i < dim; ++i) s->cent[l * dim + i] = static_cast<float>(centre[l][i]);
  if (far_last) {
    std::fill(s->cent.end() - dim, s->cent.end(), 0.0f);
    s->cent[(s->nlist - 1) * dim] = -100.0f;
  }
  for (size_t l = 0; l < s->nlist; ++l) {
    double sq = 0;
    for (size_t i = 0; i < dim; ++i) sq += double(s->cent[l * dim + i]) * s->cent[l * dim + i];
    s->cnorms.push_back(static_cast<float>(std::sqrt(sq)));
    s->cids.push_back(l);
  }
  s->czero.assign(s->nlist, 0.0f);
  s->ctimes.assign(s->nlist, 0.0);

  StoreView& v = s->view;
  v.vectors = s->vec.data();
  v.dtype = dtype_of(dtype);
  v.metric = metric_of(metric);
  v.dim = dim;
  v.slots = n;
  v.ids = s->ids.data();
  v.norms = s->norms.data();
  v.biases = s->biases.data();
  v.times = s->times.data();
  v.importance = s->importance.data();
  StoreView& c = s->cview;
  c.vectors = s->cent.data();
  c.dtype = mnemo::DType::f32;
  c.metric = v.metric;
  c.dim = dim;
  c.slots = s->nlist;
  c.ids = s->cids.data();
  c.norms = s->cnorms.data();
  c.biases = s->czero.data();
  c.times = s->ctimes.data();
  c.importance = s->czero.data();
  s->mirror = gpu.attach_store(v);
  s->cmirror = gpu.attach_store(c);
  s->doffsets = gpu.copy_to_device(s->offsets.data(), s->offsets.size() * 8);
  return s;
}

std::vector<float> make_queries(std::mt19937_64& rng, size_t nq, size_t dim, bool big_first = false) {
  std::vector<float> q(nq * dim);
  for (auto& x : q) x = mt::rand_nonzero(rng);
  if (big_first)
    for (size_t i = 0; i < nq; ++i) q[i * dim] = 20.0f;
  return q;
}

enum class Rank { plain, allow, bias, act, normalized };
const char* rank_name(Rank r) {
  switch (r) {
    case Rank::plain: return "plain";
    case Rank::allow: return "allow";
    case Rank::bias: return "bias";
    case Rank::act: return "activation";
    default: return "normalized";
  }
}

struct Call {
  const float* q;
  size_t nq, k;
  uint32_t nprobe;  // 0: no index (the full scan)
  Rank rank;
  const std::vector<uint64_t>* allow;
  bool device;
};

mnemo::Activation activation_of(Rank r) {
  mnemo::Activation a;
  if (r != Rank::act && r != Rank::normalized) return a;
  a.on = true;
  a.normalize = r == Rank::normalized;
  a.w_rel = 0.6f;
  a.w_rec = 0.3f;
  a.w_imp = 0.1f;
  a.half_life = 3.0e4;
  a.now = 1.0e6;
  return a;
}

// One search on `be` (GPU: with the store's mirrors), results into ids /
// scores [nq x k], poisoned first.
void run_search(Backend& be, bool on_gpu, const IvfStore& s, const Call& c, std::vector<uint64_t>& ids,
                std::vector<float>& scores) {
  ids.assign(c.nq * c.k, 0x5a5a5a5a5a5a5a5aull);
  scores.assign(c.nq * c.k, -12345.0f);
  IvfProbe p;
  p.centroids = &s.cview;
  p.centroid_mirror = on_gpu ? s.cmirror.get() : nullptr;
  p.device_offsets = on_gpu && s.doffsets ? s.doffsets->data() : nullptr;
  // A GPU probe given the offsets' device copy reads none on the host (it
  // takes the longest list from the probe): null here, so a walk would fault.
  p.offsets = p.device_offsets ? nullptr : s.offsets.data();
  p.nprobe = c.nprobe;
  p.hot_begin = s.hot_begin;
  for (size_t l = 0; l + 1 < s.offsets.size(); ++l) p.longest = std::max(p.longest, s.offsets[l + 1] - s.offsets[l]);
  SearchArgs a;
  a.store = &s.view;
  a.mirror = on_gpu ? s.mirror.get() : nullptr;
  a.queries = c.q;
  a.nq = c.nq;
  a.k = c.k;
  a.allow = c.rank == Rank::allow ? c.allow->data() : nullptr;
  a.apply_bias = c.rank == Rank::bias || c.rank == Rank::act || c.rank == Rank::normalized;
  a.act = activation_of(c.rank);
  a.probe = c.nprobe ? &p : nullptr;
  if (!(on_gpu && c.device)) {
    a.ids = ids.data();
    a.scores = scores.data();
    be.search(a);
    return;
  }
#ifdef MNEMO_TEST_HAVE_CUDART
  mt::Stream st;
  mt::DevBuf dq(c.q, c.nq * s.dim * 4), di(ids.data(), ids.size() * 8), ds(scores.data(), scores.size() * 4);
  ASSERT_TRUE(dq.get() && di.get() && ds.get());
  a.place.on_device = true;
  a.place.stream = st.s;
  a.place.validate = false;
  a.queries = dq.as<float>();
  a.ids = di.as<uint64_t>();
  a.scores = ds.as<float>();
  be.search(a);
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ids.data(), di.get(), ids.size() * 8, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(scores.data(), ds.get(), scores.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
#else
  GTEST_SKIP() << "device placement needs the CUDA runtime in the tests";
#endif
}

// Two result sets alike: per rank the same id, or a near tie (the other
// backend's id at that rank holds, within the tolerance, the same score);
// scores within 1e-5 relative (absolute below 1), or within the query's
// floor (dot products: 1e-5 of the largest sum of |q_i x_i|, the
// contract's bound, as sums in another order differ by that much); padding
// where the other pads. Counts the near-tie swaps.
::testing::AssertionResult same_results(const std::vector<uint64_t>& ia, const std::vector<float>& sa,
                                        const std::vector<uint64_t>& ib, const std::vector<float>& sb, size_t nq,
                                        size_t k, const std::vector<double>& floor, int* swaps) {
  for (size_t qi = 0; qi < nq; ++qi) {
    auto tol = [&](float x) { return std::max(1e-5 * std::max(1.0, std::fabs(double(x))), floor[qi]); };
    for (size_t j = 0; j < k; ++j) {
      const size_t at = qi * k + j;
      if (ia[at] == mnemo::kNoId || ib[at] == mnemo::kNoId) {
        if (ia[at] != ib[at] || !std::isnan(sa[at]) || !std::isnan(sb[at]))
          return ::testing::AssertionFailure() << "query " << qi << " rank " << j << ": ids " << ia[at] << " / "
                                               << ib[at] << ", scores " << sa[at] << " / " << sb[at];
        continue;
      }
      if (!(std::fabs(double(sa[at]) - sb[at]) <= tol(sa[at])))
        return ::testing::AssertionFailure() << "query " << qi << " rank " << j << ": scores " << sa[at] << " / "
                                             << sb[at] << " (ids " << ia[at] << " / " << ib[at] << ")";
      if (ia[at] == ib[at]) continue;
      // A near tie: b's id sits in a's row with a score within tolerance.
      bool tie = false;
      for (size_t o = 0; o < k && !tie; ++o)
        tie = ia[qi * k + o] == ib[at] && std::fabs(double(sa[qi * k + o]) - sb[at]) <= 2 * tol(sb[at]);
      // Or it ranks just past a's k (a's last entry ties with it).
      if (!tie) tie = std::fabs(double(sa[qi * k + k - 1]) - sb[at]) <= 2 * tol(sb[at]);
      if (!tie)
        return ::testing::AssertionFailure() << "query " << qi << " rank " << j << ": ids " << ia[at] << " / " << ib[at]
                                             << " with scores " << sa[at] << " / " << sb[at];
      ++*swaps;
    }
  }
  return ::testing::AssertionSuccess();
}

// Per-query absolute score tolerances (see same_results): for dot
// products 1e-5 of the largest sum of |q_i x_i| over the stored rows.
std::vector<double> floors(const IvfStore& s, const float* q, size_t nq) {
  std::vector<double> f(nq, 0.0);
  if (s.metric != MNEMO_METRIC_DOT) return f;
  for (size_t i = 0; i < nq; ++i)
    for (size_t r = 0; r < s.slots; ++r) {
      double m = 0;
      for (size_t d = 0; d < s.dim; ++d) m += std::fabs(double(q[i * s.dim + d]) * s.val[r * s.dim + d]);
      f[i] = std::max(f[i], 1e-5 * m);
    }
  return f;
}

// The float64 reference of a plain, filtered or biased search: the
// candidates of the query's nprobe best lists (ranked in float64 over the
// centroids) and of the hot tier.
std::vector<ref::Candidate> reference_candidates(const IvfStore& s, const float* q32, uint32_t nprobe, Rank rank,
                                                 const std::vector<uint64_t>& allow) {
  std::vector<double> q(q32, q32 + s.dim);
  std::vector<ref::Candidate> lists;
  for (size_t l = 0; l < s.nlist; ++l) {
    std::vector<double> c(s.cent.begin() + l * s.dim, s.cent.begin() + (l + 1) * s.dim);
    lists.push_back({l, ref::score(s.metric, q.data(), c.data(), s.dim), 0.0});
  }
  lists = ref::rank(s.metric, lists);
  std::vector<bool> probed(s.slots, false);
  for (size_t j = 0; j < nprobe && j < lists.size(); ++j)
    for (size_t r = s.offsets[lists[j].id]; r < s.offsets[lists[j].id + 1]; ++r) probed[r] = true;
  for (size_t r = s.hot_begin; r < s.slots; ++r) probed[r] = true;
  const bool hi = ref::higher_is_better(s.metric);
  std::vector<ref::Candidate> out;
  for (size_t r = 0; r < s.slots; ++r) {
    if (!probed[r] || s.ids[r] == mnemo::kNoId) continue;
    if (rank == Rank::allow && !((allow[r / 64] >> (r % 64)) & 1)) continue;
    const double* x = &s.val[r * s.dim];
    const double raw = ref::score(s.metric, q.data(), x, s.dim);
    double tol = ref::score_tol(s.metric, q.data(), x, s.dim, raw), sc = raw;
    if (rank == Rank::bias) {
      const double b = s.biases[r];
      sc = hi ? raw + b : raw - b;
      tol += std::ldexp(std::fabs(raw) + std::fabs(b), -22);
    }
    out.push_back({s.ids[r], sc, tol});
  }
  return out;
}

struct Case {
  int32_t dtype, metric;
  size_t dim;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return mt::case_name(info.param.dtype, info.param.metric, info.param.dim);
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (int32_t d : mt::storage_dtypes())
    for (int32_t m : mt::metrics())
      for (size_t dim : {37, 768}) v.push_back({d, m, dim});
  return v;
}

// Lists of very different sizes, three of them empty (one first, one
// last); 1037 slots with the hot tier.
const std::vector<size_t> kLists = {0, 3, 150, 1, 0, 400, 37, 64, 0, 250, 5, 90};

class GpuIvf : public ::testing::TestWithParam<Case> {};

// Every k, query count, nprobe and ranking, host calls (and device calls
// for some k), with a hot tier and without one.
TEST_P(GpuIvf, MatchesCpu) {
  REQUIRE_GPU();
  const Case c = GetParam();
  auto rng = mt::rng_for_test();
  for (const size_t hot : {size_t{37}, size_t{0}}) {
    auto s = make_store(gpu, rng, c.dtype, c.metric, c.dim, kLists, hot);
    ASSERT_NE(s->mirror, nullptr);
    ASSERT_NE(s->cmirror, nullptr);
    ASSERT_NE(s->doffsets, nullptr);
    std::vector<uint64_t> allow((s->slots + 63) / 64, 0);
    for (size_t r = 0; r < s->slots; ++r)
      if (mt::rand_below(rng, 5) < 3) allow[r / 64] |= uint64_t{1} << (r % 64);
    int swaps = 0;
    for (const size_t nq : {1, 3, 37}) {
      const std::vector<float> q = make_queries(rng, nq, c.dim);
      const std::vector<double> fl = floors(*s, q.data(), nq);
      for (const uint32_t nprobe : {1u, 3u, static_cast<uint32_t>(s->nlist - 1)}) {
        for (const size_t k : {size_t{1}, size_t{10}, size_t{100}, size_t{300}, s->slots + 5}) {
          for (const Rank rank : {Rank::plain, Rank::allow, Rank::bias, Rank::act, Rank::normalized}) {
            for (const bool device : {false, true}) {
              if (device && k != 10 && k != 300) continue;
              const std::string what = std::string("hot ") + std::to_string(hot) + " nq " + std::to_string(nq) +
                                       " nprobe " + std::to_string(nprobe) + " k " + std::to_string(k) + " " +
                                       rank_name(rank) + (device ? " device" : " host");
              SCOPED_TRACE(what);
              const Call call{q.data(), nq, k, nprobe, rank, &allow, device};
              std::vector<uint64_t> ig, ic;
              std::vector<float> sg, sc;
              run_search(gpu, true, *s, call, ig, sg);
              run_search(cpu, false, *s, call, ic, sc);
              ASSERT_TRUE(same_results(ic, sc, ig, sg, nq, k, fl, &swaps));
              // Plain rankings against the float64 reference too.
              if (rank != Rank::act && rank != Rank::normalized && !device && (nq <= 3 || k == 10)) {
                for (size_t i = 0; i < nq; ++i) {
                  ASSERT_TRUE(mt::check_topk(c.metric,
                                             reference_candidates(*s, q.data() + i * c.dim, nprobe, rank, allow), k,
                                             &ig[i * k], &sg[i * k]))
                      << "query " << i;
                }
              }
            }
          }
        }
      }
    }
    if (swaps) std::printf("[ note ] hot %zu: %d near-tie swaps between the backends\n", hot, swaps);
  }
}

// Every non-empty list probed (nprobe = nlist - 1, the last list empty and
// its centroid the worst for these queries): the index answers as the full
// scan, on each backend.
TEST_P(GpuIvf, AllListsProbedEqualsFullScan) {
  REQUIRE_GPU();
  const Case c = GetParam();
  auto rng = mt::rng_for_test();
  for (const size_t hot : {size_t{29}, size_t{0}}) {
    std::vector<size_t> lists = kLists;
    lists.push_back(0);  // the last list empty
    auto s = make_store(gpu, rng, c.dtype, c.metric, c.dim, lists, hot, true);
    std::vector<uint64_t> allow((s->slots + 63) / 64, ~0ull);
    const auto nprobe = static_cast<uint32_t>(s->nlist - 1);
    for (const size_t nq : {1, 3, 37}) {
      const std::vector<float> q = make_queries(rng, nq, c.dim, true);
      const std::vector<double> fl = floors(*s, q.data(), nq);
      for (const size_t k : {size_t{10}, size_t{100}, s->slots + 5}) {
        for (const Rank rank : {Rank::plain, Rank::bias, Rank::normalized}) {
          for (const bool device : {false, true}) {
            SCOPED_TRACE("hot " + std::to_string(hot) + " nq " + std::to_string(nq) + " k " + std::to_string(k) + " " +
                         rank_name(rank) + (device ? " device" : " host"));
            int swaps = 0;
            std::vector<uint64_t> ii, ifull, ci, cfull;
            std::vector<float> si, sfull, csi, csfull;
            run_search(gpu, true, *s, Call{q.data(), nq, k, nprobe, rank, &allow, device}, ii, si);
            run_search(gpu, true, *s, Call{q.data(), nq, k, 0, rank, &allow, device}, ifull, sfull);
            ASSERT_TRUE(same_results(ifull, sfull, ii, si, nq, k, fl, &swaps));
            if (device) continue;
            run_search(cpu, false, *s, Call{q.data(), nq, k, nprobe, rank, &allow, false}, ci, csi);
            run_search(cpu, false, *s, Call{q.data(), nq, k, 0, rank, &allow, false}, cfull, csfull);
            ASSERT_TRUE(same_results(cfull, csfull, ci, csi, nq, k, fl, &swaps));
            ASSERT_TRUE(same_results(ci, csi, ii, si, nq, k, fl, &swaps));
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuIvf, ::testing::ValuesIn(all_cases()), case_name);

// A query batch large enough for the coarse step's GEMM path (16 queries
// and more) and a larger store whose lists span several scan blocks.
TEST(GpuIvfBatch, LargeBatchMatchesCpu) {
  REQUIRE_GPU();
  auto rng = mt::rng_for_test();
  std::vector<size_t> lists;
  for (size_t l = 0; l < 40; ++l) lists.push_back(l % 7 == 3 ? 0 : 50 + mt::rand_below(rng, 900));
  for (const int32_t dtype : {MNEMO_DTYPE_F32, MNEMO_DTYPE_F16}) {
    auto s = make_store(gpu, rng, dtype, MNEMO_METRIC_COSINE, 768, lists, 301);
    std::vector<uint64_t> allow((s->slots + 63) / 64, ~0ull);
    const std::vector<float> q = make_queries(rng, 150, 768);
    const std::vector<double> fl = floors(*s, q.data(), 150);
    for (const uint32_t nprobe : {2u, 8u}) {
      for (const size_t k : {size_t{7}, size_t{64}}) {
        for (const bool device : {false, true}) {
          SCOPED_TRACE("dtype " + std::to_string(dtype) + " nprobe " + std::to_string(nprobe) + " k " +
                       std::to_string(k) + (device ? " device" : " host"));
          int swaps = 0;
          std::vector<uint64_t> ig, ic;
          std::vector<float> sg, sc;
          const Call call{q.data(), 150, k, nprobe, Rank::bias, &allow, device};
          run_search(gpu, true, *s, call, ig, sg);
          run_search(cpu, false, *s, call, ic, sc);
          ASSERT_TRUE(same_results(ic, sc, ig, sg, 150, k, fl, &swaps));
        }
      }
    }
  }
}

// A few searches over every path (register and shared-memory lists of the
// span scan, the masked large-k path, normalised activation, device
// placement, the coarse step's scan and GEMM paths): small enough for the
// compute-sanitizer runs.
TEST(GpuIvfSmall, EveryPath) {
  REQUIRE_GPU();
  auto rng = mt::rng_for_test();
  auto s = make_store(gpu, rng, MNEMO_DTYPE_F16, MNEMO_METRIC_L2SQ, 37, kLists, 21);
  std::vector<uint64_t> allow((s->slots + 63) / 64, 0);
  for (size_t r = 0; r < s->slots; ++r)
    if (mt::rand_below(rng, 2) == 0) allow[r / 64] |= uint64_t{1} << (r % 64);
  const std::vector<float> q = make_queries(rng, 17, 37);
  struct One {
    size_t nq, k;
    uint32_t nprobe;
    Rank rank;
    bool device;
  };
  for (const One& o : {One{1, 10, 3, Rank::plain, false}, One{3, 100, 2, Rank::allow, true},
                       One{17, 300, 3, Rank::bias, false}, One{3, 20, 11, Rank::act, true},
                       One{17, 50, 3, Rank::normalized, true}, One{1, 5, 1, Rank::normalized, false}}) {
    SCOPED_TRACE("nq " + std::to_string(o.nq) + " k " + std::to_string(o.k) + " " + rank_name(o.rank));
    int swaps = 0;
    std::vector<uint64_t> ig, ic;
    std::vector<float> sg, sc;
    const Call call{q.data(), o.nq, o.k, o.nprobe, o.rank, &allow, o.device};
    run_search(gpu, true, *s, call, ig, sg);
    run_search(cpu, false, *s, call, ic, sc);
    ASSERT_TRUE(same_results(ic, sc, ig, sg, o.nq, o.k, floors(*s, q.data(), o.nq), &swaps));
  }
}

}  // namespace
