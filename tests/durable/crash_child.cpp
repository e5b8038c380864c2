// The crash test's child: opens (or creates) a durable store and runs the
// write sequence from a given index, writing one byte to stdout after each
// write returns (the acknowledgement), until it is killed.
// Usage: mnemo_crash_child <store path> <seed> <first op>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "crash_ops.h"

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  uint64_t i = std::strtoull(argv[3], nullptr, 10);
  mnemo_runtime_options ro = mnemo_runtime_options_default();
  ro.backend = MNEMO_BACKEND_CPU;
  ro.num_threads = 1;
  mnemo_runtime* rt = nullptr;
  if (mnemo_runtime_create(&ro, &rt) != MNEMO_OK) return 3;
  mnemo_durable_options o = mnemo_durable_options_default();
  o.dim = crash::kDim;
  o.dtype = MNEMO_DTYPE_F32;
  o.metric = MNEMO_METRIC_DOT;
  mnemo_store* s = nullptr;
  if (mnemo_store_open_durable(rt, argv[1], &o, &s) != MNEMO_OK) {
    std::fprintf(stderr, "open: %s\n", mnemo_last_error());
    return 4;
  }
  for (;; ++i) {
    const crash::Op op = crash::op_at(seed, i);
    if (crash::run_op(s, op) != MNEMO_OK) {
      std::fprintf(stderr, "op %llu: %s\n", static_cast<unsigned long long>(i), mnemo_last_error());
      return 5;
    }
    const char ack = 'k';
    if (::write(1, &ack, 1) != 1) return 6;
  }
}
