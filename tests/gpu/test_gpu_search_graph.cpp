// Host calls replayed as CUDA graphs (kernels/device/graph_cache.h). A host search
// of few queries runs plainly the first time its key is seen, is captured
// into a graph the second time and replayed after; none of this may show in
// the results. Checked bit for bit against the first (plain) call and
// against the first call on a fresh store rebuilt by the same writes (a key
// no call has used, so no graph), and against the float64 reference: over
// repeated calls, new queries and filters between replays, writes in place
// (upserts, tombstones, biases, times: the same graph must read the new
// contents), growth (new device buffers) and compaction (fewer slots),
// changes of k and of the query count, more keys than a context keeps
// graphs for, several stores and threads, larger calls in between that grow
// the context's buffers, and awkward sizes (N below a warp, N = 10007, dim
// 100 with padded rows). Outputs are poisoned before every call. Skips,
// saying why, where no CUDA backend can be created.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../store_model.h"
#include "../topk_check.h"

#ifdef MNEMO_TEST_HAVE_CUDART
#include "dev_buf.h"
#endif

namespace {

using mt::Buf;
using mt::Matrix;
using mt::Results;
using mt::StoreModel;

const int32_t kF32 = MNEMO_DTYPE_F32, kF16 = MNEMO_DTYPE_F16, kBF16 = MNEMO_DTYPE_BF16;
const int32_t kCos = MNEMO_METRIC_COSINE, kDot = MNEMO_METRIC_DOT, kL2 = MNEMO_METRIC_L2SQ;
constexpr double kNow = 1.7e9;

#define REQUIRE_CUDA(rt)                    \
  std::string why_;                         \
  auto rt = mt::cuda_runtime_or_why(&why_); \
  if (!rt) GTEST_SKIP() << "no CUDA backend on this machine: " << why_

std::vector<uint64_t> spread_ids(std::mt19937_64& rng, size_t n, std::set<uint64_t>* used) {
  std::vector<uint64_t> ids;
  while (ids.size() < n) {
    const uint64_t id = rng() >> 1;
    if (used->insert(id).second) ids.push_back(id);
  }
  return ids;
}

// n distinct ids drawn from `from`.
std::vector<uint64_t> pick(std::mt19937_64& rng, std::vector<uint64_t> from, size_t n) {
  std::shuffle(from.begin(), from.end(), rng);
  from.resize(std::min(n, from.size()));
  return from;
}

// A search with poisoned outputs: ids 0xAB bytes, scores a quiet NaN that no
// search writes.
mnemo_status search(const mnemo_store* s, const Matrix& q, size_t k, const mnemo_search_options* o, Results* r) {
  r->nq = q.rows;
  r->k = k;
  r->ids = Buf<uint64_t>(q.rows * k, 0xAB);
  r->scores = Buf<float>(q.rows * k);
  mt::poison_f32(r->scores.data(), q.rows * k);
  return mnemo_store_search(s, static_cast<const float*>(q.data()), q.rows, k, o, r->ids.data(), r->scores.data());
}

mnemo_search_options with_bias(bool apply_bias) {
  mnemo_search_options o = mnemo_search_options_default();
  o.apply_bias = apply_bias ? 1 : 0;
  return o;
}

// A GPU store and its float64 model whose writes are recorded, so that a
// store with the same contents and slot layout can be rebuilt at any point:
// the first search of that store has a key no call has used, so it runs
// without a graph and gives the plain bits.
class Recorded {
 public:
  Recorded(mnemo_runtime* rt, size_t dim, int32_t dtype, int32_t metric)
      : model(dim, dtype, metric), rt_(rt), dim_(dim), dtype_(dtype), metric_(metric) {
    store = make();
  }

