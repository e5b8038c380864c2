// Activation search against the plain search of the same store in the same
// run: 1 query, k = 10, cosine over N x 768 f32, the calls interleaved
// (plain, activation, normalised, plain, ...) so drift hits all alike, and
// the median of each. On the CPU the whole host call is timed with the
// steady clock; on a GPU (built with CUDA) the device-pointer call is timed
// with CUDA events on the caller's stream, the store resident on the device.
// Usage: mnemo_activation_bench OUT.jsonl cpu|cuda N REPS [THREADS]
#include <mnemo.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#ifdef MNEMO_BENCH_CUDA
#include <cuda_runtime.h>
#endif

namespace {

void check(mnemo_status s, const char* what) {
  if (s == MNEMO_OK) return;
  std::fprintf(stderr, "%s: %s: %s\n", what, mnemo_status_name(s), mnemo_last_error());
  std::exit(1);
}

template <class T>
T* alloc(size_t n) {
  void* p = nullptr;
  check(mnemo_alloc(n * sizeof(T), &p), "alloc");
  return static_cast<T*>(p);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

uint64_t g_x = 88172645463325252ull;
float next_uniform() {
  g_x ^= g_x << 13, g_x ^= g_x >> 7, g_x ^= g_x << 17;
  return static_cast<float>(g_x >> 40) / static_cast<float>(1u << 24) - 0.5f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s OUT.jsonl cpu|cuda N REPS [THREADS]\n", argv[0]);
    return 2;
  }
  const std::string backend = argv[2];
  const uint64_t n = std::strtoull(argv[3], nullptr, 10), dim = 768, k = 10, nq_rot = 8;
  const int reps = std::atoi(argv[4]);
  const bool gpu = backend == "cuda";
#ifndef MNEMO_BENCH_CUDA
  if (gpu) {
    std::fprintf(stderr, "built without CUDA\n");
    return 2;
  }
#endif
  mnemo_runtime_options ro = mnemo_runtime_options_default();
  ro.backend = gpu ? MNEMO_BACKEND_CUDA : MNEMO_BACKEND_CPU;
  if (argc > 5) ro.num_threads = static_cast<uint32_t>(std::atoi(argv[5]));
  mnemo_runtime* rt = nullptr;
  check(mnemo_runtime_create(&ro, &rt), "runtime");
  mnemo_store* st = nullptr;
  check(mnemo_store_create(rt, dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, &st), "store");

  // Filled in batches so the host never holds the whole store twice.
  const double now = 1.7e9;
  const uint64_t batch = 65536;
  float* v = alloc<float>(batch * dim);
  uint64_t* ids = alloc<uint64_t>(batch);
  double* times = alloc<double>(batch);
  float* imp = alloc<float>(batch);
  for (uint64_t first = 0; first < n; first += batch) {
    const uint64_t m = std::min(batch, n - first);
    for (uint64_t i = 0; i < m * dim; ++i) v[i] = next_uniform();
    for (uint64_t i = 0; i < m; ++i) {
      ids[i] = first + i;
      times[i] = now - 3e7 * (next_uniform() + 0.5f);  // the last year
      imp[i] = 10.0f * (next_uniform() + 0.5f);
    }
    check(mnemo_store_add_memories(st, ids, v, MNEMO_DTYPE_F32, m, times, imp), "add");
  }
  float* q = alloc<float>(nq_rot * dim);
  for (uint64_t i = 0; i < nq_rot * dim; ++i) q[i] = next_uniform();
  uint64_t* out_ids = alloc<uint64_t>(k);
  float* out_scores = alloc<float>(k);

  struct Mode {
    const char* name;
    mnemo_search_options o;
    std::vector<double> ms;
  };
  // A second plain mode between the others: the spread of the run itself.
  std::vector<Mode> modes(4);
  for (Mode& m : modes) m.o = mnemo_search_options_default();
  modes[0].name = "plain";
  modes[2].name = "plain (again)";
  for (int i : {1, 3}) {
    mnemo_search_options& o = modes[i].o;
    o.activation = 1;
    o.w_recency = 0.5f;
    o.w_importance = 0.05f;
    o.half_life = 86400.0;
    o.now = now;
  }
  modes[1].name = "activation";
  modes[3].name = "activation normalized";
  modes[3].o.normalize = 1;

#ifdef MNEMO_BENCH_CUDA
  float* dq = nullptr;
  uint64_t* dids = nullptr;
  float* dscores = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t e0, e1;
  if (gpu) {
    cudaMalloc(&dq, nq_rot * dim * 4);
    cudaMalloc(&dids, k * 8);
    cudaMalloc(&dscores, k * 4);
    cudaMemcpy(dq, q, nq_rot * dim * 4, cudaMemcpyHostToDevice);
    cudaStreamCreate(&stream);
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
  }
#endif
  for (int r = 0; r < reps + 5; ++r) {
    for (Mode& m : modes) {
      const uint64_t qi = static_cast<uint64_t>(r) % nq_rot;
      double ms = 0.0;
#ifdef MNEMO_BENCH_CUDA
      if (gpu) {
        cudaEventRecord(e0, stream);
        check(mnemo_store_search_device(st, dq + qi * dim, 1, k, &m.o, dids, dscores, stream), m.name);
        cudaEventRecord(e1, stream);
        cudaEventSynchronize(e1);
        float f = 0.0f;
        cudaEventElapsedTime(&f, e0, e1);
        ms = f;
      }
#endif
      if (!gpu) {
        const auto a = std::chrono::steady_clock::now();
        check(mnemo_store_search(st, q + qi * dim, 1, k, &m.o, out_ids, out_scores), m.name);
        ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
      }
      if (r >= 5) m.ms.push_back(ms);  // the first calls warm caches and pools
    }
  }
  FILE* out = std::fopen(argv[1], "w");
  if (!out) return 1;
  const double plain = median(modes[0].ms);
  const std::string workload = "recall 1q x " + std::to_string(n) + " x 768 f32 cosine k=10 (" + backend + ")";
  std::printf("%-48s %-24s %10s %8s\n", "workload", "mode", "median ms", "/ plain");
  for (const Mode& m : modes) {
    const double med = median(m.ms);
    std::fprintf(out, "{\"workload\": \"%s\", \"impl\": \"mnemo %s\", \"median_ms\": %.4f, \"ratio_to_plain\": %.4f}\n",
                 workload.c_str(), m.name, med, med / plain);
    std::printf("%-48s %-24s %10.4f %8.3f\n", workload.c_str(), m.name, med, med / plain);
  }
  std::fclose(out);
  mnemo_store_destroy(st);
  mnemo_runtime_destroy(rt);
  return 0;
}
