// mnemo search: k nearest stored vectors of each query, as TSV (query, rank,
// id, score), as .ivecs (one row of k ids per query) or as JSON lines with
// each result's fields (.jsonl), optionally only among the memories a
// filter expression matches (--where, --where-json).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "common.h"
#include "formats.h"
#include "index_ops.h"
#include "results_jsonl.h"
#include "store_ops.h"
#include "where_parse.h"

namespace cli {

namespace {

double finite_arg(const Args& a, const std::string& name, double fallback) {
  if (!a.has(name)) return fallback;
  const std::string v = a.str(name);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x)) throw UsageError("--" + name + " must be a finite number");
  return x;
}

// Activation ranking (docs/activation.md) when any of its options is given:
// weights 1 (relevance), 1 (recency), 0 (importance) unless set, half-life
// one day, now the current time.
mnemo_search_options activation_options(const Args& a) {
  mnemo_search_options o = mnemo_search_options_default();
  bool on = a.has("normalize") || a.has("touch");
  for (const char* n : {"recency-half-life", "now", "w-rel", "w-rec", "w-imp"}) on = on || a.has(n);
  if (!on) return o;
  o.activation = 1;
  o.normalize = a.has("normalize") ? 1 : 0;
  o.touch = a.has("touch") ? 1 : 0;
  o.half_life = finite_arg(a, "recency-half-life", 86400.0);
  if (!(o.half_life > 0.0)) throw UsageError("--recency-half-life must be > 0 seconds");
  if (a.has("now")) o.now = finite_arg(a, "now", 0.0);
  o.w_relevance = static_cast<float>(finite_arg(a, "w-rel", 1.0));
  o.w_recency = static_cast<float>(finite_arg(a, "w-rec", 1.0));
  o.w_importance = static_cast<float>(finite_arg(a, "w-imp", 0.0));
  return o;
}

// --where and --where-json (both: a memory must match each) as one tree;
// false when neither is given.
bool where_tree(const Args& a, WhereNode& out) {
  std::vector<WhereNode> parts;
  for (const char* name : {"where", "where-json"}) {
    if (!a.has(name)) continue;
    const std::string text = a.str(name);
    try {
      parts.push_back(std::string(name) == "where" ? parse_where(text) : parse_where_json(text));
    } catch (const WhereError& e) {
      const std::string caret = point_at(text, e.column);
      throw UsageError("--" + std::string(name) + ": " + e.what() + (caret.empty() ? "" : "\n" + caret));
    }
  }
  if (parts.empty()) return false;
  if (parts.size() == 1) {
    out = std::move(parts[0]);
  } else {
    out.kind = WhereNode::kAnd;
    out.kids = std::move(parts);
  }
  return true;
}

}  // namespace

int cmd_search(int argc, char** argv) {
  Args a(argc, argv, 2,
         {"store", "queries", "k", "out", "batch", "backend", "precision", "threads", "recency-half-life", "now",
          "w-rel", "w-rec", "w-imp", "nprobe", "where", "where-json"},
         {"durable", "normalize", "touch"});
  const uint64_t k = a.num("k");
  if (k == 0) throw UsageError("--k must be at least 1");
  mnemo_search_options opts = activation_options(a);
  // Lists of the store's index to read (mnemo build --index ivf); 0: exact.
  if (a.has("nprobe")) {
    const uint64_t nprobe = a.num("nprobe");
    if (nprobe > UINT32_MAX) throw UsageError("--nprobe must be at most " + std::to_string(UINT32_MAX));
    opts.nprobe = static_cast<uint32_t>(nprobe);
  }
  // Parsed before any file is read, so a malformed expression fails fast.
  WhereNode tree;
  const bool scoped = where_tree(a, tree);
  Runtime rt(a);
  Store s;
  const std::string path = a.str("store");
  if (a.has("durable"))
    check(mnemo_store_open_durable(rt.rt, path.c_str(), nullptr, &s.s), "opening the durable store");
  else
    check(mnemo_store_open(rt.rt, path.c_str(), &s.s), "opening the store");
  const FloatRows q = read_vectors(a.str("queries"));
  check_dim(s.s, q, a.str("queries"));
  std::string probed;
  if (opts.nprobe != 0) {
    const mnemo_index_info info = index_info(s.s);
    probed = info.nlist == 0
                 ? ", nprobe " + std::to_string(opts.nprobe) + " (the store has no index: exact scan)"
                 : ", nprobe " + std::to_string(opts.nprobe) + " of " + std::to_string(info.nlist) + " lists";
  }
  FilterHandle filter;
  std::string matching;
  if (scoped) {
    build_filter(tree, filter, a.has("where") ? "--where" : "--where-json");
    opts.where = filter.f;
    uint64_t written = 0, total = 0, count = 0;
    check(mnemo_store_select(s.s, filter.f, 0, 0, nullptr, &written, &total), "counting the matching memories");
    check(mnemo_store_count(s.s, &count), "store count");
    matching = ", " + std::to_string(total) + " of " + std::to_string(count) + " memories match";
  }
  AVec<uint64_t> ids;
  AVec<float> scores;
  const double secs = search_rows(s.s, q, k, a.num("batch", 1024), ids, scores, &opts);
  // A touching search changed the times: a durable store journaled them, a
  // saved store is written back so they last.
  if (opts.touch && !a.has("durable")) check(mnemo_store_save(s.s, path.c_str()), "saving the touched store");
  const std::string out = a.str("out", "-");
  if (ends_with(out, ".jsonl")) {
    write_results_jsonl(out, s.s, ids.data(), scores.data(), q.rows, k);
  } else if (ends_with(out, ".ivecs")) {
    IntRows r;
    r.rows = q.rows, r.dim = k;
    r.v.resize(q.rows * k);
    for (uint64_t i = 0; i < q.rows * k; ++i) {
      if (ids[i] != MNEMO_NO_ID && ids[i] > 2147483647u)
        throw Error("id " + std::to_string(ids[i]) + " does not fit .ivecs");
      r.v[i] = ids[i] == MNEMO_NO_ID ? -1 : static_cast<int32_t>(ids[i]);
    }
    write_ivecs(out, r);
  } else {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(out == "-" ? stdout : std::fopen(out.c_str(), "w"),
                                                      out == "-" ? [](std::FILE*) { return 0; } : std::fclose);
    if (!f) throw Error("cannot create '" + out + "'");
    std::fprintf(f.get(), "query\trank\tid\tscore\n");
    for (uint64_t i = 0; i < q.rows; ++i)
      for (uint64_t r = 0; r < k; ++r) {
        const uint64_t id = ids[i * k + r];
        if (id == MNEMO_NO_ID) continue;  // fewer than k stored
        std::fprintf(f.get(), "%llu\t%llu\t%llu\t%.7g\n", static_cast<unsigned long long>(i),
                     static_cast<unsigned long long>(r), static_cast<unsigned long long>(id), scores[i * k + r]);
      }
    if (std::ferror(f.get())) throw Error("cannot write '" + out + "'");
  }
  std::fprintf(stderr, "searched %llu queries, k = %llu on %s%s%s: %.3f s (%.0f queries/s)%s%s\n",
               static_cast<unsigned long long>(q.rows), static_cast<unsigned long long>(k), rt.describe().c_str(),
               probed.c_str(), matching.c_str(), secs, q.rows / secs, out == "-" ? "" : ", results in ",
               out == "-" ? "" : out.c_str());
  return 0;
}

}  // namespace cli
