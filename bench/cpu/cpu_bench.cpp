// The CPU benchmark: mnemo (through its C ABI) and FAISS in this process,
// the machine's floors measured in the same run (a multi-threaded read of a
// large buffer, a bare OpenBLAS sgemm), numpy through numpy_peer.py.
// Writes one JSON object per row to the output file; report.py turns the
// rows into the table, the ratios and the plot.
//
// Usage: mnemo_cpu_bench OUT_JSONL [threads=2] [reps=9]
// MNEMO_BENCH_PYTHON names the interpreter for the numpy peer
// (default /usr/bin/python3, Debian's, which has python3-numpy).
#include <cblas.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexScalarQuantizer.h>
#include <immintrin.h>
#include <mnemo.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern "C" void openblas_set_num_threads(int);

namespace {

int g_threads = 2;
int g_reps = 9;
FILE* g_out = nullptr;

// 64-byte aligned, owned.
template <class T>
struct Buf {
  explicit Buf(size_t n) : n(n) {
    if (mnemo_alloc(n * sizeof(T) + 64, reinterpret_cast<void**>(&p)) != MNEMO_OK) std::abort();
  }
  ~Buf() { mnemo_free(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  T* data() { return p; }
  T& operator[](size_t i) { return p[i]; }
  size_t n;
  T* p = nullptr;
};

void check(mnemo_status s, const char* what) {
  if (s != MNEMO_OK) {
    std::fprintf(stderr, "%s: %s (%s)\n", what, mnemo_status_name(s), mnemo_last_error());
    std::exit(1);
  }
}

// Median wall time in ms of reps runs after two warm-ups.
double median_ms(const std::function<void()>& f, int reps = g_reps) {
  f();
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    const auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void row(const std::string& workload, const std::string& impl, double ms, double floor_ms, const char* unit,
         double amount) {
  // amount: bytes (unit "GB/s") or flops ("GFLOP/s").
  const double rate = amount / (ms * 1e-3) / 1e9;
  std::fprintf(g_out,
               "{\"workload\": \"%s\", \"impl\": \"%s\", \"median_ms\": %.4f, \"floor_ms\": %.4f, "
               "\"pct_of_floor\": %.1f, \"rate\": %.2f, \"rate_unit\": \"%s\", \"threads\": %d}\n",
               workload.c_str(), impl.c_str(), ms, floor_ms, floor_ms > 0 ? 100.0 * floor_ms / ms : 0.0, rate, unit,
               g_threads);
  std::fflush(g_out);
  std::printf("  %-44s %-26s %9.3f ms  %7.2f %s  %5.1f%% of floor\n", workload.c_str(), impl.c_str(), ms, rate, unit,
              floor_ms > 0 ? 100.0 * floor_ms / ms : 0.0);
  std::fflush(stdout);
}

void fill_normal(float* x, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) x[i] = nd(rng);
}

void normalize_rows(float* x, size_t rows, size_t dim) {
#pragma omp parallel for
  for (int64_t r = 0; r < static_cast<int64_t>(rows); ++r) {
    double s = 0;
    for (size_t j = 0; j < dim; ++j) s += double(x[r * dim + j]) * x[r * dim + j];
    const float inv = static_cast<float>(1.0 / std::sqrt(s));
    for (size_t j = 0; j < dim; ++j) x[r * dim + j] *= inv;
  }
}

// Sum of n floats with 8 independent AVX2 accumulators in registers:
// load-bound.
__attribute__((target("avx2"))) float sum_avx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    a4 = _mm256_add_ps(a4, _mm256_load_ps(p + i + 32));
    a5 = _mm256_add_ps(a5, _mm256_load_ps(p + i + 40));
    a6 = _mm256_add_ps(a6, _mm256_load_ps(p + i + 48));
    a7 = _mm256_add_ps(a7, _mm256_load_ps(p + i + 56));
  }
  a0 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                     _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  float t[8];
  _mm256_storeu_ps(t, a0);
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

// Read bandwidth: every thread sums its part of a buffer far larger than
// the last-level cache. The floor is the best of the timed runs (a floor is
// what the machine can do; the shared machine's other work only slows it).
double measure_read_gbs() {
  if (!__builtin_cpu_supports("avx2")) {
    std::fprintf(stderr, "the read-bandwidth floor needs AVX2\n");
    std::exit(1);
  }
  const size_t n = size_t{1} << 29;  // 2 GiB of f32
  float* b = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  if (!b) std::abort();
#pragma omp parallel for num_threads(g_threads) schedule(static)
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) b[i] = 1.0f;
  volatile float sink = 0;
  double best = 1e30;
  for (int r = 0; r < g_reps + 2; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    float total = 0;
#pragma omp parallel num_threads(g_threads) reduction(+ : total)
    {
      const size_t t = static_cast<size_t>(omp_get_thread_num()), T = static_cast<size_t>(omp_get_num_threads());
      const size_t chunk = n / T / 64 * 64;  // keeps every part 256-byte aligned
      total += sum_avx2(b + t * chunk, t + 1 == T ? n - t * chunk : chunk);
    }
    sink = sink + total;
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::free(b);
  return double(n * sizeof(float)) / (best * 1e-3) / 1e9;
}

// OpenBLAS's pthreads keep spinning for a while after a call; measured
// next to them, an OpenMP loop loses its cores. Let them go to sleep.
void settle() { std::this_thread::sleep_for(std::chrono::seconds(1)); }

struct Ctx {
  mnemo_runtime* rt = nullptr;
  // Validation off: the same call without the NaN/Inf scan of the inputs
  // that the default runtime makes before writing anything.
  mnemo_runtime* rt_unchecked = nullptr;
  double read_gbs = 0;
  double floor_ms(double bytes) const { return bytes / (read_gbs * 1e9) * 1e3; }
  // The default runtime, then the same call with validation off.
  std::vector<std::pair<mnemo_runtime*, const char*>> variants() const {
    return {{rt, ""}, {rt_unchecked, " (validation off)"}};
  }
};

mnemo_runtime* make_runtime(const char* gemm_min, bool validate = true) {
  if (gemm_min)
    setenv("MNEMO_CPU_GEMM_MIN_QUERIES", gemm_min, 1);
  else
    unsetenv("MNEMO_CPU_GEMM_MIN_QUERIES");
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CPU;
  o.num_threads = static_cast<uint32_t>(g_threads);
  o.validate = validate ? 1 : 0;
  mnemo_runtime* rt = nullptr;
  check(mnemo_runtime_create(&o, &rt), "runtime");
  return rt;
}

mnemo_store* make_store(mnemo_runtime* rt, const float* x, size_t n, size_t dim, int32_t dtype, int32_t metric) {
  mnemo_store* s = nullptr;
  check(mnemo_store_create(rt, dim, dtype, metric, &s), "store create");
  Buf<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = i;
  check(mnemo_store_add(s, ids.data(), x, MNEMO_DTYPE_F32, n), "store add");
  return s;
}

double mnemo_search_ms(mnemo_store* s, const float* q, size_t nq, size_t k) {
  std::vector<uint64_t> ids(nq * k);
  std::vector<float> sc(nq * k);
  return median_ms([&] { check(mnemo_store_search(s, q, nq, k, nullptr, ids.data(), sc.data()), "search"); });
}

void bench_recall(Ctx& c) {
  const size_t N = 100000, D = 768, K = 10, NQ = 100;
  Buf<float> x(N * D), q(NQ * D);
  fill_normal(x.data(), N * D, 1);
  normalize_rows(x.data(), N, D);
  fill_normal(q.data(), NQ * D, 2);
  normalize_rows(q.data(), NQ, D);
  const double flops = 2.0 * NQ * N * D;

  // The bare sgemm of the 100-query shape: its floor.
  double sgemm_ms;
  {
    Buf<float> out(NQ * N);
    openblas_set_num_threads(g_threads);
    sgemm_ms = median_ms([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, NQ, N, D, 1.0f, q.data(), D, x.data(), D, 0.0f, out.data(),
                  N);
    });
    row("floor: sgemm 100 x 100k x 768", "OpenBLAS sgemm", sgemm_ms, sgemm_ms, "GFLOP/s", flops);
    settle();
  }

