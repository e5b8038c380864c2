// Pair scoring on the GPU, for host buffers (staged through the device) or
// device buffers on the caller's stream. Large pair counts over tables
// bigger than L2 are sorted by source first, so each source row is read
// about once; below the measured threshold the unsorted gather is faster
// than paying for the sort.
#include <string>

#include "device/cuda_backend.h"
#include "device/device_args.h"
#include "ops/op_kernels.h"

namespace mnemo::cuda {

namespace {

// Carves 256-byte aligned regions out of one scratch allocation.
struct Carve {
  size_t total = 0;
  size_t add(size_t bytes) {
    const size_t at = total;
    total += (bytes + 255) / 256 * 256;
    return at;
  }
};

}  // namespace

bool pairs_use_sort(uint64_t n_pairs, uint64_t n_items, uint64_t dim, DType dt) {
  if (n_pairs >= (1ull << 32) || n_items > (1ull << 32) || !pairs_sorted_fits(dim)) return false;
  return n_pairs >= kPairsSortMinPairs && n_items * dim * dtype_size(dt) >= kPairsSortMinTableBytes;
}

void CudaBackend::score_pairs(const PairsArgs& a) {
  const uint64_t dim = a.table.cols, n_items = a.table.rows, n = a.n_pairs;
  const DType dt = a.table.dtype;
  const size_t esz = dtype_size(dt), isz = dtype_size(a.index_dtype);
  const bool u64 = a.index_dtype == DType::u64;
  const uint64_t table_bytes = n_items * dim * esz;
  auto ctx = pool_.acquire();
  const bool dev = a.place.on_device;
  cudaStream_t st = dev ? static_cast<cudaStream_t>(a.place.stream) : ctx->stream;
  const void *table = a.table.data, *src = a.src, *tgt = a.tgt;
  float* scores = a.scores;
  if (dev) {
    for (auto [p, name] :
         {std::pair<const void*, const char*>{table, "table"}, {src, "src"}, {tgt, "tgt"}, {scores, "scores"}})
      need_device_memory(p, name, cfg_.device_id);
    ctx->begin_on(st);
    const uint64_t* w = ctx->check_words(st, 2, [&](unsigned long long* d) {
      launch_find_out_of_range(src, u64, n, n_items, d, st);
      launch_find_out_of_range(tgt, u64, n, n_items, d + 1, st);
    });
    for (int i = 0; i < 2; ++i)
      if (w[i] != UINT64_MAX)
        fail(Code::out_of_range, std::string(i == 0 ? "src" : "tgt") + " index of pair " + std::to_string(w[i]) +
                                     " is not below n_items = " + std::to_string(n_items));
    if (a.place.validate) need_finite_on_device(*ctx, st, table, dt, n_items * dim, "table");
  }

  const bool sorted = pairs_use_sort(n, n_items, dim, dt);
  Carve c;
  const size_t o_table = c.add(dev ? 0 : table_bytes), o_src = c.add(dev ? 0 : n * isz),
               o_tgt = c.add(dev ? 0 : n * isz), o_scores = c.add(dev ? 0 : n * 4);
  const size_t sort_temp = sorted ? pairs_sort_temp_bytes(n, n_items) : 0;
  const size_t o_k0 = c.add(sorted ? n * 4 : 0), o_p0 = c.add(sorted ? n * 4 : 0), o_k1 = c.add(sorted ? n * 4 : 0),
               o_p1 = c.add(sorted ? n * 4 : 0), o_temp = c.add(sort_temp);
  auto* base = static_cast<unsigned char*>(ctx->scratch(c.total));
  if (!dev) {
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(base + o_table, table, table_bytes, cudaMemcpyHostToDevice, st));
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(base + o_src, src, n * isz, cudaMemcpyHostToDevice, st));
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(base + o_tgt, tgt, n * isz, cudaMemcpyHostToDevice, st));
    table = base + o_table;
    src = base + o_src;
    tgt = base + o_tgt;
    scores = reinterpret_cast<float*>(base + o_scores);
  }
  const PairTable t{table, dt, dim, a.metric};
  if (sorted) {
    auto* k0 = reinterpret_cast<uint32_t*>(base + o_k0);
    auto* p0 = reinterpret_cast<uint32_t*>(base + o_p0);
    auto* k1 = reinterpret_cast<uint32_t*>(base + o_k1);
    auto* p1 = reinterpret_cast<uint32_t*>(base + o_p1);
    launch_pairs_sort(src, u64, n, n_items, k0, p0, k1, p1, base + o_temp, sort_temp, st);
    launch_pairs_sorted(t, k1, p1, tgt, u64, n, scores, st);
  } else {
    launch_pairs_gather(t, src, tgt, u64, n, scores, st);
  }
  if (dev) {
    ctx->end_on(st);
    return;
  }
  MNEMO_CUDA_CHECK(cudaMemcpyAsync(a.scores, scores, n * 4, cudaMemcpyDeviceToHost, st));
  ctx->sync();
}

}  // namespace mnemo::cuda
