// Sharded stores on the CPU (cpu_shards) against an unsharded store of the
// same memories: every search must agree bit for bit, ties, filters, bias,
// removes that empty a shard, durable files and concurrent use included.
// The GPU form of these checks is tests/gpu/test_gpu_shards.cpp.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <set>
#include <thread>

#include "support.h"

namespace {

using mt::Buf;

#if defined(__SANITIZE_THREAD__)
// libgomp is not instrumented: one thread per runtime keeps OpenMP out, so
// ThreadSanitizer sees only the shards' own threads and locks.
constexpr uint32_t kThreads = 1;
#else
constexpr uint32_t kThreads = 2;
#endif

mt::RuntimePtr cpu_runtime(uint32_t shards, uint32_t threads = kThreads) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CPU;
  o.num_threads = threads;
  o.cpu_shards = shards;
  return mt::make_runtime(o);
}

// Two stores that receive the same writes: one unsharded, one sharded.
struct Pair {
  mt::RuntimePtr rt1, rtn;
  mt::StorePtr one, many;
  uint64_t dim;
  int32_t dtype, metric;

  Pair(uint32_t shards, uint64_t d, int32_t dt, int32_t m) : dim(d), dtype(dt), metric(m) {
    rt1 = cpu_runtime(1);
    rtn = cpu_runtime(shards);
    one = mt::make_store(d, dt, m, rt1.get());
    many = mt::make_store(d, dt, m, rtn.get());
  }
  void add(const std::vector<uint64_t>& ids, const Buf<float>& v) {
    ASSERT_OK(mnemo_store_add(one.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, ids.size()));
    ASSERT_OK(mnemo_store_add(many.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, ids.size()));
  }
  void remove(const std::vector<uint64_t>& ids) {
    uint64_t a = 0, b = 0;
    ASSERT_OK(mnemo_store_remove(one.get(), ids.data(), ids.size(), &a));
    ASSERT_OK(mnemo_store_remove(many.get(), ids.data(), ids.size(), &b));
    EXPECT_EQ(a, b);
  }
  void bias(const std::vector<uint64_t>& ids, const Buf<float>& b) {
    ASSERT_OK(mnemo_store_set_bias(one.get(), ids.data(), b.data(), ids.size()));
    ASSERT_OK(mnemo_store_set_bias(many.get(), ids.data(), b.data(), ids.size()));
  }
};

Buf<float> random_rows(std::mt19937_64& rng, size_t rows, size_t dim) {
  Buf<float> v(rows * dim);
  for (size_t i = 0; i < rows * dim; ++i) v[i] = mt::rand_nonzero(rng);
  return v;
}

std::vector<uint64_t> ids_from(std::mt19937_64& rng, size_t n) {
  std::set<uint64_t> seen;
  std::vector<uint64_t> ids;
  while (ids.size() < n) {
    const uint64_t id = rng() % 100000;  // small ids: ties compare them often
    if (seen.insert(id).second) ids.push_back(id);
  }
  return ids;
}

// Searches both stores (outputs poisoned) and compares every byte.
void expect_same_search(const mnemo_store* a, const mnemo_store* b, const Buf<float>& q, uint64_t nq, uint64_t k,
                        const mnemo_search_options* opts_a, const mnemo_search_options* opts_b, const char* what) {
  Buf<uint64_t> ia(nq * k), ib(nq * k);
  Buf<float> sa(nq * k), sb(nq * k);
  mt::poison_f32(sa.data(), nq * k);
  mt::poison_f32(sb.data(), nq * k);
  ASSERT_OK(mnemo_store_search(a, q.data(), nq, k, opts_a, ia.data(), sa.data()));
  ASSERT_OK(mnemo_store_search(b, q.data(), nq, k, opts_b, ib.data(), sb.data()));
  for (uint64_t i = 0; i < nq * k; ++i) {
    ASSERT_EQ(ia[i], ib[i]) << what << ": query " << i / k << " place " << i % k << " k " << k;
    uint32_t x, y;
    std::memcpy(&x, &sa[i], 4);
    std::memcpy(&y, &sb[i], 4);
    ASSERT_EQ(x, y) << what << ": score bits at query " << i / k << " place " << i % k;
    ASSERT_NE(x, mt::kPoisonF32) << what << ": a score was not written";
  }
}