  for (int32_t metric : {MNEMO_METRIC_COSINE, MNEMO_METRIC_L2SQ}) {
    const std::string m = metric == MNEMO_METRIC_COSINE ? "cosine" : "l2sq";
    mnemo_store* s = make_store(c.rt, x.data(), N, D, MNEMO_DTYPE_F32, metric);
    const std::string w1 = "recall 1q x 100k x 768 f32 " + m + " k=10";
    row(w1, "mnemo", mnemo_search_ms(s, q.data(), 1, K), c.floor_ms(N * D * 4.0), "GB/s", N * D * 4.0);
    const std::string w100 = "recall 100q x 100k x 768 f32 " + m + " k=10";
    row(w100, "mnemo", mnemo_search_ms(s, q.data(), NQ, K), sgemm_ms, "GFLOP/s", flops);
    mnemo_store_destroy(s);

    // FAISS flat index on the same (unit) vectors: inner product = cosine.
    omp_set_num_threads(g_threads);
    openblas_set_num_threads(g_threads);  // FAISS relies on a threaded BLAS for query batches
    std::unique_ptr<faiss::IndexFlat> fi;
    if (metric == MNEMO_METRIC_COSINE)
      fi = std::make_unique<faiss::IndexFlatIP>(D);
    else
      fi = std::make_unique<faiss::IndexFlatL2>(D);
    fi->add(N, x.data());
    std::vector<float> fd(NQ * K);
    std::vector<faiss::Index::idx_t> fl(NQ * K);
    const std::string fname = metric == MNEMO_METRIC_COSINE ? "FAISS IndexFlatIP" : "FAISS IndexFlatL2";
    row(w1, fname, median_ms([&] { fi->search(1, q.data(), K, fd.data(), fl.data()); }), c.floor_ms(N * D * 4.0),
        "GB/s", N * D * 4.0);
    row(w100, fname, median_ms([&] { fi->search(NQ, q.data(), K, fd.data(), fl.data()); }), sgemm_ms, "GFLOP/s", flops);
    settle();
  }

