// The inverted-file index through the C ABI: with every list probed the
// results are the exact scan's (ids and scores, every dtype and metric, with
// filters, bias and activation); fresh and upserted memories are found at
// any nprobe; removes, compaction, rebuilds, sharding and save/open keep
// the layout; bad options are refused.
#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "support.h"

namespace {

using mt::Buf;

// A Gaussian mixture: `clusters` centres in [-1, 1], each with its own
// scale, plus a shared noise floor.
struct Mixture {
  size_t dim;
  std::vector<float> centres, scales;
  Mixture(std::mt19937_64& rng, size_t clusters, size_t d) : dim(d), centres(clusters * d), scales(clusters) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f), s(0.05f, 0.3f);
    for (float& c : centres) c = u(rng);
    for (float& c : scales) c = s(rng);
  }
  void draw(std::mt19937_64& rng, float* out, size_t n) const {
    std::normal_distribution<float> g(0.0f, 1.0f);
    const size_t k = scales.size();
    for (size_t i = 0; i < n; ++i) {
      const size_t c = mt::rand_below(rng, k);
      for (size_t j = 0; j < dim; ++j) out[i * dim + j] = centres[c * dim + j] + scales[c] * g(rng) + 0.02f * g(rng);
    }
  }
};

struct Results {
  std::vector<uint64_t> ids;
  std::vector<float> scores;
};

Results search(mnemo_store* s, const Buf<float>& q, uint64_t nq, uint64_t k, mnemo_search_options o) {
  Buf<uint64_t> ids(nq * k);
  Buf<float> scores(nq * k);
  mt::poison_f32(scores.data(), nq * k);
  EXPECT_OK(mnemo_store_search(s, q.data(), nq, k, &o, ids.data(), scores.data()));
  Results r;
  r.ids.assign(ids.data(), ids.data() + nq * k);
  r.scores.assign(scores.data(), scores.data() + nq * k);
  return r;
}

void expect_same(const Results& a, const Results& b, const std::string& what) {
  ASSERT_EQ(a.ids.size(), b.ids.size());
  for (size_t i = 0; i < a.ids.size(); ++i) {
    ASSERT_EQ(a.ids[i], b.ids[i]) << what << " at " << i;
    if (std::isnan(b.scores[i]))
      ASSERT_TRUE(std::isnan(a.scores[i])) << what << " at " << i;
    else
      ASSERT_EQ(a.scores[i], b.scores[i]) << what << " at " << i;
  }
}

mnemo_index_info info_of(mnemo_store* s) {
  mnemo_index_info i;
  std::memset(&i, 0, sizeof i);
  i.struct_size = sizeof i;
  EXPECT_OK(mnemo_store_index_info(s, &i));
  return i;
}

mnemo_index_options index_opts(uint32_t nlist) {
  mnemo_index_options o = mnemo_index_options_default();
  o.nlist = nlist;
  o.background = 0;
  return o;
}

// A store of n mixture rows (ids 1000 + i) with times and importance.
mt::StorePtr mixture_store(std::mt19937_64& rng, const Mixture& mix, int32_t dtype, int32_t metric, size_t n,
                           mnemo_runtime* runtime = nullptr) {
  auto s = mt::make_store(mix.dim, dtype, metric, runtime);
  Buf<float> v(n * mix.dim);
  mix.draw(rng, v.data(), n);
  Buf<uint64_t> ids(n);
  Buf<double> times(n);
  Buf<float> imp(n);
  for (size_t i = 0; i < n; ++i) ids[i] = 1000 + i, times[i] = 1e6 + double(i), imp[i] = float(i % 7) / 7.0f;
  EXPECT_OK(mnemo_store_add_memories(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, n, times.data(), imp.data()));
  Buf<float> bias(n);
  for (size_t i = 0; i < n; ++i) bias[i] = 0.01f * float(i % 5);
  EXPECT_OK(mnemo_store_set_bias(s.get(), ids.data(), bias.data(), n));
  return s;
}

class IvfCase : public ::testing::TestWithParam<std::tuple<int32_t, int32_t, size_t>> {};

