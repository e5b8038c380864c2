// Multi-GPU benchmark of sharded stores, through the public C ABI (whole
// host calls, wall clock, medians): a store sharded over G GPUs (every GPU
// present, up to 4; and 2 when there are 4) against one GPU.
//   latency:  1q x (1M * G) x 768 f32 over G GPUs   vs 1q x 1M on one
//             (host buffers; and device buffers on the first GPU, the call
//             plus the wait on its stream, where the CUDA runtime is linked)
//   weak:     1000q x (2M * G) x 768 FAST over G    vs 1000q x 2M on one
//   strong:   1000q x 2M x 768 FAST over G (and 2)  vs the same on one
//   add:      (1M * G) x 768 f32 rows added over G  vs the same rows on one,
//             with the one-GPU throughput (GB/s of f32 rows from host memory)
//             and the same rows into a CPU store (the host's share alone)
// Usage: mnemo_multi_bench OUT.jsonl [SCALE]   (SCALE multiplies every row
// count, default 1; 0.05 gives a quick check). Prints one JSON line per
// measurement (also appended to OUT.jsonl) and a table last.
#include <mnemo.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#ifdef MNEMO_BENCH_HAVE_CUDART
#include <cuda_runtime.h>
#endif

namespace {

constexpr uint64_t kDim = 768, kK = 10, kBlock = 1 << 17;  // rows per add call

void check(mnemo_status s, const char* what) {
  if (s == MNEMO_OK) return;
  std::fprintf(stderr, "%s: %s: %s\n", what, mnemo_status_name(s), mnemo_last_error());
  std::exit(1);
}

template <class T>
T* alloc(uint64_t n) {
  void* p = nullptr;
  check(mnemo_alloc(n * sizeof(T), &p), "mnemo_alloc");
  return static_cast<T*>(p);
}

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

mnemo_runtime* runtime(uint32_t gpus, int32_t precision) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CUDA;
  o.precision = precision;
  o.device_count = gpus;  // the first `gpus` devices
  mnemo_runtime* rt = nullptr;
  check(mnemo_runtime_create(&o, &rt), "mnemo_runtime_create");
  return rt;
}

// Random rows, generated once and added block after block under new ids.
struct Data {
  float* block;
  float* queries;
  Data() {
    block = alloc<float>(kBlock * kDim);
    queries = alloc<float>(1000 * kDim);
    std::vector<std::thread> ts;
    const unsigned nt = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    for (unsigned t = 0; t < nt; ++t)
      ts.emplace_back([this, t, nt] {
        std::mt19937 rng(1234 + t);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        for (uint64_t i = t; i < kBlock * kDim; i += nt) block[i] = u(rng);
        for (uint64_t i = t; i < 1000 * kDim; i += nt) queries[i] = u(rng);
      });
    for (auto& th : ts) th.join();
  }
};

// Adds `rows` rows (ids 0..rows-1); returns the wall time in ms.
double fill(mnemo_store* s, const Data& d, uint64_t rows) {
  std::vector<uint64_t> ids(kBlock);
  const double t0 = now_ms();
  for (uint64_t first = 0; first < rows; first += kBlock) {
    const uint64_t n = std::min(kBlock, rows - first);
    uint64_t* idp = alloc<uint64_t>(n);
    for (uint64_t i = 0; i < n; ++i) idp[i] = first + i;
    check(mnemo_store_add(s, idp, d.block, MNEMO_DTYPE_F32, n), "mnemo_store_add");
    mnemo_free(idp);
  }
  return now_ms() - t0;
}

double time_search_host(mnemo_store* s, const Data& d, uint64_t nq, int reps) {
  uint64_t* ids = alloc<uint64_t>(nq * kK);
  float* scores = alloc<float>(nq * kK);
  for (int i = 0; i < 2; ++i) check(mnemo_store_search(s, d.queries, nq, kK, nullptr, ids, scores), "search");
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_ms();
    check(mnemo_store_search(s, d.queries, nq, kK, nullptr, ids, scores), "search");
    t.push_back(now_ms() - t0);
  }
  mnemo_free(ids);
  mnemo_free(scores);
  return median(t);
}

#ifdef MNEMO_BENCH_HAVE_CUDART
void check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

