// Concurrency: searches racing a writer (adds, removes with compaction, bias
// updates) and stateless operations sharing one runtime.
#include <atomic>
#include <chrono>
#include <thread>

#include "store_model.h"
#include "support.h"

namespace {

using mt::Buf;
using mt::Matrix;

// Readers search while a writer adds and removes vectors far from every
// query. The far vectors never reach the top 10, so every search must give
// exactly the results of a quiet store, whatever the writer is doing.
TEST(Threads, SearchesWhileAWriterChangesTheStore) {
  auto rng = mt::rng_for_test();
  const size_t dim = 16, base = 800, k = 10;
  auto s = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ);
  ASSERT_TRUE(s);
  std::vector<uint64_t> ids(base);
  for (size_t i = 0; i < base; ++i) ids[i] = 3 * i + 1;
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, base, dim);
  ASSERT_OK(mt::store_add(s.get(), ids, m));
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 4, dim);
  mt::Results quiet;
  ASSERT_OK(mt::store_search(s.get(), q, k, nullptr, &quiet));

  // Far vectors: every entry near 50, so their squared distance is > 10000.
  Matrix far = mt::random_matrix(rng, MNEMO_DTYPE_F32, 100, dim);
  for (size_t i = 0; i < 100; ++i)
    for (size_t j = 0; j < dim; ++j) far.set(i, j, static_cast<float>(50.0 + far.row(i)[j]));

  std::atomic<bool> done{false};
  std::atomic<int> bad_results{0}, writer_errors{0};
  std::atomic<long> searches{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      // A few searches at least, then until the writer is finished, with a
      // cap and short pauses so the test stays bounded in time even if the
      // writer is slow to get the store.
      for (int n = 0; n < 300 && (n < 5 || !done.load()); ++n) {
        mt::Results r;
        if (mt::store_search(s.get(), q, k, nullptr, &r) != MNEMO_OK || !mt::same_results(r, quiet))
          bad_results.fetch_add(1);
        searches.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  std::thread writer([&] {
    uint64_t next = 1000000;
    for (int cycle = 0; cycle < 10; ++cycle) {
      std::vector<uint64_t> added;
      for (int batch = 0; batch < 4; ++batch) {
        std::vector<uint64_t> b(100);
        for (auto& id : b) id = next++;
        if (mt::store_add(s.get(), b, far) != MNEMO_OK) writer_errors.fetch_add(1);
        if (mt::store_set_bias(s.get(), {b[0], b[99]}, {1.0f, -1.0f}) != MNEMO_OK) writer_errors.fetch_add(1);
        added.insert(added.end(), b.begin(), b.end());
      }
      // 400 of 1200 slots removed: more than a quarter, so it compacts.
      uint64_t removed = 0;
      if (mt::store_remove(s.get(), added, &removed) != MNEMO_OK || removed != added.size()) writer_errors.fetch_add(1);
    }
    done.store(true);
  });
  writer.join();
  for (auto& t : readers) t.join();
  EXPECT_EQ(writer_errors.load(), 0);
  EXPECT_EQ(bad_results.load(), 0) << "of " << searches.load() << " searches";
  uint64_t n = 0, slots = 0;
  ASSERT_OK(mnemo_store_count(s.get(), &n));
  ASSERT_OK(mnemo_store_slot_count(s.get(), &slots));
  EXPECT_EQ(n, base);
  EXPECT_LE(slots, base + 400);
}

// "Exclusive (waits for running searches)": a writer waits for the searches
// running when it arrives, not for every later one. Readers search back to
// back for up to 3 seconds; the writer's ten small adds must finish well
// inside that window.
TEST(Threads, WriterIsNotStarvedBySearches) {
  auto rng = mt::rng_for_test();
  const size_t dim = 16;
  auto s = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ);
  ASSERT_TRUE(s);
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 800, dim);
  std::vector<uint64_t> ids(800);
  for (size_t i = 0; i < 800; ++i) ids[i] = i + 1;
  ASSERT_OK(mt::store_add(s.get(), ids, m));
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 4, dim);
  const Matrix extra = mt::random_matrix(rng, MNEMO_DTYPE_F32, 10, dim);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::atomic<bool> writer_done{false};
  std::atomic<int> started{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      started.fetch_add(1);
      while (!writer_done.load() && std::chrono::steady_clock::now() < deadline) {
        mt::Results r;
        (void)mt::store_search(s.get(), q, 10, nullptr, &r);
      }
    });
  }
  while (started.load() < 3) std::this_thread::yield();
  bool in_time = true;
  for (uint64_t i = 0; i < 10; ++i) {
    EXPECT_OK(mt::store_add(s.get(), {100000 + i}, extra));
    if (std::chrono::steady_clock::now() >= deadline) in_time = false;
  }
  writer_done.store(true);
  for (auto& t : readers) t.join();
  EXPECT_TRUE(in_time) << "10 adds took more than 3 s while 3 threads searched";
}

// Stateless calls on one runtime from several threads give the results of a
// single thread, bit for bit.
TEST(Threads, SharedRuntimeStatelessCalls) {
  auto rng = mt::rng_for_test();
  const size_t nq = 5, n = 300, dim = 127;
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, dim);
  const Matrix t = mt::random_matrix(rng, MNEMO_DTYPE_BF16, n, dim);
  Buf<float> want(nq * n), want_norm(n * dim);
  ASSERT_OK(mnemo_similarity(mt::rt(), MNEMO_METRIC_COSINE, static_cast<const float*>(q.data()), nq, t.data(),
                             MNEMO_DTYPE_BF16, n, dim, want.data()));
  const Matrix x = mt::random_matrix(rng, MNEMO_DTYPE_F32, n, dim);
  ASSERT_OK(mnemo_normalize_rows(mt::rt(), x.data(), want_norm.data(), MNEMO_DTYPE_F32, n, dim));

  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int it = 0; it < 10; ++it) {
        Buf<float> got(nq * n), norm(n * dim);
        if (mnemo_similarity(mt::rt(), MNEMO_METRIC_COSINE, static_cast<const float*>(q.data()), nq, t.data(),
                             MNEMO_DTYPE_BF16, n, dim, got.data()) != MNEMO_OK ||
            std::memcmp(got.data(), want.data(), nq * n * sizeof(float)) != 0)
          bad.fetch_add(1);
        if (mnemo_normalize_rows(mt::rt(), x.data(), norm.data(), MNEMO_DTYPE_F32, n, dim) != MNEMO_OK ||
            std::memcmp(norm.data(), want_norm.data(), n * dim * sizeof(float)) != 0)
          bad.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