// Every list probed through the index path returns exactly the exact scan:
// tombstones, an upserted memory, a hot tier, filters, bias, activation.
TEST_P(IvfCase, FullProbeEqualsExactScan) {
  const auto [dtype, metric, dim] = GetParam();
  auto rng = mt::rng_for_test();
  const Mixture mix(rng, 12, dim);
  const size_t n = 1237;
  auto s = mixture_store(rng, mix, dtype, metric, n);
  const mnemo_index_options io = index_opts(17);
  ASSERT_OK(mnemo_store_build_index(s.get(), &io));
  // Tombstones in lists, an upserted memory (moves to the hot tier), new ones.
  std::vector<uint64_t> gone = {1000, 1003, 1100, 1500, 2000};
  uint64_t removed = 0;
  ASSERT_OK(mnemo_store_remove(s.get(), gone.data(), gone.size(), &removed));
  Buf<float> extra(41 * dim);
  mix.draw(rng, extra.data(), 41);
  Buf<uint64_t> extra_ids(41);
  for (size_t i = 0; i < 41; ++i) extra_ids[i] = i == 0 ? 1001 : 5000 + i;
  ASSERT_OK(mnemo_store_add(s.get(), extra_ids.data(), extra.data(), MNEMO_DTYPE_F32, 41));
  const mnemo_index_info info = info_of(s.get());
  EXPECT_EQ(info.nlist, 17u);
  EXPECT_EQ(info.hot, 41u);
  EXPECT_EQ(info.indexed + info.hot, n - 5 + 40);

  const size_t nq = 7;
  Buf<float> q(nq * dim);
  mix.draw(rng, q.data(), nq);
  Buf<uint64_t> allow(300);
  for (size_t i = 0; i < 300; ++i) allow[i] = 1000 + 3 * i;
  for (int variant = 0; variant < 5; ++variant) {
    mnemo_search_options o = mnemo_search_options_default();
    if (variant == 1) o.apply_bias = 1;
    if (variant == 2) o.filter_kind = MNEMO_FILTER_IDS, o.filter_ids = allow.data(), o.filter_count = 300;
    if (variant >= 3) {
      o.activation = 1, o.w_recency = 0.3f, o.w_importance = 0.2f, o.now = 1e6 + 2000.0, o.half_life = 500.0;
      o.apply_bias = 1;
    }
    if (variant == 4) o.normalize = 1;
    for (uint64_t k : {uint64_t{1}, uint64_t{10}, uint64_t{2000}}) {
      for (uint64_t queries : {uint64_t{1}, uint64_t{nq}}) {
        const Results exact = search(s.get(), q, queries, k, o);
        o.nprobe = 17;
        const Results full = search(s.get(), q, queries, k, o);
        o.nprobe = 0;
        expect_same(
            full, exact,
            "variant " + std::to_string(variant) + " k " + std::to_string(k) + " nq " + std::to_string(queries));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ivf, IvfCase,
                         ::testing::Combine(::testing::ValuesIn(mt::storage_dtypes()),
                                            ::testing::ValuesIn(mt::metrics()), ::testing::Values(size_t{37})),
                         [](const auto& p) {
                           return mt::case_name(std::get<0>(p.param), std::get<1>(p.param), std::get<2>(p.param));
                         });
INSTANTIATE_TEST_SUITE_P(IvfWide, IvfCase,
                         ::testing::Combine(::testing::Values(MNEMO_DTYPE_F16), ::testing::Values(MNEMO_METRIC_COSINE),
                                            ::testing::Values(size_t{768})),
                         [](const auto& p) {
                           return mt::case_name(std::get<0>(p.param), std::get<1>(p.param), std::get<2>(p.param));
                         });

TEST(Ivf, RecallOnClusteredData) {
  auto rng = mt::rng_for_test();
  const size_t dim = 32, n = 20000, nq = 50, k = 10;
  const Mixture mix(rng, 64, dim);
  auto s = mixture_store(rng, mix, MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ, n);
  const mnemo_index_options io = index_opts(64);
  ASSERT_OK(mnemo_store_build_index(s.get(), &io));
  Buf<float> q(nq * dim);
  mix.draw(rng, q.data(), nq);
  mnemo_search_options o = mnemo_search_options_default();
  const Results exact = search(s.get(), q, nq, k, o);
  double prev = 0;
  for (uint32_t nprobe : {1u, 4u, 16u}) {
    o.nprobe = nprobe;
    const Results r = search(s.get(), q, nq, k, o);
    size_t hit = 0;
    for (size_t i = 0; i < nq; ++i)
      for (size_t j = 0; j < k; ++j)
        hit += std::count(exact.ids.begin() + i * k, exact.ids.begin() + (i + 1) * k, r.ids[i * k + j]);
    const double recall = double(hit) / double(nq * k);
    EXPECT_GE(recall, prev) << "nprobe " << nprobe;
    prev = recall;
  }
  EXPECT_GE(prev, 0.9) << "recall@10 at nprobe 16 of 64 lists on a 64-cluster mixture";
}

// A memory is found by the search after the write that stored it, at any
// nprobe, and an upserted one by its new vector.
TEST(Ivf, FreshAndUpsertedMemoriesFoundAtNprobe1) {
  auto rng = mt::rng_for_test();
  const size_t dim = 24;
  const Mixture mix(rng, 16, dim);
  for (int32_t metric : mt::metrics()) {
    auto s = mixture_store(rng, mix, MNEMO_DTYPE_F32, metric, 3000);
    const mnemo_index_options io = index_opts(32);
    ASSERT_OK(mnemo_store_build_index(s.get(), &io));
    Buf<float> v(dim);
    for (size_t j = 0; j < dim; ++j) v[j] = 5.0f * mt::rand_nonzero(rng);
    Buf<uint64_t> one(1);
    for (uint64_t id : {uint64_t{77}, uint64_t{1500}}) {  // new, then an indexed one upserted
      one[0] = id;
      ASSERT_OK(mnemo_store_add(s.get(), one.data(), v.data(), MNEMO_DTYPE_F32, 1));
      for (uint32_t nprobe : {1u, 2u, 32u}) {
        mnemo_search_options o = mnemo_search_options_default();
        o.nprobe = nprobe;
        const Results r = search(s.get(), v, 1, 1, o);
        EXPECT_EQ(r.ids[0], id) << mt::metric_name(metric) << " nprobe " << nprobe;
      }
      for (size_t j = 0; j < dim; ++j) v[j] = -v[j] + 0.5f;
    }
    EXPECT_GE(info_of(s.get()).hot, 2u);
  }
}

// Activation with recency: a fresh memory outranks an old, slightly more
// similar one at any nprobe.
TEST(Ivf, RecencyOutranksOldSimilarAtAnyNprobe) {
  auto rng = mt::rng_for_test();
  const size_t dim = 16;
  const Mixture mix(rng, 8, dim);
  auto s = mixture_store(rng, mix, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, 2000);
  Buf<float> q(dim), old_v(dim), new_v(dim);
  mix.draw(rng, q.data(), 1);
  for (size_t j = 0; j < dim; ++j) old_v[j] = q[j], new_v[j] = q[j] + (j == 0 ? 0.05f : 0.0f);
  const uint64_t new_id = 10;
  const double new_t = 1e6 + 5000.0;
  Buf<uint64_t> id(1);
  Buf<double> t(1);
  id[0] = 9, t[0] = 1.0;
  ASSERT_OK(mnemo_store_add_memories(s.get(), id.data(), old_v.data(), MNEMO_DTYPE_F32, 1, t.data(), nullptr));
  const mnemo_index_options io = index_opts(20);
  ASSERT_OK(mnemo_store_build_index(s.get(), &io));
  id[0] = new_id, t[0] = new_t;
  ASSERT_OK(mnemo_store_add_memories(s.get(), id.data(), new_v.data(), MNEMO_DTYPE_F32, 1, t.data(), nullptr));
  for (uint32_t nprobe : {0u, 1u, 3u, 20u}) {
    mnemo_search_options o = mnemo_search_options_default();
    o.nprobe = nprobe;
    o.activation = 1, o.w_relevance = 1.0f, o.w_recency = 0.5f, o.half_life = 3600.0, o.now = new_t;
    const Results r = search(s.get(), q, 1, 2, o);
    EXPECT_EQ(r.ids[0], new_id) << "nprobe " << nprobe;
  }
}

// Removes that compact the store keep the lists; a hot tier past its bound
// rebuilds (inline and in the background) and results stay exact at full
// probe.
TEST(Ivf, CompactionAndRebuilds) {
  auto rng = mt::rng_for_test();
  const size_t dim = 20;
  const Mixture mix(rng, 10, dim);
  for (uint32_t background : {0u, 1u}) {
    auto s = mixture_store(rng, mix, MNEMO_DTYPE_F16, MNEMO_METRIC_DOT, 4000);
    mnemo_index_options io = index_opts(25);
    io.background = background;
    io.rebuild_hot_min = 500;
    io.rebuild_hot_fraction = 0.1;
    ASSERT_OK(mnemo_store_build_index(s.get(), &io));
    std::vector<uint64_t> gone;
    for (uint64_t i = 0; i < 4000; i += 2) gone.push_back(1000 + i);
    uint64_t removed = 0;
    ASSERT_OK(mnemo_store_remove(s.get(), gone.data(), gone.size(), &removed));
    ASSERT_EQ(removed, 2000u);
    Buf<float> q(3 * dim);
    mix.draw(rng, q.data(), 3);
    auto check = [&](const char* when) {
      mnemo_search_options o = mnemo_search_options_default();
      const Results exact = search(s.get(), q, 3, 15, o);
      o.nprobe = info_of(s.get()).nlist;
      expect_same(search(s.get(), q, 3, 15, o), exact, when);
    };
    check("after compaction");
    EXPECT_EQ(info_of(s.get()).builds, 1u);
    // Past the bound: 600 new memories (> max(500, 0.1 * 2000)).
    Buf<float> v(600 * dim);
    mix.draw(rng, v.data(), 600);
    Buf<uint64_t> ids(600);
    for (size_t i = 0; i < 600; ++i) ids[i] = 90000 + i;
    ASSERT_OK(mnemo_store_add(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 600));
    ASSERT_OK(mnemo_store_wait_index(s.get()));
    const mnemo_index_info info = info_of(s.get());
    EXPECT_EQ(info.builds, 2u) << "background " << background;
    EXPECT_EQ(info.hot, 0u);
    EXPECT_EQ(info.indexed, 2600u);
    EXPECT_EQ(info.rebuilding, 0u);
    check("after the rebuild");
    ASSERT_OK(mnemo_store_drop_index(s.get()));
    EXPECT_EQ(info_of(s.get()).nlist, 0u);
    check("after drop");
  }
}

// Searches go on from other threads while writes pass the bound and the
// index is rebuilt in the background.
TEST(Ivf, SearchesDuringBackgroundRebuilds) {
  auto rng = mt::rng_for_test();
  const size_t dim = 16;
  const Mixture mix(rng, 10, dim);
  auto s = mixture_store(rng, mix, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, 3000);
  mnemo_index_options io = index_opts(16);
  io.background = 1;
  io.rebuild_hot_min = 200;
  io.rebuild_hot_fraction = 0.05;
  ASSERT_OK(mnemo_store_build_index(s.get(), &io));
  Buf<float> q(dim);
  mix.draw(rng, q.data(), 1);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread reader([&] {
    Buf<uint64_t> ids(5);
    Buf<float> sc(5);
    mnemo_search_options o = mnemo_search_options_default();
    o.nprobe = 2;
    while (!stop.load())
      if (mnemo_store_search(s.get(), q.data(), 1, 5, &o, ids.data(), sc.data()) != MNEMO_OK) ++failures;
  });
  Buf<float> v(100 * dim);
  Buf<uint64_t> ids(100);
  for (int round = 0; round < 12; ++round) {
    mix.draw(rng, v.data(), 100);
    for (size_t i = 0; i < 100; ++i) ids[i] = 100000 + round * 100 + i;
    ASSERT_OK(mnemo_store_add(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 100));
    // Every memory just written is found at nprobe 1, rebuild or not.
    mnemo_search_options o = mnemo_search_options_default();
    o.nprobe = 1;
    Buf<float> one(dim);
    std::copy(v.data() + 99 * dim, v.data() + 100 * dim, one.data());
    EXPECT_EQ(search(s.get(), one, 1, 1, o).ids[0], ids[99]);
  }
  ASSERT_OK(mnemo_store_wait_index(s.get()));
  stop = true;
  reader.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(info_of(s.get()).builds, 2u);
}

TEST(Ivf, SaveAndOpenKeepTheIndex) {
  auto rng = mt::rng_for_test();
  const size_t dim = 19;
  const Mixture mix(rng, 10, dim);
  auto s = mixture_store(rng, mix, MNEMO_DTYPE_BF16, MNEMO_METRIC_L2SQ, 2500);
  const mnemo_index_options io = index_opts(30);
  ASSERT_OK(mnemo_store_build_index(s.get(), &io));
  Buf<float> extra(10 * dim);
  mix.draw(rng, extra.data(), 10);
  Buf<uint64_t> extra_ids(10);
  for (size_t i = 0; i < 10; ++i) extra_ids[i] = 70000 + i;
  ASSERT_OK(mnemo_store_add(s.get(), extra_ids.data(), extra.data(), MNEMO_DTYPE_F32, 10));
  const std::string path = ::testing::TempDir() + "ivf_save.mnemo";
  ASSERT_OK(mnemo_store_save(s.get(), path.c_str()));
  mnemo_store* raw = nullptr;
  ASSERT_OK(mnemo_store_open(mt::rt(), path.c_str(), &raw));
  mt::StorePtr back(raw);
  const mnemo_index_info a = info_of(s.get()), b = info_of(back.get());
  EXPECT_EQ(b.nlist, a.nlist);
  EXPECT_EQ(b.indexed, a.indexed);
  EXPECT_EQ(b.hot, a.hot);
  Buf<float> q(4 * dim);
  mix.draw(rng, q.data(), 4);
  mnemo_search_options o = mnemo_search_options_default();
  o.nprobe = 3;
  expect_same(search(back.get(), q, 4, 10, o), search(s.get(), q, 4, 10, o), "reopened at nprobe 3");
  std::remove(path.c_str());
}

// With validation off a store may hold non-finite rows; they stay out of
// the centroids' training. A non-finite centroid outlives the rows that
// made it: once they are removed, the store saves, and its next open
// refused the centroid as damage. Every finite row is still found by its
// own vector at nprobe 1.
TEST(Ivf, NonFiniteRowsStayOutOfTheCentroids) {
  auto rng = mt::rng_for_test();
  const size_t dim = 12, n = 1500;
  const Mixture mix(rng, 8, dim);
  mnemo_runtime_options ro = mt::test_options();
  ro.backend = MNEMO_BACKEND_CPU;
  ro.validate = 0;
  auto rt = mt::make_runtime(ro);
  mt::StorePtr s = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ, rt.get());
  Buf<float> rows(n * dim);
  mix.draw(rng, rows.data(), n);
  for (size_t i = 0; i < n; i += 50) rows[i * dim + i % dim] = i % 100 ? NAN : INFINITY;
  Buf<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = 5 + i;
  ASSERT_OK(mnemo_store_add(s.get(), ids.data(), rows.data(), MNEMO_DTYPE_F32, n));
  mnemo_index_options io = index_opts(16);
  io.train_per_list = 200;  // the whole store in the sample, the non-finite rows too
  ASSERT_OK(mnemo_store_build_index(s.get(), &io));
  EXPECT_EQ(info_of(s.get()).nlist, 16u);
  mnemo_search_options o = mnemo_search_options_default();
  o.nprobe = 1;
  size_t lost = 0;
  for (size_t i = 1; i < n; i += 7) {
    if (i % 50 == 0) continue;
    Buf<float> q(dim);
    std::copy(rows.data() + i * dim, rows.data() + (i + 1) * dim, q.data());
    Buf<uint64_t> got(1);
    Buf<float> score(1);
    ASSERT_OK(mnemo_store_search(s.get(), q.data(), 1, 1, &o, got.data(), score.data()));
    lost += got[0] != ids[i];
  }
  EXPECT_EQ(lost, 0u);
  Buf<uint64_t> bad(n / 50);
  for (size_t i = 0; i < n / 50; ++i) bad[i] = ids[i * 50];
  ASSERT_OK(mnemo_store_remove(s.get(), bad.data(), n / 50, nullptr));
  const std::string path = ::testing::TempDir() + "ivf_nonfinite.mnemo";
  ASSERT_OK(mnemo_store_save(s.get(), path.c_str()));
  mnemo_store* raw = nullptr;
  ASSERT_EQ(mnemo_store_open(rt.get(), path.c_str(), &raw), MNEMO_OK) << mnemo_last_error();
  mt::StorePtr back(raw);
  EXPECT_EQ(info_of(back.get()).nlist, 16u);
  std::remove(path.c_str());
}

// A cosine store of n mixture rows on a sharded runtime, indexed with nlist
// lists: the shards share the centroids, every memory is indexed, and a
// full probe of the queries drawn into q (nq of them) equals the exact scan.
// The store is left in *out.
void expect_sharded_full_probe(std::mt19937_64& rng, const Mixture& mix, mnemo_runtime* rt, int32_t dtype, size_t n,
                               uint32_t nlist, Buf<float>& q, uint64_t nq, uint64_t k, const std::string& what,
                               mt::StorePtr* out) {
  *out = mixture_store(rng, mix, dtype, MNEMO_METRIC_COSINE, n, rt);
  mnemo_store* s = out->get();
  const mnemo_index_options io = index_opts(nlist);
  ASSERT_OK(mnemo_store_build_index(s, &io));
  const mnemo_index_info info = info_of(s);
  EXPECT_EQ(info.nlist, nlist);  // centroids shared by the shards
  EXPECT_EQ(info.indexed, n);
  mix.draw(rng, q.data(), nq);
  mnemo_search_options o = mnemo_search_options_default();
  const Results exact = search(s, q, nq, k, o);
  o.nprobe = nlist;
  expect_same(search(s, q, nq, k, o), exact, what);
}

// A store sharded over CPU shards: one set of centroids, each shard's
// own lists; full probe equals the exact scan.
TEST(Ivf, ShardedStore) {
  auto rng = mt::rng_for_test();
  const size_t dim = 21;
  const Mixture mix(rng, 10, dim);
  mnemo_runtime_options ro = mt::test_options();
  ro.backend = MNEMO_BACKEND_CPU;
  ro.cpu_shards = 3;
  auto rt = mt::make_runtime(ro);
  Buf<float> q(5 * dim);
  mt::StorePtr s;
  expect_sharded_full_probe(rng, mix, rt.get(), MNEMO_DTYPE_F32, 3001, 12, q, 5, 20, "sharded, full probe", &s);
}

// A store sharded over every visible GPU (two or more; skipped otherwise):
// one set of centroids, each GPU's own lists, full probe equals the exact
// scan and a fresh memory is found at nprobe 1.
TEST(Ivf, ShardedOverGpus) {
  mnemo_runtime_options ro = mt::test_options();
  ro.backend = MNEMO_BACKEND_CUDA;
  ro.device_count = MNEMO_ALL_DEVICES;
  mnemo_runtime* raw = nullptr;
  if (mnemo_runtime_create(&ro, &raw) != MNEMO_OK) GTEST_SKIP() << "no CUDA runtime: " << mt::last_error();
  mt::RuntimePtr rt(raw);
  mnemo_runtime_report rep;
  std::memset(&rep, 0, sizeof rep);
  rep.struct_size = sizeof rep;
  ASSERT_OK(mnemo_runtime_info(rt.get(), &rep));
  if (rep.device_count < 2) GTEST_SKIP() << "fewer than two GPUs";
  auto rng = mt::rng_for_test();
  const size_t dim = 64;
  const Mixture mix(rng, 20, dim);
  Buf<float> q(9 * dim);
  mt::StorePtr s;
  ASSERT_NO_FATAL_FAILURE(expect_sharded_full_probe(rng, mix, rt.get(), MNEMO_DTYPE_F16, 20011, 40, q, 9, 25,
                                                    "sharded over GPUs, full probe", &s));
  mnemo_search_options o = mnemo_search_options_default();
  Buf<uint64_t> id(1);
  id[0] = 424242;
  ASSERT_OK(mnemo_store_add(s.get(), id.data(), q.data(), MNEMO_DTYPE_F32, 1));
  o.nprobe = 1;
  EXPECT_EQ(search(s.get(), q, 1, 1, o).ids[0], 424242u);
}

TEST(Ivf, BadArguments) {
  auto s = mt::make_store(8, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
  mnemo_index_options o = mnemo_index_options_default();
  o.struct_size = 8;
  EXPECT_TRUE(mt::failed_with(mnemo_store_build_index(s.get(), &o), MNEMO_E_INVALID_ARGUMENT, "struct_size"));
  o = mnemo_index_options_default();
  o.rebuild_hot_fraction = std::nan("");
  EXPECT_TRUE(mt::failed_with(mnemo_store_build_index(s.get(), &o), MNEMO_E_INVALID_ARGUMENT, "rebuild_hot_fraction"));
  o = mnemo_index_options_default();
  o.rebuild_skew = 0;
  EXPECT_TRUE(mt::failed_with(mnemo_store_build_index(s.get(), &o), MNEMO_E_INVALID_ARGUMENT, "rebuild_skew"));
  o = mnemo_index_options_default();
  o.background = 2;
  EXPECT_TRUE(mt::failed_with(mnemo_store_build_index(s.get(), &o), MNEMO_E_INVALID_ARGUMENT, "background"));
  o = mnemo_index_options_default();
  o.nlist = 1u << 23;
  EXPECT_TRUE(mt::failed_with(mnemo_store_build_index(s.get(), &o), MNEMO_E_INVALID_ARGUMENT, "nlist"));
  EXPECT_EQ(info_of(s.get()).nlist, 0u);
  EXPECT_TRUE(mt::failed_with(mnemo_store_build_index(nullptr, nullptr), MNEMO_E_NULL_POINTER));
  EXPECT_TRUE(mt::failed_with(mnemo_store_index_info(s.get(), nullptr), MNEMO_E_NULL_POINTER, "out"));
  mnemo_index_info small;
  small.struct_size = 4;
  EXPECT_TRUE(mt::failed_with(mnemo_store_index_info(s.get(), &small), MNEMO_E_INVALID_ARGUMENT, "struct_size"));
  // An empty store takes an index (no lists: everything is hot).
  ASSERT_OK(mnemo_store_build_index(s.get(), nullptr));
  const mnemo_index_info i = info_of(s.get());
  EXPECT_EQ(i.nlist, 0u);
  EXPECT_EQ(i.builds, 1u);
  Buf<float> q(8);
  for (size_t j = 0; j < 8; ++j) q[j] = 1.0f;
  Buf<uint64_t> ids(2);
  Buf<float> sc(2);
  mnemo_search_options so = mnemo_search_options_default();
  so.reserved2 = 1;
  EXPECT_TRUE(mt::failed_with(mnemo_store_search(s.get(), q.data(), 1, 2, &so, ids.data(), sc.data()),
                              MNEMO_E_INVALID_ARGUMENT, "reserved2"));
  so.reserved2 = 0;
  so.nprobe = 4;
  EXPECT_OK(mnemo_store_search(s.get(), q.data(), 1, 2, &so, ids.data(), sc.data()));
  EXPECT_EQ(ids[0], MNEMO_NO_ID);
}

}  // namespace
