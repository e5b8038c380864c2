// Pair scoring, resampling and normalisation on device-resident data: the
// kernels timed with CUDA events (what the issue's targets measure), the
// sort-or-gather threshold of pair scoring, and AUTO's break-even for these
// operations on host buffers. The PyTorch peer is torch_ops_peer.py.
#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <tuple>

#include "bench_util.cuh"
#include "device/cuda_backend.h"
#include "device/exec_context.h"
#include "mnemo.h"
#include "ops/op_kernels.h"

namespace mnemo::cuda::bench {

namespace {

__global__ void random_indices(uint32_t* p, uint64_t n, uint64_t limit, uint64_t seed) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    p[i] = static_cast<uint32_t>(x % limit);
  }
}

__global__ void to_bf16(const float* s, __nv_bfloat16* d, uint64_t n) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    d[i] = __float2bfloat16(s[i]);
}

// Evenly spaced times: source i of a row at i / (S - 1), target j at
// j / (T - 1) (torch_ops_peer.py builds the same).
__global__ void even_times(float* p, uint64_t rows, uint64_t n) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < rows * n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    p[i] = n > 1 ? static_cast<float>(i % n) / static_cast<float>(n - 1) : 0.0f;
}

// Random device values of a storage dtype.
DeviceBuffer random_rows(ExecContext& ctx, DType dt, uint64_t n, uint64_t seed) {
  DeviceBuffer f(n * 4), out(n * dtype_size(dt));
  fill_random<<<4096, 256, 0, ctx.stream>>>(f.get<float>(), n, seed);
  if (dt == DType::f16)
    to_half<<<4096, 256, 0, ctx.stream>>>(f.get<float>(), out.get<__half>(), n);
  else if (dt == DType::bf16)
    to_bf16<<<4096, 256, 0, ctx.stream>>>(f.get<float>(), out.get<__nv_bfloat16>(), n);
  else
    check(cudaMemcpyAsync(out.get(), f.get(), n * 4, cudaMemcpyDeviceToDevice, ctx.stream), "copy");
  check(cudaStreamSynchronize(ctx.stream), "sync");
  return out;
}

struct PairsData {
  DeviceBuffer table, src, tgt, scores, k0, p0, k1, p1, temp;
  size_t temp_bytes = 0;
};

PairsData pairs_data(ExecContext& ctx, uint64_t n_items, uint64_t dim, uint64_t n) {
  PairsData d;
  d.table = random_rows(ctx, DType::f16, n_items * dim, 11);
  d.src = DeviceBuffer(n * 4);
  d.tgt = DeviceBuffer(n * 4);
  d.scores = DeviceBuffer(n * 4);
  random_indices<<<4096, 256, 0, ctx.stream>>>(d.src.get<uint32_t>(), n, n_items, 21);
  random_indices<<<4096, 256, 0, ctx.stream>>>(d.tgt.get<uint32_t>(), n, n_items, 22);
  for (DeviceBuffer* b : {&d.k0, &d.p0, &d.k1, &d.p1}) *b = DeviceBuffer(n * 4);
  d.temp_bytes = pairs_sort_temp_bytes(n, n_items);
  d.temp = DeviceBuffer(d.temp_bytes);
  check(cudaStreamSynchronize(ctx.stream), "sync");
  return d;
}

double time_pairs(ExecContext& ctx, PairsData& d, uint64_t n_items, uint64_t dim, uint64_t n, bool sorted) {
  const PairTable t{d.table.get(), DType::f16, dim, Metric::cosine};
  return time_ms(ctx.stream, [&](int) {
    if (sorted) {
      launch_pairs_sort(d.src.get(), false, n, n_items, d.k0.get<uint32_t>(), d.p0.get<uint32_t>(),
                        d.k1.get<uint32_t>(), d.p1.get<uint32_t>(), d.temp.get(), d.temp_bytes, ctx.stream);
      launch_pairs_sorted(t, d.k1.get<uint32_t>(), d.p1.get<uint32_t>(), d.tgt.get(), false, n, d.scores.get<float>(),
                          ctx.stream);
    } else {
      launch_pairs_gather(t, d.src.get(), d.tgt.get(), false, n, d.scores.get<float>(), ctx.stream);
    }
  });
}