  void add(const std::vector<uint64_t>& ids, Matrix m) {
    model.add(ids, m);
    auto held = std::make_shared<Matrix>(std::move(m));
    write([ids, held](mnemo_store* s) { return mt::store_add(s, ids, *held); });
  }
  void remove(const std::vector<uint64_t>& ids) {
    model.remove(ids);
    write([ids](mnemo_store* s) { return mt::store_remove(s, ids, nullptr); });
  }
  void set_bias(const std::vector<uint64_t>& ids, const std::vector<float>& biases) {
    for (size_t i = 0; i < ids.size(); ++i) model.set_bias(ids[i], biases[i]);
    write([ids, biases](mnemo_store* s) { return mt::store_set_bias(s, ids, biases); });
  }
  // apply = false records times a touching search already set.
  void set_times(const std::vector<uint64_t>& ids, const std::vector<double>& t, bool apply = true) {
    auto w = [ids, t](mnemo_store* s) {
      Buf<uint64_t> bi(ids.size());
      Buf<double> bt(t.size());
      std::copy(ids.begin(), ids.end(), bi.data());
      std::copy(t.begin(), t.end(), bt.data());
      return mnemo_store_set_times(s, bi.data(), bt.data(), ids.size());
    };
    if (apply) EXPECT_OK(w(store.get()));
    writes_.push_back(w);
  }
  void set_importance(const std::vector<uint64_t>& ids, const std::vector<float>& imp) {
    write([ids, imp](mnemo_store* s) {
      Buf<uint64_t> bi(ids.size());
      Buf<float> bm(imp.size());
      std::copy(ids.begin(), ids.end(), bi.data());
      std::copy(imp.begin(), imp.end(), bm.data());
      return mnemo_store_set_importance(s, bi.data(), bm.data(), ids.size());
    });
  }

  // The same search on a fresh store rebuilt by every write so far.
  void plain(const Matrix& q, size_t k, const mnemo_search_options* o, Results* r) {
    twins_.push_back(make());
    ASSERT_TRUE(twins_.back());
    for (auto& w : writes_) ASSERT_OK(w(twins_.back().get()));
    ASSERT_OK(search(twins_.back().get(), q, k, o, r));
  }

  StoreModel model;
  mt::StorePtr store;

 private:
  mt::StorePtr make() const { return mt::make_store(dim_, dtype_, metric_, rt_); }
  void write(std::function<mnemo_status(mnemo_store*)> w) {
    EXPECT_OK(w(store.get()));
    writes_.push_back(std::move(w));
  }