std::vector<uint64_t> shard_vectors(const mnemo_store* s, uint32_t* shards) {
  mnemo_store_statistics st;
  st.struct_size = sizeof st;
  EXPECT_OK(mnemo_store_stats(s, &st));
  *shards = st.shards;
  return std::vector<uint64_t>(st.shard_vectors, st.shard_vectors + st.shards);
}

// Every search form on both stores of a pair.
void expect_pair_agrees(Pair& p, std::mt19937_64& rng, const std::vector<uint64_t>& live, const char* what) {
  uint64_t n = 0;
  ASSERT_OK(mnemo_store_count(p.many.get(), &n));
  for (const uint64_t nq : {uint64_t{1}, uint64_t{5}, uint64_t{9}}) {
    Buf<float> q = random_rows(rng, nq, p.dim);
    for (const uint64_t k : {uint64_t{1}, uint64_t{7}, n + 3}) {
      expect_same_search(p.one.get(), p.many.get(), q, nq, k, nullptr, nullptr, what);
      mnemo_search_options o = mnemo_search_options_default();
      o.apply_bias = 1;
      expect_same_search(p.one.get(), p.many.get(), q, nq, k, &o, &o, what);
      // An id filter: every third live id, plus ids the store lacks.
      std::vector<uint64_t> allow;
      for (size_t i = 0; i < live.size(); i += 3) allow.push_back(live[i]);
      allow.push_back(999999999);
      Buf<uint64_t> fid(allow.size());
      std::memcpy(fid.data(), allow.data(), allow.size() * 8);
      o.filter_kind = MNEMO_FILTER_IDS;
      o.filter_ids = fid.data();
      o.filter_count = allow.size();
      expect_same_search(p.one.get(), p.many.get(), q, nq, k, &o, &o, what);
      // The same allow-list as slot bitmaps, each in its store's slots.
      uint64_t slots_a = 0, slots_b = 0;
      ASSERT_OK(mnemo_store_slot_count(p.one.get(), &slots_a));
      ASSERT_OK(mnemo_store_slot_count(p.many.get(), &slots_b));
      Buf<uint64_t> ba((slots_a + 63) / 64 + 1, 0), bb((slots_b + 63) / 64 + 1, 0);
      for (size_t i = 0; i + 1 < allow.size(); ++i) {
        uint64_t sa = 0, sb = 0;
        ASSERT_OK(mnemo_store_slot_of(p.one.get(), allow[i], &sa));
        ASSERT_OK(mnemo_store_slot_of(p.many.get(), allow[i], &sb));
        ba[sa / 64] |= uint64_t{1} << (sa % 64);
        bb[sb / 64] |= uint64_t{1} << (sb % 64);
      }
      mnemo_search_options oa = o, ob = o;
      oa.filter_kind = ob.filter_kind = MNEMO_FILTER_SLOT_BITMAP;
      oa.filter_bitmap = ba.data();
      oa.filter_count = slots_a;
      ob.filter_bitmap = bb.data();
      ob.filter_count = slots_b;
      expect_same_search(p.one.get(), p.many.get(), q, nq, k, &oa, &ob, what);
    }
  }
}

class ShardedCpu : public ::testing::TestWithParam<std::tuple<uint32_t, int32_t, int32_t>> {};

