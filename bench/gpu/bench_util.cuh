// Timing and reporting helpers shared by the GPU benchmarks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "device/cuda_util.cuh"

namespace mnemo::cuda {
struct ExecContext;
}

namespace mnemo::cuda::bench {

inline FILE* g_out = nullptr;

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median milliseconds of fn() over `reps` runs after a warm-up (below).
// All runs are queued back to back, each between its own pair of events,
// and the host waits once at the end: the GPU never idles between runs (an
// idle H200 drops its clocks, which would inflate short kernels).
inline double time_ms(cudaStream_t st, const std::function<void(int)>& fn, int reps = 20, int warm = 3) {
  // MNEMO_BENCH_REPS=n times n runs instead (sustained load, for measuring).
  if (const char* r = std::getenv("MNEMO_BENCH_REPS")) reps = std::max(reps, std::atoi(r));
  // Warm-up: `warm` runs and at least kWarmSeconds of this workload. A row
  // that follows heavy matrix work otherwise runs in a transient: on the
  // H200 (power at its 700 W cap) a 16-bit scan took 0.431 ms over its
  // first 20 runs after the floors' GEMMs, 0.384 ms once it had run for
  // about 80 ms.
  constexpr double kWarmSeconds = 0.25;
  int w = 0;
  for (; w < warm; ++w) fn(w);
  check(cudaStreamSynchronize(st), "warm-up");
  for (const auto t0 = std::chrono::steady_clock::now();
       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < kWarmSeconds;) {
    for (int j = 0; j < 8; ++j) fn(w++);
    check(cudaStreamSynchronize(st), "warm-up");
  }
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) check(cudaEventCreate(&e), "event");
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(ev[2 * i], st), "record");
    fn(i);
    check(cudaEventRecord(ev[2 * i + 1], st), "record");
  }
  check(cudaEventSynchronize(ev.back()), "sync");
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "elapsed");
    t.push_back(ms);
  }
  for (auto& e : ev) cudaEventDestroy(e);
  if (std::getenv("MNEMO_BENCH_TIMES")) {
    std::printf("  runs (ms):");
    for (size_t i = 0; i < t.size(); i += std::max<size_t>(1, t.size() / 16)) std::printf(" %.4f", t[i]);
    std::printf("\n");
  }
  return median(t);
}

static __global__ void fill_random(float* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    p[i] = static_cast<float>(x >> 40) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  }
}

static __global__ void to_half(const float* s, __half* d, uint64_t n) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    d[i] = __float2half(s[i]);
}

static __global__ void to_bf16(const float* s, __nv_bfloat16* d, uint64_t n) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    d[i] = __float2bfloat16(s[i]);
}

static __global__ void iota_ids(uint64_t* ids, uint64_t n) {
  const uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
  if (i < n) ids[i] = i;
}

static __global__ void read_kernel(const float4* p, uint64_t n, float* sink) {
  float acc = 0.0f;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const float4 v = __ldg(p + i);
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 12345.678f) *sink = acc;  // keeps the loads alive
}

inline void row(const std::string& workload, const std::string& impl, double ms, double floor_ms,
                const std::string& extra = "") {
  std::fprintf(g_out,
               "{\"workload\": \"%s\", \"impl\": \"%s\", \"median_ms\": %.6f, \"floor_ms\": %.6f, \"pct_of_floor\": "
               "%.1f%s}\n",
               workload.c_str(), impl.c_str(), ms, floor_ms, 100.0 * floor_ms / ms, extra.c_str());
  std::fflush(g_out);
  std::printf("%-44s %-22s %9.4f ms  floor %8.4f ms  %5.1f%%\n", workload.c_str(), impl.c_str(), ms, floor_ms,
              100.0 * floor_ms / ms);
}

// Floors measured in the same run.
struct Floors {
  double read_gbs, copy_gbs, tf32_tflops, fp16_tflops, fp32_tflops;
};

// Pair scoring, resampling and normalisation rows (ops_bench.cu).
void bench_ops(ExecContext& ctx, const Floors& f);

}  // namespace mnemo::cuda::bench