  mnemo_runtime* rt_;
  size_t dim_;
  int32_t dtype_, metric_;
  std::vector<std::function<mnemo_status(mnemo_store*)>> writes_;
  // Kept to the end: a freed store's addresses could come back under a key
  // already seen, and its first search would then not be plain.
  std::vector<mt::StorePtr> twins_;
};

// Searches q `calls` times (each call plain, captured or replayed, as its
// key was seen before): every call gives the bits of the first and of the
// first (plain) call on the rebuilt store, and the first matches the
// reference.
void expect_stable(Recorded& st, const Matrix& q, size_t k, const mnemo_search_options& o, const std::string& what,
                   const std::set<uint64_t>* allow = nullptr, int calls = 5) {
  Results first;
  ASSERT_OK(search(st.store.get(), q, k, &o, &first));
  mt::expect_results(st.model, q, first, o.apply_bias != 0, allow);
  for (int i = 1; i < calls; ++i) {
    Results r;
    ASSERT_OK(search(st.store.get(), q, k, &o, &r));
    EXPECT_TRUE(mt::same_results(r, first)) << what << ": call " << i << " differs from the first";
  }
  Results p;
  st.plain(q, k, &o, &p);
  EXPECT_TRUE(mt::same_results(p, first)) << what << ": differs from a fresh store's plain call";
}

struct Shape {
  size_t n, dim;
  int32_t dtype, metric;
  size_t nq, k;
};

std::string name_of(const Shape& c) {
  return mt::case_name(c.dtype, c.metric, c.dim) + "_n" + std::to_string(c.n) + "_q" + std::to_string(c.nq) + "_k" +
         std::to_string(c.k);
}

// Every shape the graph path takes (and a query batch that it does not):
// N below a warp, k = N and k > N, dim 100 (rows padded to 104), generic and
// specialised dims, register and shared-memory lists, k at the small-list
// limit, one to fifteen queries (one to four scan launches).
TEST(GpuSearchGraph, RepeatedCallsMatchFirstAndReference) {
  REQUIRE_CUDA(rt);
  auto rng = mt::rng_for_test();
  const std::vector<Shape> shapes = {
      {10000, 768, kF32, kCos, 1, 10}, {10007, 768, kF16, kDot, 2, 10}, {10007, 100, kBF16, kL2, 3, 33},
      {31, 5, kF32, kCos, 1, 31},      {20, 3, kF16, kL2, 2, 25},       {7, 100, kF32, kDot, 3, 1},
      {1000, 1536, kF32, kL2, 1, 256}, {3001, 384, kBF16, kCos, 5, 7},  {600, 127, kF32, kCos, 15, 12},
      {5000, 512, kF16, kL2, 16, 10},
  };
  for (const Shape& c : shapes) {
    SCOPED_TRACE(name_of(c));
    const bool unit = c.metric == kDot;
    Recorded st(rt.get(), c.dim, c.dtype, c.metric);
    ASSERT_TRUE(st.store);
    std::set<uint64_t> used;
    const auto ids = spread_ids(rng, c.n, &used);
    st.add(ids, mt::random_matrix(rng, kF32, c.n, c.dim, unit));
    // Upserts, tombstones (below the compaction threshold) and biases.
    const size_t few = std::max<size_t>(1, c.n / 10);
    const auto up = pick(rng, ids, few);
    st.add(up, mt::random_matrix(rng, kF32, up.size(), c.dim, unit));
    st.remove(pick(rng, ids, few));
    const auto live = st.model.ids();
    const auto biased = pick(rng, live, few);
    std::vector<float> bias;
    for (size_t i = 0; i < biased.size(); ++i) bias.push_back(0.3f * mt::rand_nonzero(rng));
    st.set_bias(biased, bias);
    for (const bool apply_bias : {false, true}) {
      const mnemo_search_options o = with_bias(apply_bias);
      const Matrix q = mt::random_matrix(rng, kF32, c.nq, c.dim, unit);
      expect_stable(st, q, c.k, o, apply_bias ? "biased" : "plain");
      // New queries of the same shape: the replay uploads them.
      const Matrix q2 = mt::random_matrix(rng, kF32, c.nq, c.dim, unit);
      expect_stable(st, q2, c.k, o, "new queries", nullptr, 3);
      expect_stable(st, q, c.k, o, "the first queries again", nullptr, 2);
    }
  }
}

// Writes between replays: in place (the key stays, the graph reads the new
// contents), growth (new device buffers) and compaction (fewer slots).
TEST(GpuSearchGraph, StoreWritesBetweenReplays) {
  REQUIRE_CUDA(rt);
  auto rng = mt::rng_for_test();
  const std::vector<Shape> shapes = {{5000, 96, kF32, kCos, 2, 10}, {5000, 100, kF16, kL2, 3, 40}};
  for (const Shape& c : shapes) {
    SCOPED_TRACE(name_of(c));
    Recorded st(rt.get(), c.dim, c.dtype, c.metric);
    ASSERT_TRUE(st.store);
    std::set<uint64_t> used;
    const auto ids = spread_ids(rng, c.n, &used);
    st.add(ids, mt::random_matrix(rng, kF32, c.n, c.dim));
    const mnemo_search_options o = with_bias(true);
    auto queries = [&] { return mt::random_matrix(rng, kF32, c.nq, c.dim); };
    expect_stable(st, queries(), c.k, o, "initial");

    // Upserts in place; the first query is one of the new rows, so the
    // change decides its first result.
    const auto up = pick(rng, st.model.ids(), 200);
    Matrix rows = mt::random_matrix(rng, kF32, up.size(), c.dim);
    Matrix q = queries();
    for (size_t j = 0; j < c.dim; ++j) q.set(0, j, static_cast<float>(rows.row(7)[j]));
    st.add(up, std::move(rows));
    expect_stable(st, q, c.k, o, "after upserts in place");

    const auto biased = pick(rng, st.model.ids(), 300);
    std::vector<float> bias;
    for (size_t i = 0; i < biased.size(); ++i) bias.push_back(0.5f * mt::rand_nonzero(rng));
    st.set_bias(biased, bias);
    expect_stable(st, queries(), c.k, o, "after new biases");

    st.remove(pick(rng, st.model.ids(), 200));  // tombstones
    expect_stable(st, queries(), c.k, o, "after tombstones");

    const auto more = spread_ids(rng, 20000, &used);  // the device buffers grow
    st.add(more, mt::random_matrix(rng, kF32, more.size(), c.dim));
    expect_stable(st, queries(), c.k, o, "after growth");

    st.remove(pick(rng, st.model.ids(), st.model.size() * 3 / 5));  // compaction
    expect_stable(st, queries(), c.k, o, "after compaction");

    const auto few = spread_ids(rng, 10, &used);  // more slots, same buffers
    st.add(few, mt::random_matrix(rng, kF32, few.size(), c.dim));
    expect_stable(st, queries(), c.k, o, "after a few adds");

    const auto all = st.model.ids();
    st.add(all, mt::random_matrix(rng, kF32, all.size(), c.dim));
    expect_stable(st, queries(), c.k, o, "after upserting every row");
  }
}

// k and the query count change from call to call, with runs of repeats,
// calls off the graph path (k past the small-list limit, query batches)
// and calls that grow the context's buffers (staging included) between
// replays; each answer matches the first of its shape and the reference.
TEST(GpuSearchGraph, KAndQueryCountChanges) {
  REQUIRE_CUDA(rt);
  auto rng = mt::rng_for_test();
  const size_t n = 4000, dim = 64;
  Recorded st(rt.get(), dim, kF32, kDot);
  ASSERT_TRUE(st.store);
  std::set<uint64_t> used;
  st.add(spread_ids(rng, n, &used), mt::random_matrix(rng, kF32, n, dim, true));
  std::map<size_t, Matrix> qs;
  for (const size_t nq : {1, 2, 3, 64}) qs.emplace(nq, mt::random_matrix(rng, kF32, nq, dim, true));
  const std::vector<std::pair<size_t, size_t>> calls = {
      {1, 10},  {1, 10},  {1, 10},  {2, 10},   {1, 1},    {1, 10}, {3, 50}, {3, 50},  {3, 50},
      {1, 10},  {2, 300}, {1, 10},  {3, 50},   {64, 500}, {1, 10}, {3, 50}, {1, 256}, {1, 256},
      {1, 256}, {1, 257}, {1, 256}, {3, 4000}, {2, 4005}, {1, 10}, {2, 10}, {2, 10},  {1, 1},
  };
  const mnemo_search_options o = with_bias(false);
  std::map<std::pair<size_t, size_t>, Results> firsts;
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto [nq, k] = calls[i];
    const std::string what = "call " + std::to_string(i) + ": nq " + std::to_string(nq) + ", k " + std::to_string(k);
    const Matrix& q = qs.at(nq);
    Results r;
    ASSERT_OK(search(st.store.get(), q, k, &o, &r));
    auto it = firsts.find(calls[i]);
    if (it == firsts.end()) {
      mt::expect_results(st.model, q, r, false);
      firsts.emplace(calls[i], std::move(r));
    } else {
      EXPECT_TRUE(mt::same_results(r, it->second)) << what << " differs from the first of its shape";
    }
  }
}

