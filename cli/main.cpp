// mnemo: the command-line tool over libmnemo's C ABI.
#include <cstdio>
#include <cstring>
#include <new>

#include "commands.h"
#include "common.h"

namespace {

const char* kUsage =
    "usage: mnemo <command> [options]\n"
    "  info                                  version, ABI, backends, SIMD level, GPUs\n"
    "  build  --input FILE --out STORE       store the vectors of FILE (ids = row numbers)\n"
    "         [--metric cosine|dot|l2] [--dtype f32|f16|bf16] [--durable] [--backend] [--precision]\n"
    "         [--times FILE] [--importance FILE]  last-access times (seconds) and importances, one per line\n"
    "         [--fields FILE.jsonl]  line i: row i's fields, each optional: {\"key\": \"doc-1\",\n"
    "                       \"namespace\": [\"users\", \"42\"], \"tags\": [\"news\"], \"payload\": \"text\",\n"
    "                       \"attributes\": {\"year\": 2020, \"lang\": \"en\", \"ok\": true, \"score\": 0.5}}\n"
    "         [--index ivf [--nlist N (sqrt of the count)] [--train-iters N (10)] [--index-seed S (1)]]\n"
    "                                        an inverted-file index, saved with the store (search --nprobe)\n"
    "         [--cluster]  each namespace's rows one run, so a search scoped to one reads just those\n"
    "  search --store STORE --queries FILE --k K [--out FILE.tsv|FILE.ivecs|FILE.jsonl] [--batch N] [--durable]\n"
    "         (.jsonl: a line a result with the memory's key, namespace, tags, attributes, payload, time\n"
    "          and importance, as build --fields reads them)\n"
    "         [--backend auto|cpu|cuda] [--precision exact|fast]\n"
    "         [--nprobe N]  read the N nearest lists of the store's index and the memories written since\n"
    "                       it was built (0 or no index: the exact scan)\n"
    "         activation ranking (any of these turns it on; docs/activation.md):\n"
    "         [--recency-half-life SECONDS (86400)] [--now SECONDS (current time)]\n"
    "         [--w-rel W (1)] [--w-rec W (1)] [--w-imp W (0)] [--normalize (min-max over the candidates)]\n"
    "         [--touch (returned memories' times become now; the store is saved back or journaled)]\n"
    "         [--where EXPR]  only memories EXPR matches, e.g.\n"
    "                       'year>=2020 and (lang=en or tag:news) and ns:users/42/* and not key:abc'\n"
    "                       NAME OP VALUE (= != < <= > >=), NAME [not] in (V, ...), NAME between V and V,\n"
    "                       NAME exists, tag:T, ns:A/B (exactly), ns:A/B/* (or below), ns:* (any), key:K,\n"
    "                       id:N,N, time:LO..HI, importance:LO..HI; and, or, not, ( ); an integer VALUE\n"
    "                       is INT, another number DOUBLE, true/false BOOL, a word or \"quoted\" STRING\n"
    "         [--where-json JSON]  the dictionary form: {\"user\": \"u1\", \"year\": {\"$gte\": 2020},\n"
    "                       \"$or\": [...], \"$not\": {...}, \"$tags\": {\"$any\": [...]},\n"
    "                       \"$namespace\": {\"$under\": \"users/42\"}, \"$key\": ..., \"$time\": {\"$gte\": T}}\n"
    "                       ($eq $ne $gt $gte $lt $lte $in $nin $between $exists)\n"
    "  eval   --base FILE --queries FILE --truth FILE --k K  recall@k, queries/s, latency\n"
    "         [--metric] [--dtype] [--backend] [--precision] [--batch N] [--latency-queries N]\n"
    "         [--store STORE [--durable]]  a saved store instead of --base\n"
    "         [--nprobe 1,4,16,64]  also recall@k and queries/s of the index at each nprobe, against\n"
    "                       --truth or, without it, the exact scan of the same store; a --base store\n"
    "                       gets an index here ([--index ivf] [--nlist N] [--train-iters N])\n"
    "  bench  [--n N] [--dim D] [--seconds S]  benchmark table of this machine\n"
    "  gen    --base FILE --queries FILE --truth FILE  clustered test data, brute-force truth\n"
    "         [--n N] [--nq N] [--dim D] [--clusters C] [--k K] [--metric] [--seed S]\n"
    "vector files: .fvecs .bvecs .fbin .npy (f32/f16); id files: .ivecs .ibin\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char* c = argv[1];
  try {
    if (!std::strcmp(c, "info")) return cli::cmd_info(argc, argv);
    if (!std::strcmp(c, "gen")) return cli::cmd_gen(argc, argv);
    if (!std::strcmp(c, "build")) return cli::cmd_build(argc, argv);
    if (!std::strcmp(c, "search")) return cli::cmd_search(argc, argv);
    if (!std::strcmp(c, "eval")) return cli::cmd_eval(argc, argv);
    if (!std::strcmp(c, "bench")) return cli::cmd_bench(argc, argv);
    std::fprintf(stderr, "mnemo: unknown command '%s'\n%s", c, kUsage);
    return 2;
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "mnemo %s: %s\n%s", c, e.what(), kUsage);
    return 2;
  } catch (const cli::Error& e) {
    std::fprintf(stderr, "mnemo %s: error: %s\n", c, e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "mnemo %s: error: out of memory\n", c);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mnemo %s: error: %s\n", c, e.what());
    return 1;
  }
}
