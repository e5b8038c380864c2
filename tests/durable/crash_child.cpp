// The crash test's child: opens (or creates) a durable store and runs the
// write sequence from a given index, writing one byte to stdout after each
// write returns (the acknowledgement), until it is killed.
// Usage: mnemo_crash_child <store path> <seed> <first op>
//        mnemo_crash_child <store path> save <rows> <first op>: on a store of
//        <rows> rows, op i upserts one row, checkpoints (a streaming snapshot
//        write) and saves a copy beside the store, then acknowledges.
//        mnemo_crash_child <store path> fields <seed> <first op>: the fields
//        sequence (crash_fields.h) instead.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "crash_fields.h"
#include "crash_ops.h"

namespace {

int save_loop(mnemo_store* s, const char* path, uint64_t rows, uint64_t i) {
  const std::string copy = std::string(path) + ".copy";
  crash::AVec<float> v(crash::kDim);
  for (;; ++i) {
    const uint64_t id = crash::save_op_id(i, rows);
    crash::save_op_row(i, v.data());
    if (mnemo_store_add(s, &id, v.data(), MNEMO_DTYPE_F32, 1) != MNEMO_OK || mnemo_store_checkpoint(s) != MNEMO_OK ||
        mnemo_store_save(s, copy.c_str()) != MNEMO_OK) {
      std::fprintf(stderr, "save op %llu: %s\n", static_cast<unsigned long long>(i), mnemo_last_error());
      return 5;
    }
    const char ack = 'k';
    if (::write(1, &ack, 1) != 1) return 6;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[2]) == "save") {
    mnemo_runtime_options ro = mnemo_runtime_options_default();
    ro.backend = MNEMO_BACKEND_CPU;
    ro.num_threads = 1;
    mnemo_runtime* rt = nullptr;
    if (mnemo_runtime_create(&ro, &rt) != MNEMO_OK) return 3;
    mnemo_store* s = nullptr;
    if (mnemo_store_open_durable(rt, argv[1], nullptr, &s) != MNEMO_OK) {
      std::fprintf(stderr, "open: %s\n", mnemo_last_error());
      return 4;
    }
    return save_loop(s, argv[1], std::strtoull(argv[3], nullptr, 10), std::strtoull(argv[4], nullptr, 10));
  }
  const bool fields = argc == 5 && std::string(argv[2]) == "fields";
  if (argc != 4 && !fields) return 2;
  const uint64_t seed = std::strtoull(argv[fields ? 3 : 2], nullptr, 10);
  uint64_t i = std::strtoull(argv[fields ? 4 : 3], nullptr, 10);
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
    const mnemo_status st =
        fields ? crash::run_fields_op(s, crash::fields_op_at(seed, i)) : crash::run_op(s, crash::op_at(seed, i));
    if (st != MNEMO_OK) {
      std::fprintf(stderr, "op %llu: %s\n", static_cast<unsigned long long>(i), mnemo_last_error());
      return 5;
    }
    const char ack = 'k';
    if (::write(1, &ack, 1) != 1) return 6;
  }
}