  // 16-bit storage: the floor is the read of the halved bytes.
  for (int32_t dt : {MNEMO_DTYPE_F16, MNEMO_DTYPE_BF16}) {
    const std::string name = dt == MNEMO_DTYPE_F16 ? "f16" : "bf16";
    mnemo_store* s = make_store(c.rt, x.data(), N, D, dt, MNEMO_METRIC_COSINE);
    const std::string w = "recall 1q x 100k x 768 " + name + " cosine k=10";
    row(w, "mnemo", mnemo_search_ms(s, q.data(), 1, K), c.floor_ms(N * D * 2.0), "GB/s", N * D * 2.0);
    mnemo_store_destroy(s);
  }
  {
    omp_set_num_threads(g_threads);
    faiss::IndexScalarQuantizer sq(D, faiss::ScalarQuantizer::QT_fp16, faiss::METRIC_INNER_PRODUCT);
    sq.add(N, x.data());
    std::vector<float> fd(K);
    std::vector<faiss::Index::idx_t> fl(K);
    row("recall 1q x 100k x 768 f16 cosine k=10", "FAISS IndexScalarQuantizer fp16",
        median_ms([&] { sq.search(1, q.data(), K, fd.data(), fl.data()); }), c.floor_ms(N * D * 2.0), "GB/s",
        N * D * 2.0);
  }