// Sources read once (at most every row), targets gathered, indices and
// scores streamed.
double pairs_floor_ms(const Floors& f, uint64_t n_items, uint64_t dim, uint64_t n) {
  const double row = dim * 2.0;
  return (std::min<double>(n_items, n) * row + n * row + n * 12.0) / (f.read_gbs * 1e9) * 1e3;
}

void bench_pairs(ExecContext& ctx, const Floors& f) {
  for (auto [name, n_items, n] :
       {std::tuple<const char*, uint64_t, uint64_t>{"pairs 10M over 1M x 1024 f16 cosine", 1000000, 10000000},
        {"pairs 100k over 10k x 1024 f16 cosine", 10000, 100000}}) {
    PairsData d = pairs_data(ctx, n_items, 1024, n);
    const bool sorted = pairs_use_sort(n, n_items, 1024, DType::f16);
    row(name, sorted ? "mnemo (sorted)" : "mnemo (gather)", time_pairs(ctx, d, n_items, 1024, n, sorted),
        pairs_floor_ms(f, n_items, 1024, n));
  }
  // The threshold: both kernels over pair counts, on a table far past L2
  // and on one inside it.
  for (uint64_t n_items : {1000000ull, 10000ull}) {
    PairsData d = pairs_data(ctx, n_items, 1024, 4000000);
    for (uint64_t n : {4096ull, 16384ull, 65536ull, 262144ull, 1048576ull, 4000000ull}) {
      const double g = time_pairs(ctx, d, n_items, 1024, n, false), s = time_pairs(ctx, d, n_items, 1024, n, true);
      std::printf("break-even pairs: items=%-8llu pairs=%-8llu gather %.4f ms  sorted %.4f ms\n",
                  static_cast<unsigned long long>(n_items), static_cast<unsigned long long>(n), g, s);
      std::fprintf(g_out,
                   "{\"workload\": \"break-even pairs gather vs sorted, 1024 f16\", \"impl\": \"mnemo\", \"n_items\": "
                   "%llu, \"n_pairs\": %llu, \"gather_ms\": %.5f, \"sorted_ms\": %.5f}\n",
                   static_cast<unsigned long long>(n_items), static_cast<unsigned long long>(n), g, s);
    }
  }
}

void bench_resample(ExecContext& ctx, const Floors& f) {
  struct Shape {
    const char* name;
    DType dt;
    uint64_t batch, n_src, n_tgt, dim;
  };
  for (const Shape& s : {Shape{"resample 4096 x 512 -> 256 x 64 f32", DType::f32, 4096, 512, 256, 64},
                         Shape{"resample 4096 x 512 -> 256 x 64 bf16", DType::bf16, 4096, 512, 256, 64},
                         Shape{"resample 256 x 100 -> 50 x 32 f32", DType::f32, 256, 100, 50, 32},
                         Shape{"resample 1024 x 4096 -> 1024 x 256 f32", DType::f32, 1024, 4096, 1024, 256}}) {
    const size_t esz = dtype_size(s.dt);
    const uint64_t in_bytes = s.batch * s.n_src * s.dim * esz, out_bytes = s.batch * s.n_tgt * s.dim * esz;
    // Small shapes rotate among copies so the timed runs do not sit in L2.
    const int copies =
        in_bytes < (180ull << 20) ? static_cast<int>(std::min<uint64_t>(16, (600ull << 20) / in_bytes + 1)) : 1;
    std::vector<DeviceBuffer> data, out;
    for (int c = 0; c < copies; ++c) {
      data.push_back(random_rows(ctx, s.dt, s.batch * s.n_src * s.dim, 31 + c));
      out.emplace_back(out_bytes);
    }
    DeviceBuffer st(s.batch * s.n_src * 4), tt(s.batch * s.n_tgt * 4);
    even_times<<<1024, 256, 0, ctx.stream>>>(st.get<float>(), s.batch, s.n_src);
    even_times<<<1024, 256, 0, ctx.stream>>>(tt.get<float>(), s.batch, s.n_tgt);
    const double ms = time_ms(ctx.stream, [&](int i) {
      const ResampleRef r{
          data[i % copies].get(), s.dt, s.batch, s.n_src, s.dim, s.n_tgt, st.get(), tt.get(), false, nullptr, nullptr,
          out[i % copies].get()};
      launch_resample(r, ctx.stream);
    });
    // Floor: the source rows the targets need (found with the kernels' own
    // f32 arithmetic on these evenly spaced times), the output and times.
    std::vector<char> used(s.n_src, 0);
    for (uint64_t j = 0; j < s.n_tgt; ++j) {
      const float x = static_cast<float>(j) / static_cast<float>(s.n_tgt - 1);
      uint64_t i = 0;
      while (i + 1 < s.n_src && static_cast<float>(i + 1) / static_cast<float>(s.n_src - 1) <= x) ++i;
      used[i] = 1;
      if (i + 1 < s.n_src) used[i + 1] = 1;
    }
    const double rows_read = static_cast<double>(std::count(used.begin(), used.end(), 1));
    const double bytes = s.batch * rows_read * s.dim * esz + out_bytes + s.batch * (s.n_src + s.n_tgt) * 4.0;
    row(s.name, "mnemo", ms, bytes / (f.read_gbs * 1e9) * 1e3);
  }
}

