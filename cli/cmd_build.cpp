// mnemo build: store the vectors of a file (ids are row numbers), with
// per-row fields from a JSON-lines file (--fields), optionally build its
// inverted-file index (--index ivf), optionally lay it out by namespace
// (--cluster), and save it: the saved store (or the durable store's
// snapshot) carries the fields, the index and the order.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "common.h"
#include "fields_jsonl.h"
#include "formats.h"
#include "index_ops.h"
#include "store_ops.h"

namespace cli {

int cmd_build(int argc, char** argv) {
  Args a(argc, argv, 2,
         {"input", "out", "metric", "dtype", "backend", "precision", "threads", "times", "importance", "fields",
          "index", "nlist", "train-iters", "index-seed"},
         {"durable", "cluster"});
  const std::string out = a.str("out");
  const int32_t metric = parse_metric(a.str("metric", "l2"));
  const int32_t dtype = parse_dtype(a.str("dtype", "f32"));
  bool indexed = false;
  const mnemo_index_options index = index_options(a, false, &indexed);
  Runtime rt(a);
  double t0 = now_seconds();
  const FloatRows m = read_vectors(a.str("input"));
  if (m.rows == 0) throw Error(a.str("input") + " holds no rows");
  const double t_load = now_seconds() - t0;
  Store s;
  if (a.has("durable")) {
    mnemo_durable_options o = mnemo_durable_options_default();
    o.dim = m.dim, o.dtype = dtype, o.metric = metric;
    check(mnemo_store_open_durable(rt.rt, out.c_str(), &o, &s.s), "opening the durable store");
  } else {
    check(mnemo_store_create(rt.rt, m.dim, dtype, metric, &s.s), "creating the store");
  }
  // Last-access times and importances: one number per line, one line per row.
  AVec<double> times;
  AVec<float> importance;
  for (const char* name : {"times", "importance"}) {
    if (!a.has(name)) continue;
    const std::vector<double> v = read_numbers(a.str(name));
    if (v.size() != m.rows)
      throw Error("--" + std::string(name) + " holds " + std::to_string(v.size()) + " numbers for " +
                  std::to_string(m.rows) + " rows");
    if (name[0] == 't') {
      times.resize(v.size());
      for (size_t i = 0; i < v.size(); ++i) times[i] = v[i];
    } else {
      importance.resize(v.size());
      for (size_t i = 0; i < v.size(); ++i) importance[i] = static_cast<float>(v[i]);
    }
  }
  FieldRows fields;
  if (a.has("fields")) {
    fields = read_fields_jsonl(a.str("fields"));
    if (fields.size() != m.rows)
      throw Error("--fields holds " + std::to_string(fields.size()) + " lines for " + std::to_string(m.rows) + " rows");
  }
  t0 = now_seconds();
  add_rows(s.s, m, a.has("times") ? &times : nullptr, a.has("importance") ? &importance : nullptr,
           a.has("fields") ? fields.data() : nullptr);
  const double t_add = now_seconds() - t0;
  // In a durable store the layout is journaled here, and the checkpoint
  // below writes it into the snapshot.
  const double t_index = indexed ? build_index(s.s, index) : 0.0;
  // Each namespace's rows one run (within the index's lists): a search
  // scoped to one reads just that run. The snapshot keeps the order.
  if (a.has("cluster")) check(mnemo_store_cluster(s.s), "laying the store out by namespace");
  t0 = now_seconds();
  if (a.has("durable"))
    check(mnemo_store_checkpoint(s.s), "checkpointing");
  else
    check(mnemo_store_save(s.s, out.c_str()), "saving");
  const double t_save = now_seconds() - t0;
  mnemo_store_statistics st;
  st.struct_size = sizeof st;
  check(mnemo_store_stats(s.s, &st), "store stats");
  std::printf("built %s: %llu vectors x %llu %s, %s; load %.2f s, add %.2f s, save %.2f s; host %.1f MB\n", out.c_str(),
              static_cast<unsigned long long>(st.vectors), static_cast<unsigned long long>(m.dim), dtype_name(dtype),
              metric_name(metric), t_load, t_add, t_save, st.host_bytes / 1e6);
  if (indexed)
    std::printf("index: %s (%.2f s with the call); search with --nprobe N\n", index_summary(s.s).c_str(), t_index);
  return 0;
}

}  // namespace cli