// mnemo_store_search_device with the queries and results on device 0 (the
// first shard's), timed as a caller sees it: the call and the wait on its
// stream.
double time_search_device(mnemo_store* s, const Data& d, uint64_t nq, int reps) {
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  float *q = nullptr, *scores = nullptr;
  uint64_t* ids = nullptr;
  check_cuda(cudaMalloc(&q, nq * kDim * 4), "cudaMalloc");
  check_cuda(cudaMalloc(&ids, nq * kK * 8), "cudaMalloc");
  check_cuda(cudaMalloc(&scores, nq * kK * 4), "cudaMalloc");
  check_cuda(cudaMemcpy(q, d.queries, nq * kDim * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  cudaStream_t st = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
  auto once = [&] {
    check(mnemo_store_search_device(s, q, nq, kK, nullptr, ids, scores, st), "search_device");
    check_cuda(cudaStreamSynchronize(st), "cudaStreamSynchronize");
  };
  for (int i = 0; i < 3; ++i) once();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_ms();
    once();
    t.push_back(now_ms() - t0);
  }
  cudaStreamDestroy(st);
  cudaFree(q);
  cudaFree(ids);
  cudaFree(scores);
  return median(t);
}
#endif

struct Row {
  std::string bench;
  uint32_t gpus;
  uint64_t rows, nq;
  const char* precision;
  double ms, base_ms;
  double gbps = 0;  // add rows: GB/s of input rows at `ms`
};

std::vector<Row> table;
FILE* out = nullptr;

void emit(const Row& r) {
  char line[512];
  std::snprintf(line, sizeof line,
                "{\"bench\": \"%s\", \"gpus\": %u, \"rows\": %llu, \"dim\": %llu, \"nq\": %llu, \"k\": %llu, "
                "\"precision\": \"%s\", \"ms\": %.4f, \"one_gpu_ms\": %.4f, \"ratio\": %.3f, \"gbps\": %.3f}",
                r.bench.c_str(), r.gpus, static_cast<unsigned long long>(r.rows), static_cast<unsigned long long>(kDim),
                static_cast<unsigned long long>(r.nq), static_cast<unsigned long long>(kK), r.precision, r.ms,
                r.base_ms, r.ms / r.base_ms, r.gbps);
  std::printf("%s\n", line);
  std::fflush(stdout);
  if (out) std::fprintf(out, "%s\n", line), std::fflush(out);
  table.push_back(r);
}

// A search measurement: `rows_many` rows over `gpus` against `rows_one` on one.
using TimeFn = double (*)(mnemo_store*, const Data&, uint64_t, int);

void search_case(const char* name, const Data& d, uint32_t gpus, uint64_t rows_many, uint64_t rows_one, uint64_t nq,
                 int32_t precision, int reps, TimeFn time_search = time_search_host) {
  mnemo_runtime* one = runtime(1, precision);
  mnemo_store* s1 = nullptr;
  check(mnemo_store_create(one, kDim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, &s1), "store");
  fill(s1, d, rows_one);
  const double base = time_search(s1, d, nq, reps);
  mnemo_store_destroy(s1);
  mnemo_runtime_destroy(one);
  mnemo_runtime* many = runtime(gpus, precision);
  mnemo_store* sn = nullptr;
  check(mnemo_store_create(many, kDim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, &sn), "store");
  fill(sn, d, rows_many);
  const double ms = time_search(sn, d, nq, reps);
  mnemo_store_destroy(sn);
  mnemo_runtime_destroy(many);
  emit({name, gpus, rows_many, nq, precision == MNEMO_PRECISION_FAST ? "fast" : "exact", ms, base});
}

mnemo_runtime* cpu_runtime() {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CPU;
  mnemo_runtime* rt = nullptr;
  check(mnemo_runtime_create(&o, &rt), "mnemo_runtime_create");
  return rt;
}

double gb_per_s(uint64_t rows, double ms) { return static_cast<double>(rows) * kDim * 4 / (ms * 1e6); }

void add_case(const Data& d, uint32_t gpus, uint64_t rows) {
  // One GPU, G GPUs, then a CPU store (the host's part of an add alone),
  // in turn, three rounds: the median of each. Runs of one setting differ
  // by up to 2x from round to round (fresh host memory each time), so one
  // round of each is not a comparison.
  std::vector<double> t[3];
  for (int round = 0; round < 3; ++round)
    for (int i = 0; i < 3; ++i) {
      mnemo_runtime* rt = i == 2 ? cpu_runtime() : runtime(i == 0 ? 1 : gpus, MNEMO_PRECISION_EXACT);
      mnemo_store* s = nullptr;
      check(mnemo_store_create(rt, kDim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, &s), "store");
      t[i].push_back(fill(s, d, rows));
      mnemo_store_destroy(s);
      mnemo_runtime_destroy(rt);
    }
  const double ms[3] = {median(t[0]), median(t[1]), median(t[2])};
  for (int i = 0; i < 3; ++i)
    std::printf("# add rounds (%s): %.0f %.0f %.0f ms\n",
                i == 0   ? "one GPU"
                : i == 1 ? "all GPUs"
                         : "CPU store",
                t[i][0], t[i][1], t[i][2]);
  emit({"add", gpus, rows, 0, "exact", ms[1], ms[0], gb_per_s(rows, ms[1])});
  emit({"add_one_gpu", 1, rows, 0, "exact", ms[0], ms[0], gb_per_s(rows, ms[0])});
  emit({"add_host_only", 0, rows, 0, "exact", ms[2], ms[0], gb_per_s(rows, ms[2])});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.jsonl [SCALE]\n", argv[0]);
    return 2;
  }
  const double scale = argc > 2 ? std::atof(argv[2]) : 1.0;
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CUDA;
  o.device_count = MNEMO_ALL_DEVICES;
  mnemo_runtime* all = nullptr;
  if (mnemo_runtime_create(&o, &all) != MNEMO_OK) {
    std::printf("skipped: no CUDA backend (%s)\n", mnemo_last_error());
    return 0;
  }
  mnemo_runtime_report rep;
  rep.struct_size = sizeof rep;
  check(mnemo_runtime_info(all, &rep), "mnemo_runtime_info");
  mnemo_runtime_destroy(all);
  const uint32_t G = std::min<uint32_t>(rep.device_count, 4);
  if (G < 2) {
    std::printf("skipped: %u GPU(s); the multi-GPU benchmark needs 2 or more\n", rep.device_count);
    return 0;
  }
  out = std::fopen(argv[1], "a");
  const auto rows = [&](double m) { return std::max<uint64_t>(kBlock, static_cast<uint64_t>(m * 1e6 * scale)); };
  std::printf("# %u GPUs (%s), scale %.3g\n", G, rep.device_name, scale);
  const Data d;
  search_case("latency_1q", d, G, rows(1.0) * G, rows(1.0), 1, MNEMO_PRECISION_EXACT, 21);
#ifdef MNEMO_BENCH_HAVE_CUDART
  search_case("latency_1q_dev", d, G, rows(1.0) * G, rows(1.0), 1, MNEMO_PRECISION_EXACT, 21, time_search_device);
  search_case("strong_1000q_dev", d, G, rows(2.0), rows(2.0), 1000, MNEMO_PRECISION_FAST, 7, time_search_device);
#endif
  search_case("weak_1000q", d, G, rows(2.0) * G, rows(2.0), 1000, MNEMO_PRECISION_FAST, 7);
  search_case("strong_1000q", d, G, rows(2.0), rows(2.0), 1000, MNEMO_PRECISION_FAST, 7);
  if (G == 4) search_case("strong_1000q", d, 2, rows(2.0), rows(2.0), 1000, MNEMO_PRECISION_FAST, 7);
  add_case(d, G, rows(1.0) * G);
  if (out) std::fclose(out);

  std::printf("\n%-14s %5s %10s %6s %6s %11s %11s %8s %7s\n", "bench", "gpus", "rows", "nq", "prec", "ms", "one_gpu_ms",
              "ratio", "GB/s");
  for (const Row& r : table)
    std::printf("%-14s %5u %10llu %6llu %6s %11.3f %11.3f %8.3f %7.2f\n", r.bench.c_str(), r.gpus,
                static_cast<unsigned long long>(r.rows), static_cast<unsigned long long>(r.nq), r.precision, r.ms,
                r.base_ms, r.ms / r.base_ms, r.gbps);
  std::printf(
      "(latency/weak: ratio = time over G GPUs / time on one, goal <= 1.15 / 1.1; _dev: device buffers; strong and "
      "add: speed-up = 1 / "
      "ratio, goal >= 3.4 strong and 3 add on 4 GPUs, 1.85 strong on 2; add_one_gpu >= 12 GB/s; add_host_only: a "
      "CPU store, gpus 0)\n");
  return 0;
}