TEST_P(ShardedCpu, SameAsUnshardedThroughWritesRemovesAndBias) {
  const auto [shards, dtype, metric] = GetParam();
  auto rng = mt::rng_for_test();
  const uint64_t dim = 37;
  Pair p(shards, dim, dtype, metric);
  std::vector<uint64_t> ids = ids_from(rng, 301);
  Buf<float> v = random_rows(rng, ids.size(), dim);
  // Ties: some rows repeated under other ids, so equal scores meet across
  // shards and the smaller id must win everywhere.
  for (size_t i = 0; i < 40; ++i) std::memcpy(&v[(i + 100) * dim], &v[i * dim], dim * 4);
  p.add(ids, v);
  uint32_t n_shards = 0;
  const auto per = shard_vectors(p.many.get(), &n_shards);
  ASSERT_EQ(n_shards, shards);
  for (uint64_t c : per) EXPECT_LE(c, (ids.size() + shards - 1) / shards) << "shards not balanced by count";
  expect_pair_agrees(p, rng, ids, "after adds");

  // Upserts (with a repeated id in one call), biases, removes.
  std::vector<uint64_t> up(ids.begin(), ids.begin() + 50);
  up.push_back(ids[3]);
  Buf<float> uv = random_rows(rng, up.size(), dim);
  p.add(up, uv);
  std::vector<uint64_t> bid(ids.begin() + 20, ids.begin() + 90);
  Buf<float> b(bid.size());
  for (size_t i = 0; i < bid.size(); ++i) b[i] = mt::rand_nonzero(rng) * 0.5f;
  p.bias(bid, b);
  std::vector<uint64_t> gone(ids.begin() + 150, ids.begin() + 260);
  gone.push_back(424242424);  // not in either store
  p.remove(gone);
  std::vector<uint64_t> live(ids.begin(), ids.begin() + 150);
  live.insert(live.end(), ids.begin() + 260, ids.end());
  expect_pair_agrees(p, rng, live, "after upserts, bias, removes");
}

INSTANTIATE_TEST_SUITE_P(Shards, ShardedCpu,
                         ::testing::Combine(::testing::Values(2u, 3u, 4u), ::testing::ValuesIn(mt::storage_dtypes()),
                                            ::testing::ValuesIn(mt::metrics())));

TEST(ShardedStore, GemmSizedBatchMatchesUnsharded) {
  // Large enough that the unsharded store takes the CPU's sgemm path while
  // each shard of four does not: scores must still agree bit for bit.
  auto rng = mt::rng_for_test();
  const uint64_t dim = 64;
  for (const int32_t metric : mt::metrics()) {
    Pair p(4, dim, MNEMO_DTYPE_F32, metric);
    std::vector<uint64_t> ids = ids_from(rng, 5003);
    Buf<float> v = random_rows(rng, ids.size(), dim);
    p.add(ids, v);
    Buf<float> q = random_rows(rng, 40, dim);
    expect_same_search(p.one.get(), p.many.get(), q, 40, 10, nullptr, nullptr, mt::metric_name(metric));
  }
}

TEST(ShardedStore, ShardEmptiedByRemovesAndRefilled) {
  auto rng = mt::rng_for_test();
  const uint64_t dim = 19;
  Pair p(3, dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE);
  std::vector<uint64_t> ids = ids_from(rng, 90);
  Buf<float> v = random_rows(rng, ids.size(), dim);
  p.add(ids, v);
  // Remove every id of shard 1, found through the slot ranges.
  uint32_t n = 0;
  auto per = shard_vectors(p.many.get(), &n);
  ASSERT_EQ(n, 3u);
  std::vector<uint64_t> in_shard1, rest;
  for (uint64_t id : ids) {
    uint64_t slot = 0;
    ASSERT_OK(mnemo_store_slot_of(p.many.get(), id, &slot));
    (slot >= per[0] && slot < per[0] + per[1] ? in_shard1 : rest).push_back(id);
  }
  ASSERT_EQ(in_shard1.size(), per[1]);
  p.remove(in_shard1);
  per = shard_vectors(p.many.get(), &n);
  EXPECT_EQ(per[1], 0u);
  expect_pair_agrees(p, rng, rest, "one shard empty");
  // New memories go to the emptied shard first.
  std::vector<uint64_t> more = {1000001, 1000002, 1000003};
  Buf<float> mv = random_rows(rng, more.size(), dim);
  p.add(more, mv);
  per = shard_vectors(p.many.get(), &n);
  EXPECT_EQ(per[1], 3u);
  rest.insert(rest.end(), more.begin(), more.end());
  expect_pair_agrees(p, rng, rest, "emptied shard refilled");
  // Everything removed: searches return padding only.
  p.remove(rest);
  expect_pair_agrees(p, rng, {}, "all shards empty");
}

