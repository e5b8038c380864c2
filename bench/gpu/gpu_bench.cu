// The GPU side of the benchmark: floors measured in this run (device read
// bandwidth, copy bandwidth, cuBLAS matrix rates) and mnemo's search paths
// on device-resident data, timed with CUDA events (median of repeats after
// warm-up). Inputs that would fit in L2 are rotated among copies. Writes one
// JSON object per line to the file named by argv[1]; the PyTorch peer runs
// the same workloads from torch_peer.py in the same job.
#include <cuda_fp16.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.cuh"
#include "device/cuda_backend.h"
#include "device/exec_context.h"
#include "mnemo.h"
#include "search/search_kernels.h"

using namespace mnemo;
using namespace mnemo::cuda;
using namespace mnemo::cuda::bench;

namespace {

Floors measure_floors(ExecContext& ctx) {
  Floors f{};
  const uint64_t n = 1ull << 30;  // 4 GiB of floats
  DeviceBuffer a(n * 4), b(n * 4), sink(4);
  fill_random<<<4096, 256, 0, ctx.stream>>>(a.get<float>(), n, 1);
  const double r = time_ms(
      ctx.stream,
      [&](int) { read_kernel<<<132 * 16, 512, 0, ctx.stream>>>(a.get<float4>(), n / 4, sink.get<float>()); }, 10, 2);
  f.read_gbs = n * 4 / (r * 1e-3) / 1e9;
  const double c = time_ms(
      ctx.stream,
      [&](int) { check(cudaMemcpyAsync(b.get(), a.get(), n * 4, cudaMemcpyDeviceToDevice, ctx.stream), "copy"); }, 10,
      2);
  f.copy_gbs = 2.0 * n * 4 / (c * 1e-3) / 1e9;
  const int m = 8192;
  DeviceBuffer x(static_cast<size_t>(m) * m * 4), y(static_cast<size_t>(m) * m * 4), z(static_cast<size_t>(m) * m * 4);
  fill_random<<<4096, 256, 0, ctx.stream>>>(x.get<float>(), static_cast<uint64_t>(m) * m, 2);
  fill_random<<<4096, 256, 0, ctx.stream>>>(y.get<float>(), static_cast<uint64_t>(m) * m, 3);
  const float one = 1.0f, zero = 0.0f;
  auto gemm_rate = [&](cudaDataType_t t, cublasComputeType_t comp) {
    const double ms = time_ms(
        ctx.stream,
        [&](int) {
          check_blas(cublasGemmEx(ctx.blas, CUBLAS_OP_T, CUBLAS_OP_N, m, m, m, &one, x.get(), t, m, y.get(), t, m,
                                  &zero, z.get(), CUDA_R_32F, m, comp, CUBLAS_GEMM_DEFAULT),
                     "gemm");
        },
        5, 2);
    return 2.0 * m * m * static_cast<double>(m) / (ms * 1e-3) / 1e12;
  };
  f.tf32_tflops = gemm_rate(CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32);
  f.fp32_tflops = gemm_rate(CUDA_R_32F, CUBLAS_COMPUTE_32F);
  DeviceBuffer hx(static_cast<size_t>(m) * m * 2), hy(static_cast<size_t>(m) * m * 2);
  to_half<<<4096, 256, 0, ctx.stream>>>(x.get<float>(), hx.get<__half>(), static_cast<uint64_t>(m) * m);
  to_half<<<4096, 256, 0, ctx.stream>>>(y.get<float>(), hy.get<__half>(), static_cast<uint64_t>(m) * m);
  {
    const double ms = time_ms(
        ctx.stream,
        [&](int) {
          check_blas(
              cublasGemmEx(ctx.blas, CUBLAS_OP_T, CUBLAS_OP_N, m, m, m, &one, hx.get(), CUDA_R_16F, m, hy.get(),
                           CUDA_R_16F, m, &zero, z.get(), CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "gemm");
        },
        5, 2);
    f.fp16_tflops = 2.0 * m * m * static_cast<double>(m) / (ms * 1e-3) / 1e12;
  }
  check(cudaStreamSynchronize(ctx.stream), "sync");
  std::printf("floors: read %.0f GB/s, copy %.0f GB/s, fp32 %.1f TF/s, tf32 %.1f TF/s, fp16 %.1f TF/s\n", f.read_gbs,
              f.copy_gbs, f.fp32_tflops, f.tf32_tflops, f.fp16_tflops);
  std::fprintf(g_out,
               "{\"workload\": \"floors\", \"impl\": \"measured\", \"read_gbs\": %.1f, \"copy_gbs\": %.1f, "
               "\"fp32_tflops\": %.2f, \"tf32_tflops\": %.2f, \"fp16_tflops\": %.2f}\n",
               f.read_gbs, f.copy_gbs, f.fp32_tflops, f.tf32_tflops, f.fp16_tflops);
  return f;
}

// A resident store of n random rows (unit-normalised norms computed), with
// `copies` independent copies to rotate through when it would sit in L2.
struct BenchStore {
  std::vector<DeviceBuffer> vecs;
  DeviceBuffer ids, norms, biases;
  DType dtype;
  uint64_t n, dim;
  StoreRef ref(int copy, KeyMetric metric) const {
    return StoreRef{vecs[copy % vecs.size()].get(),
                    dtype,
                    dim,
                    static_cast<uint32_t>(dim),
                    static_cast<uint32_t>(n),
                    ids.get<uint64_t>(),
                    norms.get<float>(),
                    biases.get<float>(),
                    nullptr,
                    false,
                    metric,
                    false};
  }
};

BenchStore make_store(ExecContext& ctx, DType dt, uint64_t n, uint64_t dim, int copies) {
  BenchStore s;
  s.dtype = dt;
  s.n = n;
  s.dim = dim;
  DeviceBuffer tmp(n * dim * 4);
  for (int c = 0; c < copies; ++c) {
    fill_random<<<4096, 256, 0, ctx.stream>>>(tmp.get<float>(), n * dim, 100 + c);
    DeviceBuffer v(n * dim * dtype_size(dt));
    if (dt == DType::f32)
      check(cudaMemcpyAsync(v.get(), tmp.get(), n * dim * 4, cudaMemcpyDeviceToDevice, ctx.stream), "copy");
    else if (dt == DType::bf16)
      to_bf16<<<4096, 256, 0, ctx.stream>>>(tmp.get<float>(), v.get<__nv_bfloat16>(), n * dim);
    else
      to_half<<<4096, 256, 0, ctx.stream>>>(tmp.get<float>(), v.get<__half>(), n * dim);
    s.vecs.push_back(std::move(v));
  }
  s.ids.resize(n * 8);
  s.norms.resize(n * 4);
  s.biases.resize(n * 4);
  iota_ids<<<ceil_div(n, 256), 256, 0, ctx.stream>>>(s.ids.get<uint64_t>(), n);
  check(cudaMemsetAsync(s.biases.get(), 0, n * 4, ctx.stream), "memset");
  launch_stored_norms(s.vecs[0].get(), dt, n, dim, s.norms.get<float>(), ctx.stream);
  check(cudaStreamSynchronize(ctx.stream), "sync");
  return s;
}

void bench_search(ExecContext& ctx, const Floors& f, const std::string& name, DType dt, uint64_t n, uint64_t dim,
                  uint64_t nq, uint64_t k, bool fast, KeyMetric metric, int sms) {
  // MNEMO_BENCH_ONLY=text runs only the search rows whose name holds it.
  const char* only = std::getenv("MNEMO_BENCH_ONLY");
  if (only && name.find(only) == std::string::npos) return;
  const uint64_t bytes = n * dim * dtype_size(dt);
  int copies = bytes < (180ull << 20) ? static_cast<int>(std::min<uint64_t>(8, (600ull << 20) / bytes + 1)) : 1;
  // MNEMO_BENCH_COPIES=c: c copies instead (1 leaves a small store in L2;
  // for measuring what the rotation costs).
  if (const char* c = std::getenv("MNEMO_BENCH_COPIES")) copies = std::max(1, std::atoi(c));
  BenchStore s = make_store(ctx, dt, n, dim, copies);
  DeviceBuffer q(nq * dim * 4), qn(nq * 4), ids(nq * k * 8), scores(nq * k * 4);
  fill_random<<<256, 256, 0, ctx.stream>>>(q.get<float>(), nq * dim, 7);
  launch_row_norms(q.get<float>(), static_cast<uint32_t>(nq), dim, qn.get<float>(), ctx.stream);
  const double ms = time_ms(ctx.stream, [&](int i) {
    device_search(ctx, ctx.stream, s.ref(i, metric), q.get<float>(), qn.get<float>(), nq, k, k, fast, 1ull << 30, sms,
                  ids.get<uint64_t>(), scores.get<float>());
  });
  // Floor: the store read once, or the GEMM flops at the matrix rate in use.
  const double read_ms = bytes / (f.read_gbs * 1e9) * 1e3;
  double gemm_ms = 0.0;
  if (nq >= kGemmMinQueries) {
    const double rate = fast ? (dt == DType::f32 ? f.tf32_tflops : f.fp16_tflops) : f.fp32_tflops;
    gemm_ms = 2.0 * nq * n * dim / (rate * 1e12) * 1e3;
  }
  row(name, fast ? "mnemo (FAST)" : "mnemo", ms, std::max(read_ms, gemm_ms));
}

constexpr const char* kHostCallRow = "recall 1q x 10k x 768 f32 cosine k=10 (host call)";

// The whole host call through the C ABI (query upload, search, results
// back), timed with the host clock: what a caller with host data sees.
void bench_host_call(const Floors& f) {
  const uint64_t n = 10000, dim = 768;
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CUDA;
  mnemo_runtime* rt = nullptr;
  if (mnemo_runtime_create(&o, &rt) != MNEMO_OK) {
    std::printf("host call: no CUDA runtime: %s\n", mnemo_last_error());
    return;
  }
  mnemo_store* st = nullptr;
  mnemo_store_create(rt, dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, &st);
  float *v = nullptr, *q = nullptr, *sc = nullptr;
  uint64_t *ids = nullptr, *out = nullptr;
  mnemo_alloc(n * dim * 4, reinterpret_cast<void**>(&v));
  mnemo_alloc(n * 8, reinterpret_cast<void**>(&ids));
  mnemo_alloc(dim * 4, reinterpret_cast<void**>(&q));
  mnemo_alloc(10 * 8, reinterpret_cast<void**>(&out));
  mnemo_alloc(10 * 4, reinterpret_cast<void**>(&sc));
  uint64_t x = 88172645463325252ull;
  for (uint64_t i = 0; i < n * dim; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v[i] = static_cast<float>(x >> 40) / (1u << 24) - 0.5f;
  }
  for (uint64_t i = 0; i < n; ++i) ids[i] = i;
  for (uint64_t d = 0; d < dim; ++d) q[d] = v[d] + 0.01f;
  mnemo_store_add(st, ids, v, MNEMO_DTYPE_F32, n);
  std::vector<double> t;
  for (int i = 0; i < 220; ++i) {
    const auto a = std::chrono::steady_clock::now();
    const mnemo_status s = mnemo_store_search(st, q, 1, 10, nullptr, out, sc);
    const auto b = std::chrono::steady_clock::now();
    if (s != MNEMO_OK) {
      std::printf("host call failed: %s\n", mnemo_last_error());
      break;
    }
    if (i >= 20) t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
  }
  if (!t.empty()) row(kHostCallRow, "mnemo", median(t), n * dim * 4 / (f.read_gbs * 1e9) * 1e3);
  mnemo_free(v), mnemo_free(ids), mnemo_free(q), mnemo_free(out), mnemo_free(sc);
  mnemo_store_destroy(st);
  mnemo_runtime_destroy(rt);
}

// AUTO's break-even: one query, k = 10, host data, the whole C ABI call on
// a CPU runtime against a CUDA runtime, over store sizes. The smallest size
// where the GPU call is faster gives the dispatch threshold in bytes.
void bench_break_even() {
  const uint64_t dim = 768;
  mnemo_runtime_options o = mnemo_runtime_options_default();
  mnemo_runtime *cpu = nullptr, *gpu = nullptr;
  o.backend = MNEMO_BACKEND_CPU;
  mnemo_runtime_create(&o, &cpu);
  o.backend = MNEMO_BACKEND_CUDA;
  if (mnemo_runtime_create(&o, &gpu) != MNEMO_OK) return;
  for (uint64_t n : {256ull, 1024ull, 4096ull, 16384ull, 65536ull, 262144ull}) {
    float *v = nullptr, *q = nullptr, *sc = nullptr;
    uint64_t *ids = nullptr, *out = nullptr;
    mnemo_alloc(n * dim * 4, reinterpret_cast<void**>(&v));
    mnemo_alloc(n * 8, reinterpret_cast<void**>(&ids));
    mnemo_alloc(dim * 4, reinterpret_cast<void**>(&q));
    mnemo_alloc(10 * 8, reinterpret_cast<void**>(&out));
    mnemo_alloc(10 * 4, reinterpret_cast<void**>(&sc));
    uint64_t x = 88172645463325252ull + n;
    for (uint64_t i = 0; i < n * dim; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v[i] = static_cast<float>(x >> 40) / (1u << 24) - 0.5f;
    }
    for (uint64_t i = 0; i < n; ++i) ids[i] = i;
    for (uint64_t d = 0; d < dim; ++d) q[d] = v[d];
    double t[2] = {0, 0};
    mnemo_runtime* rts[2] = {cpu, gpu};
    for (int b = 0; b < 2; ++b) {
      mnemo_store* st = nullptr;
      mnemo_store_create(rts[b], dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, &st);
      mnemo_store_add(st, ids, v, MNEMO_DTYPE_F32, n);
      std::vector<double> ms;
      for (int i = 0; i < 60; ++i) {
        const auto a = std::chrono::steady_clock::now();
        mnemo_store_search(st, q, 1, 10, nullptr, out, sc);
        const auto e = std::chrono::steady_clock::now();
        if (i >= 10) ms.push_back(std::chrono::duration<double, std::milli>(e - a).count());
      }
      t[b] = median(ms);
      mnemo_store_destroy(st);
    }
    std::printf("break-even: n=%-7llu bytes=%-10llu cpu %.4f ms  gpu %.4f ms\n", static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(n * dim * 4), t[0], t[1]);
    std::fprintf(
        g_out,
        "{\"workload\": \"break-even 1q x n x 768 f32 k=10 (host call)\", \"impl\": \"cpu vs cuda\", \"n\": %llu, "
        "\"bytes\": %llu, \"cpu_ms\": %.5f, \"gpu_ms\": %.5f}\n",
        static_cast<unsigned long long>(n), static_cast<unsigned long long>(n * dim * 4), t[0], t[1]);
    mnemo_free(v), mnemo_free(ids), mnemo_free(q), mnemo_free(out), mnemo_free(sc);
  }
  mnemo_runtime_destroy(cpu);
  mnemo_runtime_destroy(gpu);
}

}  // namespace

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "mnemo_gpu.jsonl";
  g_out = std::fopen(path, "w");
  if (!g_out) return 1;
  try {
    ExecContext ctx(0);
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "props");
    std::printf("device: %s, %d SMs, %.0f GiB\n", prop.name, prop.multiProcessorCount,
                prop.totalGlobalMem / double(1ull << 30));
    std::fprintf(g_out, "{\"workload\": \"device\", \"impl\": \"%s\", \"sms\": %d}\n", prop.name,
                 prop.multiProcessorCount);
    const Floors f = measure_floors(ctx);
    const int sms = prop.multiProcessorCount;
    bench_search(ctx, f, "recall 1q x 1M x 768 f32 cosine k=10", DType::f32, 1000000, 768, 1, 10, false,
                 KeyMetric::cosine, sms);
    bench_search(ctx, f, "recall 1q x 1M x 768 f16 cosine k=10", DType::f16, 1000000, 768, 1, 10, false,
                 KeyMetric::cosine, sms);
    bench_search(ctx, f, "recall 1q x 1M x 768 bf16 cosine k=10", DType::bf16, 1000000, 768, 1, 10, false,
                 KeyMetric::cosine, sms);
    bench_search(ctx, f, "recall 1q x 100k x 768 f32 cosine k=10", DType::f32, 100000, 768, 1, 10, false,
                 KeyMetric::cosine, sms);
    bench_search(ctx, f, "recall 1q x 10k x 768 f32 cosine k=10", DType::f32, 10000, 768, 1, 10, false,
                 KeyMetric::cosine, sms);
    bench_search(ctx, f, "recall 1q x 1k x 768 f32 cosine k=10", DType::f32, 1000, 768, 1, 10, false, KeyMetric::cosine,
                 sms);
    bench_search(ctx, f, "recall 1q x 1M x 768 f32 cosine k=1000", DType::f32, 1000000, 768, 1, 1000, false,
                 KeyMetric::cosine, sms);
    bench_search(ctx, f, "recall 100q x 1M x 768 f32 k=10", DType::f32, 1000000, 768, 100, 10, true, KeyMetric::cosine,
                 sms);
    bench_search(ctx, f, "recall 100q x 1M x 768 f32 k=10", DType::f32, 1000000, 768, 100, 10, false, KeyMetric::cosine,
                 sms);
    bench_search(ctx, f, "recall 10000q x 1M x 128 f32 k=10", DType::f32, 1000000, 128, 10000, 10, true,
                 KeyMetric::cosine, sms);
    bench_search(ctx, f, "recall 10000q x 1M x 128 f16 k=10", DType::f16, 1000000, 128, 10000, 10, true,
                 KeyMetric::cosine, sms);
    bench_search(ctx, f, "recall 100q x 1M x 768 f32 k=1024", DType::f32, 1000000, 768, 100, 1024, true,
                 KeyMetric::cosine, sms);
    bench_search(ctx, f, "recall 1q x 1M x 768 f32 l2 k=10", DType::f32, 1000000, 768, 1, 10, false, KeyMetric::l2,
                 sms);
    if (std::getenv("MNEMO_BENCH_ONLY")) {
      // Shapes outside the table, for measuring a path on its own (run only
      // when a filter names them).
      bench_search(ctx, f, "extra 1q x 1M x 768 f16 dot k=10", DType::f16, 1000000, 768, 1, 10, false, KeyMetric::dot,
                   sms);
      bench_search(ctx, f, "extra 2q x 1M x 768 f32 EXACT k=10", DType::f32, 1000000, 768, 2, 10, false,
                   KeyMetric::cosine, sms);
      bench_search(ctx, f, "extra 4q x 1M x 768 f32 EXACT k=10", DType::f32, 1000000, 768, 4, 10, false,
                   KeyMetric::cosine, sms);
      bench_search(ctx, f, "extra 1q x 1M x 768 f32 EXACT k=100", DType::f32, 1000000, 768, 1, 100, false,
                   KeyMetric::cosine, sms);
      bench_search(ctx, f, "extra 100q x 1M x 768 f16 k=10", DType::f16, 1000000, 768, 100, 10, true, KeyMetric::cosine,
                   sms);
      bench_search(ctx, f, "extra 300q x 1M x 768 f32 k=10", DType::f32, 1000000, 768, 300, 10, true, KeyMetric::cosine,
                   sms);
      bench_search(ctx, f, "extra 1000q x 1M x 768 f32 k=10", DType::f32, 1000000, 768, 1000, 10, true,
                   KeyMetric::cosine, sms);
      bench_search(ctx, f, "extra 100q x 1M x 768 f32 k=100", DType::f32, 1000000, 768, 100, 100, true,
                   KeyMetric::cosine, sms);
      bench_search(ctx, f, "extra 100q x 1M x 768 f32 EXACT k=1024", DType::f32, 1000000, 768, 100, 1024, false,
                   KeyMetric::cosine, sms);
      bench_search(ctx, f, "extra 300q x 1M x 768 f32 k=1024", DType::f32, 1000000, 768, 300, 1024, true,
                   KeyMetric::cosine, sms);
      if (std::string(kHostCallRow).find(std::getenv("MNEMO_BENCH_ONLY")) != std::string::npos) bench_host_call(f);
      return 0;
    }
    bench_host_call(f);
    bench_break_even();
    bench_ops(ctx, f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
  std::fclose(g_out);
  return 0;
}
