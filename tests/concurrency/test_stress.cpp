// Stress: reader threads search while a writer adds, upserts and removes for
// a bounded time. Before each write the writer publishes the reference top-k
// of the store as it will be after the write, then applies it, then bumps the
// version. A reader that saw versions v0 (before its search) and v1 (after)
// must get the results of one version in [v0, v1 + 1]. Built and run under
// ThreadSanitizer by `make test-tsan` (label tsan).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <thread>

#include "../reference.h"
#include "../support.h"

#if defined(__SANITIZE_THREAD__)
#define MNEMO_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MNEMO_UNDER_TSAN 1
#endif
#endif

namespace {

constexpr size_t kDim = 16, kQueries = 3, kK = 8, kKeep = kK + 4;
constexpr int32_t kMetric = MNEMO_METRIC_L2SQ;

struct Ranked {  // the reference best kKeep of one query, best first
  ref::Candidate c[kKeep];
  size_t n;
};
struct Expected {
  Ranked q[kQueries];
};

using Model = std::map<uint64_t, std::vector<double>>;

Expected reference(const Model& m, const std::vector<double>& queries) {
  Expected e{};
  for (size_t qi = 0; qi < kQueries; ++qi) {
    std::vector<ref::Candidate> all;
    const double* q = queries.data() + qi * kDim;
    for (const auto& [id, v] : m) {
      const double s = ref::score(kMetric, q, v.data(), kDim);
      all.push_back({id, s, ref::score_tol(kMetric, q, v.data(), kDim, s)});
    }
    const size_t n = std::min(all.size(), kKeep);
    std::partial_sort(all.begin(), all.begin() + n, all.end(), [](const ref::Candidate& a, const ref::Candidate& b) {
      return a.score < b.score || (a.score == b.score && a.id < b.id);
    });
    std::copy(all.begin(), all.begin() + n, e.q[qi].c);
    e.q[qi].n = n;
  }
  return e;
}

// Results of one query against one version: each rank holds a candidate of
// that version with its score, the score of that rank within tolerance (so
// near-ties may swap), best first.
bool matches(const Ranked& r, const uint64_t* ids, const float* scores) {
  for (size_t i = 0; i < kK; ++i) {
    if (i >= r.n) {
      if (ids[i] != MNEMO_NO_ID) return false;
      continue;
    }
    const ref::Candidate* c = nullptr;
    for (size_t j = 0; j < r.n; ++j)
      if (r.c[j].id == ids[i]) c = &r.c[j];
    if (!c || std::fabs(scores[i] - c->score) > c->tol) return false;
    if (std::fabs(scores[i] - r.c[i].score) > r.c[i].tol + c->tol) return false;
    if (i > 0 && scores[i] < scores[i - 1]) return false;
  }
  return true;
}

// shards > 1: the store is sharded on the CPU (cpu_shards), so the routing
// of writes and the per-shard search threads face the same race.
// indexed: the store has an inverted-file index whose tight rebuild bound
// makes the writes start background rebuilds all along; readers probe every
// list, which returns the exact scan's results, so the same check holds.
void stress(uint32_t shards, bool indexed = false) {
  auto rng = mt::rng_for_test();
  mnemo_runtime_options ro = mt::test_options();
  ro.cpu_shards = shards;
#ifdef MNEMO_UNDER_TSAN
  // libgomp is not instrumented: one search thread keeps OpenMP out of the
  // picture, so every report is about mnemo's own locking.
  ro.num_threads = 1;
  const double seconds = 3.0;
  const size_t max_versions = 4000;
#else
  const double seconds = 2.0;
  const size_t max_versions = 40000;
#endif
  mt::RuntimePtr own = shards > 1 || ro.num_threads == 1 ? mt::make_runtime(ro) : nullptr;
  mnemo_runtime* rt = own ? own.get() : mt::rt();
  auto s = mt::make_store(kDim, MNEMO_DTYPE_F32, kMetric, rt);
  ASSERT_TRUE(s);
  auto draw = [&](std::vector<float>& v) {
    for (auto& x : v) x = mt::rand_nonzero(rng);
  };
  Model model;
  std::vector<float> row(kDim);
  mt::Buf<float> one(kDim);
  mt::Buf<uint64_t> one_id(4);
  for (uint64_t id = 1; id <= 200; ++id) {
    draw(row);
    std::copy(row.begin(), row.end(), one.data());
    one_id[0] = id;
    ASSERT_OK(mnemo_store_add(s.get(), one_id.data(), one.data(), MNEMO_DTYPE_F32, 1));
    model[id].assign(row.begin(), row.end());
  }
  constexpr uint32_t kLists = 8;
  if (indexed) {
    mnemo_index_options io = mnemo_index_options_default();
    io.nlist = kLists;
    io.rebuild_hot_min = 16;
    io.rebuild_hot_fraction = 0.05;
    ASSERT_OK(mnemo_store_build_index(s.get(), &io));
  }
  mnemo_search_options so = mnemo_search_options_default();
  so.nprobe = indexed ? kLists : 0;
  mt::Buf<float> q(kQueries * kDim);
  std::vector<double> qd(kQueries * kDim);
  for (size_t i = 0; i < kQueries * kDim; ++i) q[i] = mt::rand_nonzero(rng), qd[i] = q[i];

  std::vector<Expected> expected(max_versions + 2);
  expected[0] = reference(model, qd);
  std::atomic<uint64_t> published{0}, version{0};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> searches{0}, mismatches{0}, failures{0};
  std::atomic<uint64_t> adds{0}, upserts{0}, removes{0};

  std::thread writer([&] {
    mt::Buf<float> vec(kDim);
    mt::Buf<uint64_t> ids(4);
    uint64_t next_id = 1000;
    for (uint64_t v = 0; v < max_versions && !stop.load(); ++v) {
      const uint64_t pick = mt::rand_below(rng, 3);
      Model after = model;
      std::vector<float> nv(kDim);
      draw(nv);
      uint64_t id = 0;
      if (pick == 0 || model.size() < 50) {
        id = next_id++;
      } else {
        auto it = model.begin();
        std::advance(it, mt::rand_below(rng, model.size()));
        id = it->first;
      }
      if (pick == 2 && model.size() >= 50) {
        after.erase(id);
      } else {
        after[id].assign(nv.begin(), nv.end());
      }
      expected[v + 1] = reference(after, qd);
      published.store(v + 1, std::memory_order_release);
      ids[0] = id;
      mnemo_status st;
      if (pick == 2 && model.size() >= 50) {
        st = mnemo_store_remove(s.get(), ids.data(), 1, nullptr);
        removes.fetch_add(1);
      } else {
        std::copy(nv.begin(), nv.end(), vec.data());
        st = mnemo_store_add(s.get(), ids.data(), vec.data(), MNEMO_DTYPE_F32, 1);
        (pick == 0 || model.size() < 50 ? adds : upserts).fetch_add(1);
      }
      if (st != MNEMO_OK) failures.fetch_add(1);
      model.swap(after);
      version.store(v + 1, std::memory_order_release);
    }
  });

  const int n_readers = 3;
  std::vector<std::thread> readers;
  for (int t = 0; t < n_readers; ++t) {
    readers.emplace_back([&] {
      mt::Buf<uint64_t> ids(kQueries * kK);
      mt::Buf<float> sc(kQueries * kK);
      while (!stop.load()) {
        const uint64_t v0 = version.load(std::memory_order_acquire);
        if (mnemo_store_search(s.get(), q.data(), kQueries, kK, &so, ids.data(), sc.data()) != MNEMO_OK) {
          failures.fetch_add(1);
          continue;
        }
        const uint64_t v1 = version.load(std::memory_order_acquire);
        const uint64_t hi = std::min(v1 + 1, published.load(std::memory_order_acquire));
        bool ok = false;
        for (uint64_t v = v0; v <= hi && !ok; ++v) {
          ok = true;
          for (size_t qi = 0; qi < kQueries && ok; ++qi)
            ok = matches(expected[v].q[qi], ids.data() + qi * kK, sc.data() + qi * kK);
        }
        if (!ok) mismatches.fetch_add(1);
        searches.fetch_add(1);
      }
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  writer.join();
  for (auto& t : readers) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (indexed) {
    EXPECT_OK(mnemo_store_wait_index(s.get()));
    mnemo_index_info info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    EXPECT_OK(mnemo_store_index_info(s.get(), &info));
    EXPECT_GE(info.builds, 3u) << "the writes should have passed the rebuild bound again and again";
    std::printf("stress: %llu index builds\n", static_cast<unsigned long long>(info.builds));
  }
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_EQ(mismatches.load(), 0u) << "of " << searches.load() << " searches";
  EXPECT_GT(searches.load(), 100u);
  EXPECT_GT(version.load(), 100u);
  EXPECT_GT(removes.load(), 0u);
  EXPECT_GT(upserts.load(), 0u);
  std::printf(
      "stress: %.1f s, %d readers: %llu searches of %zu queries (%.0f/s), all checked; %llu writes "
      "(%llu adds, %llu upserts, %llu removes)\n",
      secs, n_readers, static_cast<unsigned long long>(searches.load()), kQueries, searches.load() / secs,
      static_cast<unsigned long long>(version.load()), static_cast<unsigned long long>(adds.load()),
      static_cast<unsigned long long>(upserts.load()), static_cast<unsigned long long>(removes.load()));
}

TEST(Stress, SearchesSeeOneVersionWhileAWriterAddsUpsertsAndRemoves) { stress(1); }

TEST(Stress, ShardedStoreSearchesSeeOneVersionWhileAWriterWrites) { stress(3); }

TEST(Stress, IndexedStoreSearchesSeeOneVersionWhileRebuildsRun) { stress(1, true); }

TEST(Stress, IndexedShardedStoreSearchesSeeOneVersionWhileRebuildsRun) { stress(3, true); }

// Batches that span several shards are added on one thread per shard: those
// threads race the readers' searches here (results must stay well formed).
TEST(Stress, ShardedStoreBatchWritesRaceSearches) {
  auto rng = mt::rng_for_test();
  mnemo_runtime_options ro = mt::test_options();
  ro.backend = MNEMO_BACKEND_CPU;
  ro.num_threads = 1;
  ro.cpu_shards = 4;
  mt::RuntimePtr rt = mt::make_runtime(ro);
  auto s = mt::make_store(kDim, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, rt.get());
  ASSERT_TRUE(s);
  constexpr size_t kBatch = 40;
  mt::Buf<float> v(kBatch * kDim), q(kQueries * kDim);
  for (size_t i = 0; i < kBatch * kDim; ++i) v[i] = mt::rand_nonzero(rng);
  for (size_t i = 0; i < kQueries * kDim; ++i) q[i] = mt::rand_nonzero(rng);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, searches{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t)
    readers.emplace_back([&] {
      mt::Buf<uint64_t> ids(kQueries * kK);
      mt::Buf<float> sc(kQueries * kK);
      while (!stop.load()) {
        if (mnemo_store_search(s.get(), q.data(), kQueries, kK, nullptr, ids.data(), sc.data()) != MNEMO_OK) ++bad;
        for (size_t r = 0; r < kQueries; ++r)
          for (size_t j = 1; j < kK; ++j)
            if (ids[r * kK + j] != MNEMO_NO_ID && sc[r * kK + j] > sc[r * kK + j - 1]) ++bad;
        ++searches;
      }
    });
  mt::Buf<uint64_t> ids(kBatch);
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t next = 1;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2)) {
    for (size_t i = 0; i < kBatch; ++i) ids[i] = next + i;
    if (mnemo_store_add(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, kBatch) != MNEMO_OK) ++bad;
    for (size_t i = 0; i < kBatch / 2; ++i) ids[i] = next + 2 * i;  // half of them again
    if (mnemo_store_remove(s.get(), ids.data(), kBatch / 2, nullptr) != MNEMO_OK) ++bad;
    next += kBatch;
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(searches.load(), 10u);
  uint64_t n = 0;
  ASSERT_OK(mnemo_store_count(s.get(), &n));
  EXPECT_EQ(n, (next - 1) / 2);
}

}  // namespace