TEST(ShardedStore, GetAndSetBiasAreRoutedAndCheckedFirst) {
  auto rng = mt::rng_for_test();
  const uint64_t dim = 8;
  auto rt = cpu_runtime(4);
  auto s = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, rt.get());
  std::vector<uint64_t> ids = ids_from(rng, 21);
  Buf<float> v = random_rows(rng, ids.size(), dim);
  ASSERT_OK(mnemo_store_add(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, ids.size()));
  Buf<float> got(dim);
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_OK(mnemo_store_get(s.get(), ids[i], got.data()));
    EXPECT_EQ(0, std::memcmp(got.data(), &v[i * dim], dim * 4));
  }
  // One unknown id among known ones: NOT_FOUND naming its position, and no
  // bias changes in any shard.
  Buf<uint64_t> bid(3);
  bid[0] = ids[0];
  bid[1] = ids[1];
  bid[2] = 77777777;
  Buf<float> b(3);
  b[0] = b[1] = b[2] = 5.0f;
  EXPECT_TRUE(mt::failed_with(mnemo_store_set_bias(s.get(), bid.data(), b.data(), 3), MNEMO_E_NOT_FOUND));
  EXPECT_TRUE(mt::names_identifier(mt::last_error(), "ids"));
  Buf<float> q = random_rows(rng, 1, dim);
  Buf<uint64_t> ia(ids.size());
  Buf<float> sa(ids.size()), sb(ids.size());
  mnemo_search_options o = mnemo_search_options_default();
  o.apply_bias = 1;
  ASSERT_OK(mnemo_store_search(s.get(), q.data(), 1, ids.size(), nullptr, ia.data(), sa.data()));
  ASSERT_OK(mnemo_store_search(s.get(), q.data(), 1, ids.size(), &o, ia.data(), sb.data()));
  EXPECT_EQ(0, std::memcmp(sa.data(), sb.data(), ids.size() * 4)) << "a bias changed despite the error";
}

TEST(ShardedStore, DurableOneSnapshotAndJournalForTheWholeStore) {
  auto rng = mt::rng_for_test();
  const uint64_t dim = 24;
  char tmpl[] = "/tmp/mnemo_shards_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/s.mnemo";
  std::vector<uint64_t> ids = ids_from(rng, 120);
  Buf<float> v = random_rows(rng, ids.size(), dim);
  Buf<float> q = random_rows(rng, 6, dim);
  auto rt4 = cpu_runtime(4), rt1 = cpu_runtime(1), rt3 = cpu_runtime(3);
  mnemo_durable_options d = mnemo_durable_options_default();
  d.dim = dim;
  d.metric = MNEMO_METRIC_L2SQ;
  d.sync = MNEMO_SYNC_OS;
  {
    mnemo_store* s = nullptr;
    ASSERT_OK(mnemo_store_open_durable(rt4.get(), path.c_str(), &d, &s));
    mt::StorePtr sp(s);
    ASSERT_OK(mnemo_store_add(s, ids.data(), v.data(), MNEMO_DTYPE_F32, 60));
    ASSERT_OK(mnemo_store_checkpoint(s));
    ASSERT_OK(mnemo_store_add(s, ids.data() + 60, &v[60 * dim], MNEMO_DTYPE_F32, 60));
    uint64_t removed = 0;
    ASSERT_OK(mnemo_store_remove(s, ids.data() + 10, 5, &removed));
    EXPECT_EQ(removed, 5u);
    mnemo_store_statistics st;
    st.struct_size = sizeof st;
    ASSERT_OK(mnemo_store_stats(s, &st));
    EXPECT_EQ(st.durable, 1u);
    EXPECT_EQ(st.shards, 4u);
    EXPECT_EQ(st.journal_records, 2u);
  }
  // The same files open sharded another way and unsharded, all alike.
  mnemo_store *a = nullptr, *b = nullptr;
  ASSERT_OK(mnemo_store_open_durable(rt1.get(), path.c_str(), nullptr, &a));
  mt::StorePtr ap(a);
  uint64_t count = 0;
  ASSERT_OK(mnemo_store_count(a, &count));
  EXPECT_EQ(count, 115u);
  ap.reset();
  ASSERT_OK(mnemo_store_open_durable(rt3.get(), path.c_str(), nullptr, &b));
  mt::StorePtr bp(b);
  auto plain = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ, rt1.get());
  ASSERT_OK(mnemo_store_add(plain.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, ids.size()));
  uint64_t removed = 0;
  ASSERT_OK(mnemo_store_remove(plain.get(), ids.data() + 10, 5, &removed));
  expect_same_search(plain.get(), b, q, 6, 9, nullptr, nullptr, "reopened on 3 shards");
  bp.reset();
  std::remove((path + ".journal").c_str());
  std::remove(path.c_str());
  rmdir(tmpl);
}

