// Filtered searches on a GPU store against the model of the header's rules
// and the float64 reference: the selective plan (each query's matching rows
// through the span scan, or query by query past the span scan's k) and the
// masked plan, shared and per-query filters, plain, biased and activation
// ranking. Skips where no GPU is usable.
#include <gtest/gtest.h>

#include "../fields_check.h"

namespace {

using namespace mt::fields;

class GpuFields : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    rt_ = mt::cuda_runtime_or_why(&why);
    if (!rt_) GTEST_SKIP() << why;
  }
  mt::RuntimePtr rt_;
};

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
    const uint64_t nq = 1 + g() % 40;
    std::vector<NodeP> nodes;
    std::vector<std::unique_ptr<FilterPtr>> filters;
    std::vector<const mnemo_filter*> each;
    std::vector<const Node*> per_query;
    for (uint64_t j = 0; j < nq; ++j) {
      if (j > 0 && g() % 3 == 0) {  // the same filter as the query before
        each.push_back(each.back());
        per_query.push_back(per_query.back());
        continue;
      }
      nodes.push_back(random_node(g, fx.mems, 1));
      filters.push_back(std::make_unique<FilterPtr>(*nodes.back()));
      each.push_back(filters.back()->f);
      per_query.push_back(nodes.back().get());
    }
    mnemo_search_options o = mnemo_search_options_default();
    o.where_each = each.data();
    check_search(fx, per_query, o, 1 + g() % 100, g);
  }
}

// k past the span scan's lists: the selective plan goes query by query
// through the masked search; every match up to k still comes back.
TEST_F(GpuFields, LargeKOnASelectiveFilter) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 9000, 16, rt_.get());
  auto n = std::make_shared<Node>();
  n->kind = Node::tags_any;
  n->strs = {"red"};
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
  auto n = std::make_shared<Node>();
  n->kind = Node::tags_all;
  n->strs = {"blue"};
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

}  // namespace