// More keys than a context keeps graphs for, in rounds: keys are evicted,
// seen again, captured again; every answer stays the first's.
TEST(GpuSearchGraph, ManyKeysInRounds) {
  REQUIRE_CUDA(rt);
  auto rng = mt::rng_for_test();
  const size_t n = 2000, dim = 32;
  Recorded st(rt.get(), dim, kF16, kCos);
  ASSERT_TRUE(st.store);
  std::set<uint64_t> used;
  st.add(spread_ids(rng, n, &used), mt::random_matrix(rng, kF32, n, dim));
  const Matrix q = mt::random_matrix(rng, kF32, 2, dim);
  const mnemo_search_options o = with_bias(false);
  std::map<size_t, Results> firsts;
  for (int round = 0; round < 4; ++round)
    for (size_t k = 1; k <= 13; ++k)
      for (int rep = 0; rep < (round % 2 ? 1 : 3); ++rep) {
        Results r;
        ASSERT_OK(search(st.store.get(), q, k, &o, &r));
        auto it = firsts.find(k);
        if (it == firsts.end()) {
          mt::expect_results(st.model, q, r, false);
          firsts.emplace(k, std::move(r));
        } else {
          EXPECT_TRUE(mt::same_results(r, it->second)) << "round " << round << ", k " << k << ", repeat " << rep;
        }
      }
}