TEST(ShardedStore, ConcurrentSearchesAndWrites) {
  // Searches run while another thread adds and removes; each result must be
  // a well-formed list (sorted, no repeated id), and the final state equals
  // an unsharded store given the same writes.
  auto rng = mt::rng_for_test();
  const uint64_t dim = 16, k = 8;
  Pair p(4, dim, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
  std::vector<uint64_t> ids = ids_from(rng, 400);
  Buf<float> v = random_rows(rng, ids.size(), dim);
  std::vector<uint64_t> first(ids.begin(), ids.begin() + 100);
  p.add(first, v);
  Buf<float> q = random_rows(rng, 3, dim);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t)
    readers.emplace_back([&] {
      Buf<uint64_t> ri(3 * k);
      Buf<float> rs(3 * k);
      while (!done.load()) {
        if (mnemo_store_search(p.many.get(), q.data(), 3, k, nullptr, ri.data(), rs.data()) != MNEMO_OK) ++bad;
        for (uint64_t r = 0; r < 3; ++r)
          for (uint64_t j = 1; j < k; ++j)
            if (rs[r * k + j] > rs[r * k + j - 1] || ri[r * k + j] == ri[r * k + j - 1]) ++bad;
      }
    });
  for (size_t i = 100; i < ids.size(); i += 30) {
    std::vector<uint64_t> chunk(ids.begin() + i, ids.begin() + std::min(ids.size(), i + 30));
    Buf<float> cv(chunk.size() * dim);
    std::memcpy(cv.data(), &v[i * dim], chunk.size() * dim * 4);
    ASSERT_OK(mnemo_store_add(p.many.get(), chunk.data(), cv.data(), MNEMO_DTYPE_F32, chunk.size()));
    ASSERT_OK(mnemo_store_add(p.one.get(), chunk.data(), cv.data(), MNEMO_DTYPE_F32, chunk.size()));
    std::vector<uint64_t> rm = {ids[i - 50], ids[i - 49]};
    p.remove(rm);
  }
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  expect_same_search(p.one.get(), p.many.get(), q, 3, k, nullptr, nullptr, "after concurrent writes");
}

