// mnemo eval: recall@k of store searches against a ground-truth file, batch
// throughput and single-query latency percentiles.
#include <algorithm>
#include <cstdio>
#include <set>

#include "commands.h"
#include "common.h"
#include "formats.h"
#include "progress.h"
#include "store_ops.h"

namespace cli {

int cmd_eval(int argc, char** argv) {
  Args a(argc, argv, 2,
         {"base", "queries", "truth", "k", "metric", "dtype", "backend", "precision", "threads", "batch",
          "latency-queries"});
  const uint64_t k = a.num("k");
  if (k == 0) throw UsageError("--k must be at least 1");
  const int32_t metric = parse_metric(a.str("metric", "l2"));
  const int32_t dtype = parse_dtype(a.str("dtype", "f32"));
  Runtime rt(a);
  const FloatRows base = read_vectors(a.str("base"));
  const FloatRows q = read_vectors(a.str("queries"));
  const IntRows truth = read_ints(a.str("truth"));
  if (base.rows == 0) throw Error(a.str("base") + " holds no rows");
  if (truth.rows != q.rows)
    throw Error(a.str("truth") + " has " + std::to_string(truth.rows) + " rows but there are " +
                std::to_string(q.rows) + " queries");
  if (truth.dim < k)
    throw Error(a.str("truth") + " lists " + std::to_string(truth.dim) +
                " neighbours per query, fewer than k = " + std::to_string(k));
  Store s;
  check(mnemo_store_create(rt.rt, base.dim, dtype, metric, &s.s), "creating the store");
  add_rows(s.s, base);
  check_dim(s.s, q, a.str("queries"));

  AVec<uint64_t> ids;
  AVec<float> scores;
  search_rows(s.s, q, k, q.rows, ids, scores);  // warm-up
  const double secs = search_rows(s.s, q, k, a.num("batch", q.rows), ids, scores);

  double hits = 0;
  for (uint64_t i = 0; i < q.rows; ++i) {
    std::set<int64_t> want(truth.row(i), truth.row(i) + k);
    for (uint64_t r = 0; r < k; ++r) {
      const uint64_t id = ids[i * k + r];
      if (id != MNEMO_NO_ID && want.count(static_cast<int64_t>(id))) hits += 1;
    }
  }
  const double recall = hits / static_cast<double>(q.rows * k);

  // Latency: one query per call.
  const uint64_t nl = std::min<uint64_t>(q.rows, a.num("latency-queries", 200));
  std::vector<double> lat(nl);
  AVec<uint64_t> one_id(k);
  AVec<float> one_sc(k);
  {
    Progress p("latency", nl);
    for (uint64_t i = 0; i < nl; ++i) {
      const double t0 = now_seconds();
      check(mnemo_store_search(s.s, q.row(i), 1, k, nullptr, one_id.data(), one_sc.data()), "searching");
      lat[i] = (now_seconds() - t0) * 1e3;
      p.update(i + 1);
    }
  }
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double p) { return lat[std::min<uint64_t>(nl - 1, static_cast<uint64_t>(p / 100.0 * nl))]; };
  std::printf("eval: %llu base x %llu %s, %llu queries, k = %llu, %s, %s\n", static_cast<unsigned long long>(base.rows),
              static_cast<unsigned long long>(base.dim), dtype_name(dtype), static_cast<unsigned long long>(q.rows),
              static_cast<unsigned long long>(k), metric_name(metric), rt.describe().c_str());
  std::printf("recall@%llu = %.4f\n", static_cast<unsigned long long>(k), recall);
  std::printf("batch of %llu: %.2f ms, %.0f queries/s\n", static_cast<unsigned long long>(a.num("batch", q.rows)),
              secs * 1e3, q.rows / secs);
  std::printf("latency (1 query per call, %llu calls): p50 %.3f ms, p95 %.3f ms, p99 %.3f ms\n",
              static_cast<unsigned long long>(nl), pct(50), pct(95), pct(99));
  return 0;
}

}  // namespace cli
