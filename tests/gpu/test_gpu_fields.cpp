// Filtered searches on a GPU store against the model of the header's rules
// and the float64 reference: filters evaluated on the device (programs over
// the store's field columns, following every change of the fields), the
// host's plans where the device's do not serve (k past the span scan's
// lists, programs too deep), shared and per-query filters, plain, biased
// and activation ranking. Skips where no GPU is usable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "../fields_check.h"
#include "cuda_fixture.h"

namespace {

using namespace mt::fields;

mnemo_store_statistics stats_of(const Fixture& fx) {
  mnemo_store_statistics st{};
  st.struct_size = sizeof st;
  EXPECT_EQ(mnemo_store_stats(fx.store.get(), &st), MNEMO_OK) << mnemo_last_error();
  return st;
}

// A filter per query for nq queries (where_each): a new one from make(),
// or, one time in `repeat`, the query before's.
struct EachFilter {
  template <class Make>
  EachFilter(std::mt19937_64& g, uint64_t nq, uint64_t repeat, Make make) {
    for (uint64_t j = 0; j < nq; ++j) {
      if (j > 0 && g() % repeat == 0) {
        each.push_back(each.back());
        per_query.push_back(per_query.back());
        continue;
      }
      nodes.push_back(make());
      filters.push_back(std::make_unique<FilterPtr>(*nodes.back()));
      each.push_back(filters.back()->f);
      per_query.push_back(nodes.back().get());
    }
  }
  std::vector<NodeP> nodes;
  std::vector<std::unique_ptr<FilterPtr>> filters;
  std::vector<const mnemo_filter*> each;
  std::vector<const Node*> per_query;
};

class GpuFields : public mt::CudaRuntimeTest {};

TEST_F(GpuFields, FilteredSearchesMatchTheModel) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 1500, 37, rt_.get());
  for (int t = 0; t < 60; ++t) {
    NodeP n = random_node(g, fx.mems, 0);
    FilterPtr f(*n);
    ASSERT_EQ(store_select(fx, f.f), model_select(fx, *n)) << "filter " << t;
    mnemo_search_options o = mnemo_search_options_default();
    o.where = f.f;
    const uint64_t k = 1 + g() % 64;
    check_search(fx, {n.get(), n.get(), n.get(), n.get(), n.get()}, o, k, g);
  }
}

TEST_F(GpuFields, EachQueryItsOwnFilter) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 2000, 20, rt_.get());
  for (int t = 0; t < 8; ++t) {
    const EachFilter e(g, 1 + g() % 40, 3, [&] { return random_node(g, fx.mems, 1); });
    mnemo_search_options o = mnemo_search_options_default();
    o.where_each = e.each.data();
    check_search(fx, e.per_query, o, 1 + g() % 100, g);
  }
}

// k past the span scan's lists: the selective plan goes query by query
// through the masked search; every match up to k still comes back.
TEST_F(GpuFields, LargeKOnASelectiveFilter) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 9000, 16, rt_.get());
  NodeP n = node_of(Node::tags_any, {"red"});
  FilterPtr f(*n);
  mnemo_search_options o = mnemo_search_options_default();
  o.where = f.f;
  const auto want = model_select(fx, *n);
  ASSERT_GT(want.size(), 300u);
  check_search(fx, {n.get(), n.get()}, o, 300, g);
  check_search(fx, {n.get()}, o, want.size() + 7, g);
}

