// mnemo bench: the library's own operations timed through the C ABI on
// synthetic data, as a table for this machine, and searches per second held
// while a writer changes the store.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <random>
#include <thread>

#include "commands.h"
#include "common.h"

namespace cli {

namespace {

// Median seconds of `reps` runs after one warm-up.
double median_time(int reps, const std::function<void()>& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_seconds();
    f();
    t.push_back(now_seconds() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void row(const char* op, const std::string& shape, double secs, double bytes) {
  std::printf("| %-34s | %-22s | %10.3f | %7.2f |\n", op, shape.c_str(), secs * 1e3, bytes / secs / 1e9);
}

// Searches per second of `readers` threads (one query, k = 10, each) for
// `seconds`, with a writer upserting and removing batches when `write`;
// writes per second through *writes.
double searches_per_second(mnemo_store* s, const AVec<float>& q, uint64_t dim, uint64_t n, int readers, double seconds,
                           bool write, double* writes) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> count{0}, wcount{0}, errors{0};
  std::vector<std::thread> th;
  for (int t = 0; t < readers; ++t)
    th.emplace_back([&, t] {
      AVec<uint64_t> ids(10);
      AVec<float> sc(10);
      uint64_t local = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        if (mnemo_store_search(s, q.data() + (local % 16 + t) % 16 * dim, 1, 10, nullptr, ids.data(), sc.data()) !=
            MNEMO_OK)
          errors.fetch_add(1);
        ++local;
      }
      count.fetch_add(local);
    });
  if (write)
    th.emplace_back([&] {
      std::mt19937_64 rng(7);
      std::normal_distribution<float> nd;
      constexpr uint64_t kBatch = 100;
      AVec<uint64_t> ids(kBatch);
      AVec<float> v(kBatch * dim);
      for (auto& x : v) x = nd(rng);
      uint64_t next = n;
      while (!stop.load(std::memory_order_relaxed)) {
        // Upsert a batch of existing ids, add a batch of new ones, remove them.
        for (auto& id : ids) id = rng() % n;
        if (mnemo_store_add(s, ids.data(), v.data(), MNEMO_DTYPE_F32, kBatch) != MNEMO_OK) errors.fetch_add(1);
        for (auto& id : ids) id = next++;
        if (mnemo_store_add(s, ids.data(), v.data(), MNEMO_DTYPE_F32, kBatch) != MNEMO_OK) errors.fetch_add(1);
        if (mnemo_store_remove(s, ids.data(), kBatch, nullptr) != MNEMO_OK) errors.fetch_add(1);
        wcount.fetch_add(3);
      }
    });
  const double t0 = now_seconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (auto& t : th) t.join();
  const double secs = now_seconds() - t0;
  if (errors.load()) throw Error("calls failed during the concurrent run");
  if (writes) *writes = wcount.load() / secs;
  return count.load() / secs;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  Args a(argc, argv, 2, {"n", "dim", "seconds", "backend", "precision", "threads"});
  const uint64_t n = a.num("n", 100000), dim = a.num("dim", 128);
  const double seconds = static_cast<double>(a.num("seconds", 2));
  if (n < 1000 || dim == 0) throw UsageError("--n must be at least 1000 and --dim positive");
  Runtime rt(a);
  std::mt19937_64 rng(1);
  std::normal_distribution<float> nd;
  AVec<float> base(n * dim), q(100 * dim);
  for (auto& x : base) x = nd(rng);
  for (auto& x : q) x = nd(rng);
  AVec<uint64_t> ids(n);
  for (uint64_t i = 0; i < n; ++i) ids[i] = i;
  const double vec_bytes = static_cast<double>(n * dim * 4);
  const std::string nd_shape = std::to_string(n) + " x " + std::to_string(dim);

  std::printf("mnemo %s on %s\n", mnemo_version(), rt.describe().c_str());
  std::printf("| %-34s | %-22s | %10s | %7s |\n", "operation", "shape", "ms", "GB/s");
  std::printf("|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(24, '-').c_str(),
              std::string(12, '-').c_str(), std::string(9, '-').c_str());
  Store s;
  check(mnemo_store_create(rt.rt, dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, &s.s), "creating the store");
  row("store add (f32, cosine)", nd_shape,
      median_time(3, [&] { check(mnemo_store_add(s.s, ids.data(), base.data(), MNEMO_DTYPE_F32, n), "add"); }),
      vec_bytes);
  AVec<uint64_t> out_ids(100 * 100);
  AVec<float> out_sc(100 * 100);
  row("search 1 query, k = 10", nd_shape,
      median_time(
          20,
          [&] { check(mnemo_store_search(s.s, q.data(), 1, 10, nullptr, out_ids.data(), out_sc.data()), "search"); }),
      vec_bytes);
  row("search 100 queries, k = 10", nd_shape,
      median_time(
          5,
          [&] { check(mnemo_store_search(s.s, q.data(), 100, 10, nullptr, out_ids.data(), out_sc.data()), "search"); }),
      vec_bytes);
  row("search 100 queries, k = 100", nd_shape,
      median_time(5,
                  [&] {
                    check(mnemo_store_search(s.s, q.data(), 100, 100, nullptr, out_ids.data(), out_sc.data()),
                          "search");
                  }),
      vec_bytes);
  AVec<float> sim(16 * n);
  row("similarity 16 queries (matrix)", nd_shape,
      median_time(5,
                  [&] {
                    check(mnemo_similarity(rt.rt, MNEMO_METRIC_COSINE, q.data(), 16, base.data(), MNEMO_DTYPE_F32, n,
                                           dim, sim.data()),
                          "similarity");
                  }),
      vec_bytes);
  AVec<float> normed(n * dim);
  row("normalize rows", nd_shape,
      median_time(5,
                  [&] {
                    check(mnemo_normalize_rows(rt.rt, base.data(), normed.data(), MNEMO_DTYPE_F32, n, dim),
                          "normalize");
                  }),
      2 * vec_bytes);
  const uint64_t pairs = 1000000;
  AVec<uint32_t> src(pairs), tgt(pairs);
  for (uint64_t i = 0; i < pairs; ++i)
    src[i] = static_cast<uint32_t>(rng() % n), tgt[i] = static_cast<uint32_t>(rng() % n);
  AVec<float> pair_sc(pairs);
  row("score pairs (1M, cosine)", nd_shape,
      median_time(3,
                  [&] {
                    check(mnemo_score_pairs(rt.rt, MNEMO_METRIC_COSINE, base.data(), MNEMO_DTYPE_F32, n, dim,
                                            src.data(), tgt.data(), MNEMO_DTYPE_U32, pairs, pair_sc.data()),
                          "pairs");
                  }),
      2.0 * pairs * dim * 4);

  const int readers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double quiet = searches_per_second(s.s, q, dim, n, readers, seconds, false, nullptr);
  double writes = 0;
  const double busy = searches_per_second(s.s, q, dim, n, readers, seconds, true, &writes);
  std::printf("\nsearches/s (1 query, k = 10, %d reader threads, %.0f s each):\n", readers, seconds);
  std::printf("  quiet store:             %10.0f\n", quiet);
  std::printf("  under concurrent writes: %10.0f  (%.0f writes/s of 100 vectors: upsert, add, remove)\n", busy, writes);
  return 0;
}

}  // namespace cli