  // Where the GEMM path starts paying: both paths at each batch size.
  mnemo_runtime* stream_rt = make_runtime("1000000000");
  mnemo_runtime* gemm_rt = make_runtime("1");
  mnemo_store* ss = make_store(stream_rt, x.data(), N, D, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE);
  mnemo_store* gs = make_store(gemm_rt, x.data(), N, D, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE);
  for (size_t nq : {1, 2, 4, 5, 6, 8, 12, 16, 32}) {
    const std::string w = "switch point: " + std::to_string(nq) + "q x 100k x 768 f32 cosine k=10";
    row(w, "mnemo streaming", mnemo_search_ms(ss, q.data(), nq, K), c.floor_ms(N * D * 4.0), "GB/s", N * D * 4.0);
    row(w, "mnemo sgemm", mnemo_search_ms(gs, q.data(), nq, K), c.floor_ms(N * D * 4.0), "GB/s", N * D * 4.0);
  }
  mnemo_store_destroy(ss);
  mnemo_store_destroy(gs);
  mnemo_runtime_destroy(stream_rt);
  mnemo_runtime_destroy(gemm_rt);
}

void bench_pairs(Ctx& c) {
  const size_t items = 10000, D = 1024, P = 100000;
  Buf<float> t32(items * D);
  fill_normal(t32.data(), items * D, 3);
  Buf<uint16_t> t16(items * D);
  // f32 -> f16, round to nearest even (the compiler's conversion).
  for (size_t i = 0; i < items * D; ++i) {
    const _Float16 h = static_cast<_Float16>(t32[i]);
    std::memcpy(&t16[i], &h, 2);
  }
  Buf<uint32_t> src(P), tgt(P);
  std::mt19937_64 rng(4);
  for (size_t p = 0; p < P; ++p) {
    src[p] = static_cast<uint32_t>(rng() % items);
    tgt[p] = static_cast<uint32_t>(rng() % items);
  }
  std::vector<char> seen(items, 0);
  size_t uniq = 0;
  for (size_t p = 0; p < P; ++p) uniq += !seen[src[p]]++;
  Buf<float> out(P);
  const double bytes = double(uniq + P) * D * 2;
  const double ms = median_ms([&] {
    check(mnemo_score_pairs(c.rt, MNEMO_METRIC_COSINE, t16.data(), MNEMO_DTYPE_F16, items, D, src.data(), tgt.data(),
                            MNEMO_DTYPE_U32, P, out.data()),
          "pairs");
  });
  row("pairs 100k over 10k x 1024 f16 cosine", "mnemo", ms, c.floor_ms(bytes), "GB/s", bytes);
}

void bench_resample(Ctx& c) {
  const size_t B = 1024, S = 512, T = 256, D = 64;
  Buf<float> data(B * S * D), st(B * S), tt(B * T), out(B * T * D);
  fill_normal(data.data(), B * S * D, 5);
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (size_t b = 0; b < B; ++b) {
    float t = 0;
    for (size_t i = 0; i < S; ++i) st[b * S + i] = (t += 0.5f + u(rng));
    for (size_t j = 0; j < T; ++j) tt[b * T + j] = u(rng) * t;
  }
  const double bytes = double(B * S * D + B * T * D) * 4;
  for (const auto& [rt, suffix] : c.variants()) {
    const double ms = median_ms([&] {
      check(mnemo_resample(rt, data.data(), MNEMO_DTYPE_F32, B, S, D, st.data(), tt.data(), MNEMO_DTYPE_F32, T, nullptr,
                           out.data()),
            "resample");
    });
    row(std::string("resample 1024 x 512 -> 256 x 64 f32") + suffix, "mnemo", ms, c.floor_ms(bytes), "GB/s", bytes);
  }
}

void bench_norm(Ctx& c) {
  const size_t R = 1000000, D = 768;
  Buf<float> in(R * D), out(R * D);
#pragma omp parallel for num_threads(g_threads)
  for (int64_t r = 0; r < static_cast<int64_t>(R); ++r) fill_normal(in.data() + r * D, D, 7 + static_cast<uint64_t>(r));
  std::vector<float> g(D), b(D);
  fill_normal(g.data(), D, 8);
  fill_normal(b.data(), D, 9);
  const double bytes = 2.0 * R * D * 4;
  for (const auto& [rt, suffix] : c.variants()) {
    row(std::string("normalize 1M x 768 f32") + suffix, "mnemo",
        median_ms([&] { check(mnemo_normalize_rows(rt, in.data(), out.data(), MNEMO_DTYPE_F32, R, D), "normalize"); }),
        c.floor_ms(bytes), "GB/s", bytes);
    row(std::string("layer_norm 1M x 768 f32") + suffix, "mnemo", median_ms([&] {
          check(mnemo_layer_norm(rt, in.data(), out.data(), MNEMO_DTYPE_F32, R, D, g.data(), b.data(), 1e-5f),
                "layer_norm");
        }),
        c.floor_ms(bytes), "GB/s", bytes);
  }
}

// Runs the numpy peer with the same thread count and copies its rows in.
void run_numpy_peer(const std::string& out_path) {
  const char* py = std::getenv("MNEMO_BENCH_PYTHON");
  const std::string peer_out = out_path + ".numpy";
  const std::string cmd = "OPENBLAS_NUM_THREADS=" + std::to_string(g_threads) +
                          " OMP_NUM_THREADS=" + std::to_string(g_threads) + " " + (py ? py : "/usr/bin/python3") +
                          " " MNEMO_BENCH_CPU_DIR "/numpy_peer.py " + peer_out + " " + std::to_string(g_reps);
  std::printf("numpy peer: %s\n", cmd.c_str());
  std::fflush(stdout);
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "numpy peer failed\n");
    std::exit(1);
  }
  FILE* f = std::fopen(peer_out.c_str(), "r");
  if (!f) {
    std::perror(peer_out.c_str());
    std::exit(1);
  }
  char line[4096];
  while (std::fgets(line, sizeof(line), f)) std::fputs(line, g_out);
  std::fclose(f);
  std::remove(peer_out.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_JSONL [threads] [reps]\n", argv[0]);
    return 2;
  }
  if (argc > 2) g_threads = std::atoi(argv[2]);
  if (argc > 3) g_reps = std::max(7, std::atoi(argv[3]));
  g_out = std::fopen(argv[1], "w");
  if (!g_out) {
    std::perror(argv[1]);
    return 1;
  }
  omp_set_num_threads(g_threads);
  Ctx c;
  c.rt = make_runtime(nullptr);
  c.rt_unchecked = make_runtime(nullptr, false);
  mnemo_runtime_report info;
  info.struct_size = sizeof(info);
  check(mnemo_runtime_info(c.rt, &info), "runtime info");
  std::printf("mnemo %s: %s\n", mnemo_version(), info.device_name);
  c.read_gbs = measure_read_gbs();
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 0) load[0] = -1;
  std::fprintf(g_out,
               "{\"workload\": \"floors\", \"read_gbs\": %.2f, \"threads\": %d, \"device\": \"%s\", "
               "\"load\": %.2f}\n",
               c.read_gbs, g_threads, info.device_name, load[0]);
  std::printf("  floor: read bandwidth %.2f GB/s (%d threads)\n", c.read_gbs, g_threads);
  run_numpy_peer(argv[1]);
  bench_recall(c);
  bench_pairs(c);
  bench_resample(c);
  bench_norm(c);
  mnemo_runtime_destroy(c.rt_unchecked);
  mnemo_runtime_destroy(c.rt);
  std::fclose(g_out);
  return 0;
}