TEST(ShardedStore, RuntimeOptionsAndReport) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  EXPECT_EQ(o.cpu_shards, 0u);
  EXPECT_EQ(o.device_count, 0u);
  EXPECT_EQ(o.device_ids, nullptr);
  o.backend = MNEMO_BACKEND_CPU;
  mnemo_runtime* r = nullptr;
  o.cpu_shards = MNEMO_MAX_SHARDS + 1;
  EXPECT_TRUE(mt::failed_with(mnemo_runtime_create(&o, &r), MNEMO_E_INVALID_ARGUMENT, "cpu_shards"));
  EXPECT_EQ(r, nullptr);
  // A caller of the first struct version: the new fields are not read.
  o.cpu_shards = 5;
  o.struct_size = offsetof(mnemo_runtime_options, cpu_shards);
  ASSERT_OK(mnemo_runtime_create(&o, &r));
  mt::RuntimePtr old(r);
  mnemo_runtime_report rep;
  rep.struct_size = sizeof rep;
  ASSERT_OK(mnemo_runtime_info(old.get(), &rep));
  EXPECT_EQ(rep.shards, 1u);
  EXPECT_EQ(rep.device_count, 0u);
  o.struct_size = sizeof o;
  auto rt = mt::make_runtime(o);
  ASSERT_OK(mnemo_runtime_info(rt.get(), &rep));
  EXPECT_EQ(rep.shards, 5u);
  // An old report struct gets only its prefix: the bytes after stay.
  mnemo_runtime_report small;
  std::memset(&small, 0xEE, sizeof small);
  small.struct_size = offsetof(mnemo_runtime_report, shards);
  ASSERT_OK(mnemo_runtime_info(rt.get(), &small));
  EXPECT_EQ(small.shards, 0xEEEEEEEEu);
  // Repeated devices are refused before any device is touched.
  mnemo_runtime_options g = mnemo_runtime_options_default();
  Buf<int32_t> dev(2);
  dev[0] = dev[1] = 0;
  g.device_count = 2;
  g.device_ids = dev.data();
  EXPECT_TRUE(mt::failed_with(mnemo_runtime_create(&g, &r), MNEMO_E_INVALID_ARGUMENT, "device_ids"));
  dev[1] = -3;
  EXPECT_TRUE(mt::failed_with(mnemo_runtime_create(&g, &r), MNEMO_E_OUT_OF_RANGE, "device_ids"));
}

// ---- mnemo_topk_merge -------------------------------------------------------

struct Entry {
  float score;
  uint64_t id;
};

// The reference: every valid entry, best per id, sorted, first k.
std::vector<Entry> merge_reference(int32_t metric, const std::vector<Entry>& all, uint64_t k) {
  std::vector<Entry> best;
  for (const Entry& e : all) {
    if (e.id == MNEMO_NO_ID || std::isnan(e.score)) continue;
    bool seen = false;
    for (Entry& b : best)
      if (b.id == e.id) {
        seen = true;
        const bool better = metric == MNEMO_METRIC_L2SQ ? e.score < b.score : e.score > b.score;
        if (better) b = e;
      }
    if (!seen) best.push_back(e);
  }
  std::sort(best.begin(), best.end(), [&](const Entry& a, const Entry& b) {
    const double ka = metric == MNEMO_METRIC_L2SQ ? -double(a.score) : a.score;
    const double kb = metric == MNEMO_METRIC_L2SQ ? -double(b.score) : b.score;
    return ka != kb ? ka > kb : a.id < b.id;
  });
  if (best.size() > k) best.resize(k);
  return best;
}

