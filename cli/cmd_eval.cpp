// mnemo eval: recall@k of store searches against a ground-truth file, batch
// throughput and single-query latency percentiles; with --nprobe, the same
// for searches of the store's inverted-file index at each nprobe, against the
// truth file or, without one, against the exact scan of the same store.
#include <algorithm>
#include <cstdio>
#include <set>

#include "commands.h"
#include "common.h"
#include "formats.h"
#include "index_ops.h"
#include "progress.h"
#include "store_ops.h"

namespace cli {

namespace {

// Mean fraction of each query's k reference ids found in its k results.
// want(i) gives the reference ids of query i (k of them).
template <class Want>
double recall_of(const AVec<uint64_t>& ids, uint64_t rows, uint64_t k, Want want) {
  double hits = 0;
  for (uint64_t i = 0; i < rows; ++i) {
    const std::set<int64_t> w = want(i);
    for (uint64_t r = 0; r < k; ++r) {
      const uint64_t id = ids[i * k + r];
      if (id != MNEMO_NO_ID && w.count(static_cast<int64_t>(id))) hits += 1;
    }
  }
  return hits / static_cast<double>(rows * k);
}

// Milliseconds of each of the first n queries searched one per call, sorted.
std::vector<double> latencies(const mnemo_store* s, const FloatRows& q, uint64_t k, uint64_t n,
                              const mnemo_search_options* opts, const char* label) {
  std::vector<double> lat(n);
  AVec<uint64_t> one_id(k);
  AVec<float> one_sc(k);
  Progress p(label, n);
  for (uint64_t i = 0; i < n; ++i) {
    const double t0 = now_seconds();
    check(mnemo_store_search(s, q.row(i), 1, k, opts, one_id.data(), one_sc.data()), "searching");
    lat[i] = (now_seconds() - t0) * 1e3;
    p.update(i + 1);
  }
  std::sort(lat.begin(), lat.end());
  return lat;
}

double percentile(const std::vector<double>& sorted, double p) {
  const uint64_t n = sorted.size();
  return sorted[std::min<uint64_t>(n - 1, static_cast<uint64_t>(p / 100.0 * n))];
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  Args a(argc, argv, 2,
         {"base", "store", "queries", "truth", "k", "metric", "dtype", "backend", "precision", "threads", "batch",
          "latency-queries", "nprobe", "index", "nlist", "train-iters", "index-seed"},
         {"durable"});
  const uint64_t k = a.num("k");
  if (k == 0) throw UsageError("--k must be at least 1");
  if (a.has("base") == a.has("store")) throw UsageError("give --base FILE (a store built here) or --store STORE");
  if (a.has("store") && (a.has("metric") || a.has("dtype")))
    throw UsageError("--metric and --dtype describe a store built from --base; a --store has its own");
  if (a.has("durable") && !a.has("store")) throw UsageError("--durable opens a --store");
  const std::vector<uint32_t> nprobes =
      a.has("nprobe") ? parse_nprobe_list("nprobe", a.str("nprobe")) : std::vector<uint32_t>{};
  // --nprobe on a store built here from --base implies its index (default
  // options unless --nlist and the others say otherwise; --index none
  // refuses it below).
  if (a.has("store") && (a.has("index") || a.has("nlist") || a.has("train-iters") || a.has("index-seed")))
    throw UsageError("--index and its options build the index of a store made from --base; a --store keeps its own");
  bool indexed = false;
  const mnemo_index_options index = index_options(a, a.has("base") && !nprobes.empty(), &indexed);
  Runtime rt(a);
  Store s;
  uint64_t dim = 0;
  int32_t metric = 0, dtype = 0;
  std::string what;
  double t_index = 0;
  if (a.has("store")) {
    const std::string path = a.str("store");
    if (a.has("durable"))
      check(mnemo_store_open_durable(rt.rt, path.c_str(), nullptr, &s.s), "opening the durable store");
    else
      check(mnemo_store_open(rt.rt, path.c_str(), &s.s), "opening the store");
    what = path;
  } else {
    metric = parse_metric(a.str("metric", "l2"));
    dtype = parse_dtype(a.str("dtype", "f32"));
    const FloatRows base = read_vectors(a.str("base"));
    if (base.rows == 0) throw Error(a.str("base") + " holds no rows");
    check(mnemo_store_create(rt.rt, base.dim, dtype, metric, &s.s), "creating the store");
    add_rows(s.s, base);
    what = a.str("base");
    if (indexed) t_index = build_index(s.s, index);
  }
  check(mnemo_store_shape(s.s, &dim, &dtype, &metric), "store shape");
  uint64_t count = 0;
  check(mnemo_store_count(s.s, &count), "store count");
  if (count == 0) throw Error(what + " holds no vectors");
  const mnemo_index_info info = index_info(s.s);
  if (!nprobes.empty() && info.nlist == 0)
    throw Error(what + " has no index for --nprobe; build the store with: mnemo build --index ivf [--nlist N]");

  const FloatRows q = read_vectors(a.str("queries"));
  check_dim(s.s, q, a.str("queries"));
  const bool has_truth = a.has("truth");
  IntRows truth;
  if (has_truth) {
    truth = read_ints(a.str("truth"));
    if (truth.rows != q.rows)
      throw Error(a.str("truth") + " has " + std::to_string(truth.rows) + " rows but there are " +
                  std::to_string(q.rows) + " queries");
    if (truth.dim < k)
      throw Error(a.str("truth") + " lists " + std::to_string(truth.dim) +
                  " neighbours per query, fewer than k = " + std::to_string(k));
  } else if (nprobes.empty()) {
    throw UsageError("--truth FILE is needed without --nprobe (with --nprobe the exact scan is the reference)");
  }
  const uint64_t batch = a.num("batch", q.rows);

  // The exact scan (nprobe = 0): warm-up, then the timed run.
  AVec<uint64_t> exact_ids;
  AVec<float> scores;
  search_rows(s.s, q, k, q.rows, exact_ids, scores);
  const double secs = search_rows(s.s, q, k, batch, exact_ids, scores);
  auto from_truth = [&](uint64_t i) { return std::set<int64_t>(truth.row(i), truth.row(i) + k); };
  auto from_exact = [&](uint64_t i) {
    std::set<int64_t> w;
    for (uint64_t r = 0; r < k; ++r)
      if (exact_ids[i * k + r] != MNEMO_NO_ID) w.insert(static_cast<int64_t>(exact_ids[i * k + r]));
    return w;
  };

  // Latency: one query per call.
  const uint64_t nl = std::min<uint64_t>(q.rows, a.num("latency-queries", 200));
  const std::vector<double> lat = latencies(s.s, q, k, nl, nullptr, "latency");
  std::printf("eval: %llu stored x %llu %s, %llu queries, k = %llu, %s, %s\n", static_cast<unsigned long long>(count),
              static_cast<unsigned long long>(dim), dtype_name(dtype), static_cast<unsigned long long>(q.rows),
              static_cast<unsigned long long>(k), metric_name(metric), rt.describe().c_str());
  if (info.nlist != 0) {
    if (t_index > 0)
      std::printf("index: %s (built here, %.2f s with the call)\n", index_summary(s.s).c_str(), t_index);
    else
      std::printf("index: %s\n", index_summary(s.s).c_str());
  }
  if (has_truth)
    std::printf("recall@%llu = %.4f\n", static_cast<unsigned long long>(k),
                recall_of(exact_ids, q.rows, k, from_truth));
  else
    std::printf("recall@%llu: measured against the exact scan below (no --truth)\n",
                static_cast<unsigned long long>(k));
  std::printf("batch of %llu: %.2f ms, %.0f queries/s\n", static_cast<unsigned long long>(batch), secs * 1e3,
              q.rows / secs);
  std::printf("latency (1 query per call, %llu calls): p50 %.3f ms, p95 %.3f ms, p99 %.3f ms\n",
              static_cast<unsigned long long>(nl), percentile(lat, 50), percentile(lat, 95), percentile(lat, 99));
  if (nprobes.empty()) return 0;

  // The index at each nprobe, measured as the exact scan above: the same
  // batches (wall clock over them, after a warm-up) and the same single
  // queries.
  std::printf(
      "ivf index, %u lists: recall@%llu against %s at each nprobe (lists read per query; the exact scan "
      "above reads them all)\n",
      info.nlist, static_cast<unsigned long long>(k), has_truth ? "the truth file" : "the exact scan");
  mnemo_search_options opts = mnemo_search_options_default();
  AVec<uint64_t> ids;
  for (uint32_t nprobe : nprobes) {
    opts.nprobe = nprobe;
    search_rows(s.s, q, k, q.rows, ids, scores, &opts);
    const double t = search_rows(s.s, q, k, batch, ids, scores, &opts);
    const double r = has_truth ? recall_of(ids, q.rows, k, from_truth) : recall_of(ids, q.rows, k, from_exact);
    const std::vector<double> l = latencies(s.s, q, k, nl, &opts, "latency");
    std::printf(
        "nprobe %u: recall@%llu = %.4f, batch of %llu: %.2f ms, %.0f queries/s, 1 query per call: p50 %.3f ms\n",
        nprobe, static_cast<unsigned long long>(k), r, static_cast<unsigned long long>(batch), t * 1e3, q.rows / t,
        percentile(l, 50));
  }
  return 0;
}

}  // namespace cli