// Filters whose bits change between replays (the replay uploads the new
// bitmap), as slot bitmaps and as id lists, allowing fewer than k and none.
TEST(GpuSearchGraph, FiltersChangeBetweenReplays) {
  REQUIRE_CUDA(rt);
  auto rng = mt::rng_for_test();
  const size_t n = 3000, dim = 40;
  Recorded st(rt.get(), dim, kF32, kL2);
  ASSERT_TRUE(st.store);
  std::set<uint64_t> used;
  const auto ids = spread_ids(rng, n, &used);
  st.add(ids, mt::random_matrix(rng, kF32, n, dim));
  st.remove(pick(rng, ids, 100));
  uint64_t slots = 0;
  ASSERT_OK(mnemo_store_slot_count(st.store.get(), &slots));
  const auto live = st.model.ids();
  std::map<uint64_t, uint64_t> slot_of;
  for (const uint64_t id : live) ASSERT_OK(mnemo_store_slot_of(st.store.get(), id, &slot_of[id]));
  auto subset = [&](size_t count) {
    const auto p = pick(rng, live, count);
    return std::set<uint64_t>(p.begin(), p.end());
  };
  const std::vector<std::set<uint64_t>> sets = {subset(1000), subset(1000), subset(5), {}, subset(2500)};
  for (size_t nq = 1; nq <= 3; ++nq) {
    const Matrix q = mt::random_matrix(rng, kF32, nq, dim);
    for (size_t i = 0; i < sets.size(); ++i) {
      const std::set<uint64_t>& allow = sets[i];
      const std::string what = "nq " + std::to_string(nq) + ", filter " + std::to_string(i);
      Buf<uint64_t> bm((slots + 63) / 64 + 1, 0);
      for (const uint64_t id : allow) bm[slot_of[id] / 64] |= uint64_t{1} << (slot_of[id] % 64);
      mnemo_search_options o = mnemo_search_options_default();
      o.filter_kind = MNEMO_FILTER_SLOT_BITMAP;
      o.filter_bitmap = bm.data();
      o.filter_count = slots;
      expect_stable(st, q, 10, o, what + " (bitmap)", &allow, 3);
      Buf<uint64_t> fid(std::max<size_t>(allow.size(), 1));
      std::copy(allow.begin(), allow.end(), fid.data());
      o = mnemo_search_options_default();
      o.filter_kind = MNEMO_FILTER_IDS;
      o.filter_ids = fid.data();
      o.filter_count = allow.size();
      expect_stable(st, q, 10, o, what + " (ids)", &allow, 3);
      // Unfiltered between filtered replays.
      expect_stable(st, q, 10, with_bias(false), what + " (none)", nullptr, 2);
    }
  }
}