void bench_rows(ExecContext& ctx, const Floors& f) {
  const uint64_t rows = 1000000, dim = 768;
  DeviceBuffer x = random_rows(ctx, DType::f16, rows * dim, 41), y(rows * dim * 2), g(dim * 4), b(dim * 4);
  fill_random<<<4, 256, 0, ctx.stream>>>(g.get<float>(), dim, 42);
  fill_random<<<4, 256, 0, ctx.stream>>>(b.get<float>(), dim, 43);
  const double floor = 2.0 * rows * dim * 2 / (f.read_gbs * 1e9) * 1e3;
  const RowsRef r{x.get(), y.get(), DType::f16, rows, dim, g.get<float>(), b.get<float>(), 1e-5f};
  row("layer_norm 1M x 768 f16", "mnemo", time_ms(ctx.stream, [&](int) { launch_layer_norm(r, ctx.stream); }), floor);
  row("l2-normalize 1M x 768 f16", "mnemo", time_ms(ctx.stream, [&](int) { launch_normalize_rows(r, ctx.stream); }),
      floor);
}

// AUTO's break-even for host buffers: the whole C ABI call on a CPU runtime
// against a CUDA runtime, over sizes.
void bench_host_break_even() {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  mnemo_runtime *cpu = nullptr, *gpu = nullptr;
  o.backend = MNEMO_BACKEND_CPU;
  mnemo_runtime_create(&o, &cpu);
  o.backend = MNEMO_BACKEND_CUDA;
  if (mnemo_runtime_create(&o, &gpu) != MNEMO_OK) return;
  auto median_call = [](const std::function<void()>& call) {
    std::vector<double> ms;
    for (int i = 0; i < 15; ++i) {
      const auto a = std::chrono::steady_clock::now();
      call();
      const auto e = std::chrono::steady_clock::now();
      if (i >= 3) ms.push_back(std::chrono::duration<double, std::milli>(e - a).count());
    }
    return median(ms);
  };
  const uint64_t dim = 768;
  for (uint64_t rows : {1000ull, 10000ull, 100000ull, 1000000ull}) {
    float *in = nullptr, *out = nullptr;
    mnemo_alloc(rows * dim * 4, reinterpret_cast<void**>(&in));
    mnemo_alloc(rows * dim * 4, reinterpret_cast<void**>(&out));
    for (uint64_t i = 0; i < rows * dim; ++i) in[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    double t[2];
    mnemo_runtime* rts[2] = {cpu, gpu};
    for (int k = 0; k < 2; ++k)
      t[k] = median_call([&] { mnemo_normalize_rows(rts[k], in, out, MNEMO_DTYPE_F32, rows, dim); });
    std::printf("break-even normalize: rows=%-8llu cpu %.4f ms  gpu %.4f ms\n", static_cast<unsigned long long>(rows),
                t[0], t[1]);
    std::fprintf(g_out,
                 "{\"workload\": \"break-even normalize n x 768 f32 (host call)\", \"impl\": \"cpu vs cuda\", "
                 "\"rows\": %llu, \"bytes\": %llu, \"cpu_ms\": %.5f, \"gpu_ms\": %.5f}\n",
                 static_cast<unsigned long long>(rows), static_cast<unsigned long long>(2 * rows * dim * 4), t[0],
                 t[1]);
    mnemo_free(in), mnemo_free(out);
  }
  for (uint64_t batch : {64ull, 512ull, 4096ull}) {
    const uint64_t S = 512, T = 256, D = 64;
    float *data = nullptr, *st = nullptr, *tt = nullptr, *out = nullptr;
    mnemo_alloc(batch * S * D * 4, reinterpret_cast<void**>(&data));
    mnemo_alloc(batch * S * 4, reinterpret_cast<void**>(&st));
    mnemo_alloc(batch * T * 4, reinterpret_cast<void**>(&tt));
    mnemo_alloc(batch * T * D * 4, reinterpret_cast<void**>(&out));
    for (uint64_t i = 0; i < batch * S * D; ++i) data[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.0f;
    for (uint64_t i = 0; i < batch * S; ++i) st[i] = static_cast<float>(i % S) / (S - 1);
    for (uint64_t i = 0; i < batch * T; ++i) tt[i] = static_cast<float>(i % T) / (T - 1);
    double ms[2];
    mnemo_runtime* rts[2] = {cpu, gpu};
    for (int k = 0; k < 2; ++k)
      ms[k] = median_call([&] {
        mnemo_resample(rts[k], data, MNEMO_DTYPE_F32, batch, S, D, st, tt, MNEMO_DTYPE_F32, T, nullptr, out);
      });
    std::printf("break-even resample: batch=%-6llu cpu %.4f ms  gpu %.4f ms\n", static_cast<unsigned long long>(batch),
                ms[0], ms[1]);
    std::fprintf(g_out,
                 "{\"workload\": \"break-even resample b x 512 -> 256 x 64 f32 (host call)\", \"impl\": \"cpu vs "
                 "cuda\", \"batch\": %llu, \"bytes\": %llu, \"cpu_ms\": %.5f, \"gpu_ms\": %.5f}\n",
                 static_cast<unsigned long long>(batch), static_cast<unsigned long long>(batch * (S + T) * D * 4),
                 ms[0], ms[1]);
    mnemo_free(data), mnemo_free(st), mnemo_free(tt), mnemo_free(out);
  }
  for (uint64_t n : {1000ull, 10000ull, 100000ull, 1000000ull}) {
    const uint64_t items = 10000, pdim = 1024;
    uint16_t* table = nullptr;
    uint32_t *s = nullptr, *t = nullptr;
    float* sc = nullptr;
    mnemo_alloc(items * pdim * 2, reinterpret_cast<void**>(&table));
    mnemo_alloc(n * 4, reinterpret_cast<void**>(&s));
    mnemo_alloc(n * 4, reinterpret_cast<void**>(&t));
    mnemo_alloc(n * 4, reinterpret_cast<void**>(&sc));
    for (uint64_t i = 0; i < items * pdim; ++i) table[i] = static_cast<uint16_t>(0x3000 + (i * 40503u) % 0x800);
    for (uint64_t i = 0; i < n; ++i) s[i] = (i * 2654435761u) % items, t[i] = (i * 40503u + 7) % items;
    double ms[2];
    mnemo_runtime* rts[2] = {cpu, gpu};
    for (int k = 0; k < 2; ++k)
      ms[k] = median_call([&] {
        mnemo_score_pairs(rts[k], MNEMO_METRIC_COSINE, table, MNEMO_DTYPE_F16, items, pdim, s, t, MNEMO_DTYPE_U32, n,
                          sc);
      });
    std::printf("break-even pairs: pairs=%-8llu cpu %.4f ms  gpu %.4f ms\n", static_cast<unsigned long long>(n), ms[0],
                ms[1]);
    std::fprintf(g_out,
                 "{\"workload\": \"break-even pairs n over 10k x 1024 f16 (host call)\", \"impl\": \"cpu vs cuda\", "
                 "\"n_pairs\": %llu, \"bytes\": %llu, \"cpu_ms\": %.5f, \"gpu_ms\": %.5f}\n",
                 static_cast<unsigned long long>(n), static_cast<unsigned long long>(n * 2 * pdim * 2), ms[0], ms[1]);
    mnemo_free(table), mnemo_free(s), mnemo_free(t), mnemo_free(sc);
  }
  mnemo_runtime_destroy(cpu);
  mnemo_runtime_destroy(gpu);
}

}  // namespace

void bench_ops(ExecContext& ctx, const Floors& f) {
  bench_pairs(ctx, f);
  bench_resample(ctx, f);
  bench_rows(ctx, f);
  bench_host_break_even();
}

}  // namespace mnemo::cuda::bench
