// mnemo gen: a clustered data set (Gaussian blobs around random centres) and
// its exact k nearest neighbours by float64 brute force, for demos and
// recall checks without a download.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>

#include "commands.h"
#include "common.h"
#include "formats.h"
#include "progress.h"

namespace cli {

namespace {

double score(int32_t metric, const float* a, const float* b, uint64_t dim) {
  double dot = 0, na = 0, nb = 0, l2 = 0;
  for (uint64_t j = 0; j < dim; ++j) {
    const double x = a[j], y = b[j];
    dot += x * y, na += x * x, nb += y * y, l2 += (x - y) * (x - y);
  }
  if (metric == MNEMO_METRIC_L2SQ) return -l2;  // higher is better below
  if (metric == MNEMO_METRIC_DOT) return dot;
  return na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : 0.0;
}

}  // namespace

int cmd_gen(int argc, char** argv) {
  Args a(argc, argv, 2, {"base", "queries", "truth", "n", "nq", "dim", "clusters", "k", "metric", "seed"});
  const uint64_t n = a.num("n", 20000), nq = a.num("nq", 200), dim = a.num("dim", 64);
  const uint64_t clusters = a.num("clusters", 32), k = a.num("k", 100), seed = a.num("seed", 1);
  const int32_t metric = parse_metric(a.str("metric", "l2"));
  if (n > 2147483647) throw UsageError("--n must fit the int32 ids of .ivecs");
  if (n == 0 || nq == 0 || dim == 0 || clusters == 0 || k == 0 || k > n)
    throw UsageError("--n, --nq, --dim, --clusters, --k must be positive and k <= n");
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> unit(0.0f, 1.0f), spread(0.0f, 0.25f);
  std::vector<float> centres(clusters * dim);
  for (auto& c : centres) c = unit(rng);
  auto draw = [&](FloatRows& m, uint64_t rows) {
    m.rows = rows, m.dim = dim;
    m.v.resize(rows * dim);
    for (uint64_t i = 0; i < rows; ++i) {
      const float* c = centres.data() + (rng() % clusters) * dim;
      for (uint64_t j = 0; j < dim; ++j) m.v[i * dim + j] = c[j] + spread(rng);
    }
  };
  FloatRows base, queries;
  draw(base, n);
  draw(queries, nq);

  IntRows truth;
  truth.rows = nq, truth.dim = k;
  truth.v.resize(nq * k);
  Progress p("truth", nq);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<std::pair<double, uint64_t>> all(n);
      for (uint64_t q = t; q < nq; q += threads) {
        for (uint64_t i = 0; i < n; ++i) all[i] = {-score(metric, queries.row(q), base.row(i), dim), i};
        std::partial_sort(all.begin(), all.begin() + k, all.end());  // best first, ties by smaller id
        for (uint64_t r = 0; r < k; ++r) truth.v[q * k + r] = static_cast<int32_t>(all[r].second);
      }
    });
  }
  for (auto& th : pool) th.join();
  write_fvecs(a.str("base"), base);
  write_fvecs(a.str("queries"), queries);
  write_ivecs(a.str("truth"), truth);
  std::printf(
      "generated %llu base and %llu query vectors of dimension %llu in %llu clusters; exact %s top-%llu by "
      "float64 brute force\n",
      static_cast<unsigned long long>(n), static_cast<unsigned long long>(nq), static_cast<unsigned long long>(dim),
      static_cast<unsigned long long>(clusters), metric_name(metric), static_cast<unsigned long long>(k));
  return 0;
}

}  // namespace cli