// Two stores searched in turn on one runtime (one context): each keeps its
// own graph.
TEST(GpuSearchGraph, StoresInTurn) {
  REQUIRE_CUDA(rt);
  auto rng = mt::rng_for_test();
  const size_t dim = 768;
  Recorded a(rt.get(), dim, kF32, kCos), b(rt.get(), dim, kF16, kCos);
  ASSERT_TRUE(a.store && b.store);
  std::set<uint64_t> used;
  a.add(spread_ids(rng, 2000, &used), mt::random_matrix(rng, kF32, 2000, dim));
  b.add(spread_ids(rng, 3000, &used), mt::random_matrix(rng, kF32, 3000, dim));
  const Matrix q = mt::random_matrix(rng, kF32, 1, dim);
  const mnemo_search_options o = with_bias(false);
  Results fa, fb;
  ASSERT_OK(search(a.store.get(), q, 10, &o, &fa));
  ASSERT_OK(search(b.store.get(), q, 10, &o, &fb));
  mt::expect_results(a.model, q, fa, false);
  mt::expect_results(b.model, q, fb, false);
  for (int i = 0; i < 6; ++i) {
    Results ra, rb;
    ASSERT_OK(search(a.store.get(), q, 10, &o, &ra));
    ASSERT_OK(search(b.store.get(), q, 10, &o, &rb));
    EXPECT_TRUE(mt::same_results(ra, fa)) << "store a, round " << i;
    EXPECT_TRUE(mt::same_results(rb, fb)) << "store b, round " << i;
  }
}

// Plain activation ranking: a fixed `now` replays; new times (set, or
// touched by a search) are read by the replay; a `now` that moves every call
// still gives the plain answer.
TEST(GpuSearchGraph, ActivationReplays) {
  REQUIRE_CUDA(rt);
  auto rng = mt::rng_for_test();
  const size_t n = 3000, dim = 64;
  Recorded st(rt.get(), dim, kF32, kCos);
  ASSERT_TRUE(st.store);
  std::set<uint64_t> used;
  const auto ids = spread_ids(rng, n, &used);
  st.add(ids, mt::random_matrix(rng, kF32, n, dim));
  std::vector<double> t;
  std::vector<float> imp;
  for (size_t i = 0; i < n; ++i) {
    t.push_back(kNow - 1e6 * std::fabs(mt::rand_nonzero(rng)));
    imp.push_back(std::fabs(mt::rand_nonzero(rng)));
  }
  st.set_times(ids, t);
  st.set_importance(ids, imp);
  mnemo_search_options o = mnemo_search_options_default();
  o.activation = 1;
  o.w_relevance = 1.0f;
  o.w_recency = 0.5f;
  o.w_importance = 0.1f;
  o.half_life = 36000.0;
  o.now = kNow;
  auto same_as_plain = [&](const Matrix& q, int calls, const std::string& what) {
    Results first;
    ASSERT_OK(search(st.store.get(), q, 10, &o, &first));
    for (int i = 1; i < calls; ++i) {
      Results r;
      ASSERT_OK(search(st.store.get(), q, 10, &o, &r));
      EXPECT_TRUE(mt::same_results(r, first)) << what << ": call " << i << " differs from the first";
    }
    Results p;
    st.plain(q, 10, &o, &p);
    EXPECT_TRUE(mt::same_results(p, first)) << what << ": differs from a fresh store's plain call";
  };
  const Matrix q = mt::random_matrix(rng, kF32, 2, dim);
  same_as_plain(q, 5, "fixed now");
  o.apply_bias = 1;
  same_as_plain(q, 4, "fixed now, biased");
  o.apply_bias = 0;

  const auto recent = pick(rng, ids, 200);
  st.set_times(recent, std::vector<double>(recent.size(), kNow - 10.0));
  same_as_plain(q, 4, "after new times");

  // A touching search sets its results' times to now.
  mnemo_search_options touch = o;
  touch.touch = 1;
  Results touched;
  ASSERT_OK(search(st.store.get(), q, 10, &touch, &touched));
  std::set<uint64_t> hit(touched.ids.data(), touched.ids.data() + touched.nq * touched.k);
  hit.erase(MNEMO_NO_ID);
  const std::vector<uint64_t> hit_ids(hit.begin(), hit.end());
  st.set_times(hit_ids, std::vector<double>(hit_ids.size(), kNow), false);
  same_as_plain(q, 4, "after a touching search");

  for (int i = 0; i < 4; ++i) {
    o.now = kNow + 100.0 * (i + 1);
    same_as_plain(q, 2, "moving now " + std::to_string(i));
  }
}