TEST_F(GpuFields, BiasAndActivationOnTheSelectivePlan) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 3000, 24, rt_.get());
  NodeP n = node_of(Node::tags_all, {"blue"});
  FilterPtr f(*n);
  mnemo_search_options o = mnemo_search_options_default();
  o.where = f.f;
  o.activation = 1;
  o.w_relevance = 0.7f;
  o.w_recency = 0.2f;
  o.w_importance = 0.1f;
  o.half_life = 0.5;
  o.now = 1.0;
  const uint64_t k = 20, dim = fx.dim;
  mt::Buf<float> q(dim);
  for (uint64_t d = 0; d < dim; ++d) q[d] = mt::rand_nonzero(g);
  mt::Buf<uint64_t> ids(k);
  mt::Buf<float> scores(k);
  ASSERT_EQ(mnemo_store_search(fx.store.get(), q.data(), 1, k, &o, ids.data(), scores.data()), MNEMO_OK)
      << mnemo_last_error();
  std::vector<double> qd(q.data(), q.data() + dim);
  std::vector<ref::Candidate> cands;
  for (const Mem& m : fx.mems) {
    if (!matches(*n, m)) continue;
    const double s = ref::score(MNEMO_METRIC_COSINE, qd.data(), m.v.data(), dim);
    const double rec = std::pow(2.0, -(1.0 - std::min(m.time, 1.0)) / 0.5);
    const double a = 0.7 * s + 0.2 * rec + 0.1 * m.importance;
    cands.push_back({m.id, a, 1e-5 * 2 + ref::score_tol(MNEMO_METRIC_COSINE, qd.data(), m.v.data(), dim, s)});
  }
  EXPECT_TRUE(mt::check_topk(MNEMO_METRIC_COSINE, cands, k, ids.data(), scores.data()));
}

// The device's columns follow upserts with new fields, removals (a
// compaction among them) and new memories between searches, and every
// filtered search agrees with the model after each change.
TEST_F(GpuFields, DeviceProgramsFollowEveryChange) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 3000, 24, rt_.get());
  auto round = [&](const char* when) {
    SCOPED_TRACE(when);
    // Past k = 128 no query is post-filtered on the host: every one of
    // those is the device's.
    const uint64_t start = stats_of(fx).filtered_on_device;
    uint64_t wide = 0;
    for (int t = 0; t < 30; ++t) {
      NodeP n = random_node(g, fx.mems, 0);
      FilterPtr f(*n);
      mnemo_search_options o = mnemo_search_options_default();
      o.where = f.f;
      const uint64_t k = t % 2 ? 1 + g() % 60 : 129 + g() % 120;
      wide += k > 128 ? 3 : 0;
      check_search(fx, {n.get(), n.get(), n.get()}, o, k, g);
    }
    EXPECT_GE(stats_of(fx).filtered_on_device, start + wide);
    // A filter matching about a tenth of the store, for a few queries: the
    // device's to evaluate (broad ones may be post-filtered on the host).
    NodeP n = node_of(Node::tags_any, {"red"});
    FilterPtr f(*n);
    mnemo_search_options o = mnemo_search_options_default();
    o.where = f.f;
    const uint64_t before = stats_of(fx).filtered_on_device;
    check_search(fx, {n.get(), n.get(), n.get()}, o, 40, g);
    EXPECT_EQ(stats_of(fx).filtered_on_device, before + 3);
  };
  round("first search");
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < fx.mems.size(); i += 7) ids.push_back(fx.mems[i].id);
  add_random(fx, g, ids);
  round("after upserts with new fields");
  // Removing a third compacts the slots (renumbered columns).
  std::vector<uint64_t> gone;
  std::vector<Mem> kept;
  for (size_t i = 0; i < fx.mems.size(); ++i) (i % 3 == 1 ? gone.push_back(fx.mems[i].id) : kept.push_back(fx.mems[i]));
  ASSERT_EQ(mnemo_store_remove(fx.store.get(), gone.data(), gone.size(), nullptr), MNEMO_OK) << mnemo_last_error();
  fx.mems = kept;
  round("after removals");
  std::vector<uint64_t> fresh;
  for (uint64_t i = 0; i < 700; ++i) fresh.push_back(900000 + i * 3);
  add_random(fx, g, fresh);
  round("after new memories");
}