TEST(TopkMerge, MatchesReferenceWithTiesPaddingNanAndDuplicates) {
  auto rng = mt::rng_for_test();
  const float nan = std::nanf("");
  for (const int32_t metric : mt::metrics()) {
    for (const uint64_t lists : {uint64_t{1}, uint64_t{3}, uint64_t{6}}) {
      for (const uint64_t k : {uint64_t{1}, uint64_t{5}, uint64_t{33}}) {
        const uint64_t nq = 7, n = lists * nq * k;
        Buf<uint64_t> ids(n);
        Buf<float> sc(n);
        for (uint64_t i = 0; i < n; ++i) {
          const uint64_t r = mt::rand_below(rng, 20);
          ids[i] = r == 0 ? MNEMO_NO_ID : mt::rand_below(rng, 3 * k + 5);  // duplicates across lists
          // Few distinct scores, so ties are common; some NaN.
          sc[i] = r == 1 ? nan : static_cast<float>(mt::rand_below(rng, 6)) * 0.25f - 0.6f;
        }
        Buf<uint64_t> oi(nq * k);
        Buf<float> os(nq * k);
        mt::poison_f32(os.data(), nq * k);
        ASSERT_OK(mnemo_topk_merge(metric, lists, nq, k, ids.data(), sc.data(), oi.data(), os.data()));
        for (uint64_t q = 0; q < nq; ++q) {
          std::vector<Entry> all;
          for (uint64_t l = 0; l < lists; ++l)
            for (uint64_t j = 0; j < k; ++j) all.push_back({sc[(l * nq + q) * k + j], ids[(l * nq + q) * k + j]});
          const auto want = merge_reference(metric, all, k);
          for (uint64_t j = 0; j < k; ++j) {
            if (j < want.size()) {
              ASSERT_EQ(oi[q * k + j], want[j].id) << "query " << q << " place " << j;
              ASSERT_EQ(os[q * k + j], want[j].score);
            } else {
              ASSERT_EQ(oi[q * k + j], MNEMO_NO_ID);
              ASSERT_TRUE(std::isnan(os[q * k + j]));
            }
          }
        }
      }
    }
  }
}

TEST(TopkMerge, ZeroListsGivePaddingAndBadArgumentsWriteNothing) {
  Buf<uint64_t> ids(8), oi(8);
  Buf<float> sc(8), os(8);
  for (int i = 0; i < 8; ++i) ids[i] = 8 - i, sc[i] = static_cast<float>(i) + 0.5f;
  ASSERT_OK(mnemo_topk_merge(MNEMO_METRIC_DOT, 0, 2, 4, nullptr, nullptr, oi.data(), os.data()));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(oi[i], MNEMO_NO_ID);
  oi.fill_bytes(0xCD);
  os.fill_bytes(0xCD);
  const auto si = oi.snapshot(), ss = os.snapshot();
  auto untouched = [&] { return oi.same_as(si) && os.same_as(ss); };
  EXPECT_TRUE(mt::failed_with(mnemo_topk_merge(MNEMO_METRIC_DOT, 2, 1, 4, nullptr, sc.data(), oi.data(), os.data()),
                              MNEMO_E_NULL_POINTER, "ids"));
  EXPECT_TRUE(
      mt::failed_with(mnemo_topk_merge(MNEMO_METRIC_DOT, 2, 1, 4, ids.data(), sc.misaligned(), oi.data(), os.data()),
                      MNEMO_E_MISALIGNED, "scores"));
  EXPECT_TRUE(mt::failed_with(mnemo_topk_merge(MNEMO_METRIC_DOT, 2, 1, 0, ids.data(), sc.data(), oi.data(), os.data()),
                              MNEMO_E_INVALID_ARGUMENT, "k"));
  EXPECT_TRUE(mt::failed_with(mnemo_topk_merge(99, 2, 1, 4, ids.data(), sc.data(), oi.data(), os.data()),
                              MNEMO_E_INVALID_ARGUMENT, "metric"));
  EXPECT_TRUE(mt::failed_with(
      mnemo_topk_merge(MNEMO_METRIC_DOT, 2, UINT64_MAX / 2, 4, ids.data(), sc.data(), oi.data(), os.data()),
      MNEMO_E_OVERFLOW));
  EXPECT_TRUE(untouched());
  // An output on top of an input.
  EXPECT_TRUE(mt::failed_with(mnemo_topk_merge(MNEMO_METRIC_DOT, 2, 1, 4, ids.data(), sc.data(), ids.data(), os.data()),
                              MNEMO_E_INVALID_ARGUMENT));
  EXPECT_TRUE(untouched());
  ASSERT_OK(mnemo_topk_merge(MNEMO_METRIC_DOT, 2, 1, 4, ids.data(), sc.data(), oi.data(), os.data()));
  // Scores 0.5..7.5 for ids 8..1: the best four are ids 1..4.
  for (int j = 0; j < 4; ++j) EXPECT_EQ(oi[j], static_cast<uint64_t>(j + 1));
}

}  // namespace