// Several threads (so several contexts, each with its own graphs) replaying
// at once agree with the single-threaded answers.
TEST(GpuSearchGraph, ConcurrentReplaysAgree) {
  REQUIRE_CUDA(rt);
  auto rng = mt::rng_for_test();
  const size_t n = 20000, dim = 128;
  Recorded st(rt.get(), dim, kF16, kCos);
  ASSERT_TRUE(st.store);
  std::set<uint64_t> used;
  st.add(spread_ids(rng, n, &used), mt::random_matrix(rng, kF32, n, dim));
  std::vector<Matrix> qs;
  std::vector<Results> base(3);
  const mnemo_search_options o = with_bias(false);
  for (size_t nq = 1; nq <= 3; ++nq) {
    qs.push_back(mt::random_matrix(rng, kF32, nq, dim));
    ASSERT_OK(search(st.store.get(), qs.back(), 20, &o, &base[nq - 1]));
    mt::expect_results(st.model, qs.back(), base[nq - 1], false);
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 30; ++i) {
        const size_t which = static_cast<size_t>(t + i) % 3;
        Results r;
        if (search(st.store.get(), qs[which], 20, &o, &r) != MNEMO_OK || !mt::same_results(r, base[which])) ++bad;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}

#ifdef MNEMO_TEST_HAVE_CUDART
// Device-pointer searches between host replays use the same contexts and
// grow their buffers: the host replays still give the first answer.
TEST(GpuSearchGraph, DeviceCallsBetweenReplays) {
  REQUIRE_CUDA(rt);
  auto rng = mt::rng_for_test();
  const size_t n = 5000, dim = 768;
  Recorded st(rt.get(), dim, kF32, kCos);
  ASSERT_TRUE(st.store);
  std::set<uint64_t> used;
  st.add(spread_ids(rng, n, &used), mt::random_matrix(rng, kF32, n, dim));
  const Matrix q = mt::random_matrix(rng, kF32, 1, dim);
  const mnemo_search_options o = with_bias(false);
  Results first;
  ASSERT_OK(search(st.store.get(), q, 10, &o, &first));
  mt::expect_results(st.model, q, first, false);
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 3; ++i) {
      Results r;
      ASSERT_OK(search(st.store.get(), q, 10, &o, &r));
      EXPECT_TRUE(mt::same_results(r, first)) << "round " << round << ", call " << i;
    }
    const size_t nq = 8 + 16 * static_cast<size_t>(round), k = 50 + 100 * static_cast<size_t>(round);
    const Matrix dq = mt::random_matrix(rng, kF32, nq, dim);
    mt::DevBuf qd(dq.data(), nq * dim * 4), di(nq * k * 8), ds(nq * k * 4);
    mt::Stream s;
    ASSERT_OK(
        mnemo_store_search_device(st.store.get(), qd.as<float>(), nq, k, &o, di.as<uint64_t>(), ds.as<float>(), s.s));
    ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
  }
}
#endif

}  // namespace