// A filter deeper than a device program holds is evaluated on the host,
// with the same answer.
TEST_F(GpuFields, FiltersTooDeepForAProgramStayCorrect) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 1200, 16, rt_.get());
  NodeP all = node_of(Node::all);
  for (int i = 0; i < 70; ++i)
    all->kids.push_back(node_of(Node::neg, {}, {node_of(Node::tags_any, {i % 2 ? "unknown-tag" : "cyan"})}));
  FilterPtr f(*all);
  mnemo_search_options o = mnemo_search_options_default();
  o.where = f.f;
  const auto st0 = stats_of(fx);
  check_search(fx, {all.get(), all.get()}, o, 30, g);
  const auto st1 = stats_of(fx);
  EXPECT_EQ(st1.filtered_on_device, st0.filtered_on_device);
  EXPECT_EQ(st1.filtered_on_host, st0.filtered_on_host + 2);
}

TEST_F(GpuFields, NumbersCompareExactlyOnTheDevice) { check_exact_numbers(rt_.get()); }

}  // namespace

// The dense plan (kernels/search/filter_dense.h): FAST batches whose tag
// filters match a large share of the store read every row once, each key
// masked by its own query's filter (set algebra over the tags' lists as
// bitmaps). Forced on for every tag program here, and off, each query's
// answer matches the model; programs with other leaves stay on the spans.
NodeP random_tag_node(std::mt19937_64& g, int depth) {
  const int pick = depth > 1 ? static_cast<int>(g() % 2) : static_cast<int>(g() % 6);
  if (pick < 2) {
    NodeP n = node_of(pick == 0 ? Node::tags_any : Node::tags_all);
    const size_t c = g() % 3;
    for (size_t i = 0; i < c; ++i) n->strs.push_back(g() % 9 ? kTags[g() % kTags.size()] : "unknown-tag");
    return n;
  }
  NodeP n = node_of(pick == 2 ? Node::all : pick == 3 ? Node::any : Node::neg);
  const size_t c = n->kind == Node::neg ? 1 : g() % 3;
  for (size_t i = 0; i < c; ++i) n->kids.push_back(random_tag_node(g, depth + 1));
  return n;
}

TEST_F(GpuFields, DensePlanMasksEachQuerysRows) {
  mnemo_runtime_options ro = mnemo_runtime_options_default();
  ro.backend = MNEMO_BACKEND_CUDA;
  ro.precision = MNEMO_PRECISION_FAST;
  mt::RuntimePtr fast = mt::make_runtime(ro);
  ASSERT_TRUE(fast);
  auto g = mt::rng_for_test();
  for (const uint64_t dim : {64u, 37u, 200u}) {
    Fixture fx = make_fixture(g, 2500 + g() % 1000, dim, fast.get());
    // Dense for every tag program, in chunks of 16 queries (each chunk
    // with its own masks and uploads), in whole chunks, and off.
    for (const char* share : {"1000000", "1000000", "0"}) {
      ASSERT_EQ(setenv("MNEMO_FILTER_DENSE", share, 1), 0);
      if (std::string(share) != "0" && !getenv("MNEMO_DENSE_CHUNK"))
        ASSERT_EQ(setenv("MNEMO_DENSE_CHUNK", "16", 1), 0);
      else
        ASSERT_EQ(unsetenv("MNEMO_DENSE_CHUNK"), 0);
      // Now and then a leaf the masks do not take (the query goes to the
      // spans beside the dense ones).
      const EachFilter e(g, 40 + g() % 90, 4,
                         [&] { return g() % 8 ? random_tag_node(g, 0) : random_node(g, fx.mems, 1); });
      mnemo_search_options o = mnemo_search_options_default();
      o.where_each = e.each.data();
      check_search(fx, e.per_query, o, 1 + g() % 16, g);
    }
  }
  unsetenv("MNEMO_FILTER_DENSE");
  unsetenv("MNEMO_DENSE_CHUNK");
}
