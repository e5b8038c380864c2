// Pair scoring kernels. A warp scores 32 consecutive pairs: lane j fetches
// the indices of pair j once, then the warp walks the pairs with 16-byte
// loads of each row, f32 accumulation and a shuffle reduction, and lane j
// keeps pair j's score so the final write is one coalesced store (or one
// scatter through the sort permutation).
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>

#include "device/vec_load.cuh"
#include "ops/op_kernels.h"

namespace mnemo::cuda {

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kWarpsPerBlock = 8;
// Shared memory the sorted kernel may use per block (opt-in above 48 KiB).
constexpr size_t kSortedSmemMax = 96 << 10;

struct Terms {
  float dot = 0.0f, ss = 0.0f, tt = 0.0f, l2 = 0.0f;
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

__device__ __forceinline__ void add_terms(Terms& a, float x, float y) {
  a.dot = fmaf(x, y, a.dot);
  a.ss = fmaf(x, x, a.ss);
  a.tt = fmaf(y, y, a.tt);
  const float d = x - y;
  a.l2 = fmaf(d, d, a.l2);
}

__device__ __forceinline__ float finish(Metric m, float dot, float ss, float tt, float l2) {
  if (m == Metric::dot) return dot;
  if (m == Metric::l2sq) return l2;
  return (ss == 0.0f || tt == 0.0f) ? 0.0f : dot / (sqrtf(ss) * sqrtf(tt));
}

__device__ __forceinline__ uint64_t index_at(const void* p, bool u64, uint64_t i) {
  return u64 ? __ldg(static_cast<const unsigned long long*>(p) + i) : __ldg(static_cast<const uint32_t*>(p) + i);
}

template <class T>
__device__ __forceinline__ const unsigned char* row_of(const PairTable& t, uint64_t i) {
  return static_cast<const unsigned char*>(t.rows) + i * t.dim * sizeof(T);
}

// Per-lane partial terms of two global rows (summed over the warp later).
template <class T, bool kVec>
__device__ __forceinline__ Terms global_terms(const unsigned char* a, const unsigned char* b, uint64_t dim, int lane) {
  Terms acc;
  if constexpr (kVec) {
    constexpr int E = Vec16<T>::kElems;
    const uint64_t nv = dim / E;
#pragma unroll 2
    for (uint64_t v = lane; v < nv; v += 32) {
      float x[E], y[E];
      Vec16<T>::load(a + v * 16, x);
      Vec16<T>::load(b + v * 16, y);
#pragma unroll
      for (int e = 0; e < E; ++e) add_terms(acc, x[e], y[e]);
    }
  } else {
    const T* x = reinterpret_cast<const T*>(a);
    const T* y = reinterpret_cast<const T*>(b);
    for (uint64_t d = lane; d < dim; d += 32) add_terms(acc, to_f32<T>(x[d]), to_f32<T>(y[d]));
  }
  return acc;
}

template <class T, bool kVec>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    pairs_gather_kernel(PairTable t, const void* src, const void* tgt, bool u64, uint64_t n, float* scores) {
  const int lane = threadIdx.x & 31;
  const uint64_t p0 = (blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x) / 32 * 32;
  if (p0 >= n) return;
  const uint64_t p = p0 + lane;
  const uint64_t my_s = p < n ? index_at(src, u64, p) : 0, my_t = p < n ? index_at(tgt, u64, p) : 0;
  const int count = static_cast<int>(n - p0 < 32 ? n - p0 : 32);
  float mine = 0.0f;
  for (int j = 0; j < count; ++j) {
    const uint64_t s = __shfl_sync(kFull, static_cast<unsigned long long>(my_s), j);
    const uint64_t g = __shfl_sync(kFull, static_cast<unsigned long long>(my_t), j);
    const Terms a = global_terms<T, kVec>(row_of<T>(t, s), row_of<T>(t, g), t.dim, lane);
    const float v = finish(t.metric, warp_sum(a.dot), warp_sum(a.ss), warp_sum(a.tt), warp_sum(a.l2));
    if (lane == j) mine = v;
  }
  if (p < n) scores[p] = mine;
}

// Rows of f32 in shared memory are padded to a multiple of 4 floats.
__host__ __device__ __forceinline__ uint64_t smem_row_floats(uint64_t dim) { return (dim + 3) / 4 * 4; }

template <class T, bool kVec>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    pairs_sorted_kernel(PairTable t, const uint32_t* sorted_src, const uint32_t* perm, const void* tgt, bool u64,
                        uint64_t n, float* scores) {
  extern __shared__ float4 smem4[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  float* srow = reinterpret_cast<float*>(smem4) + warp * smem_row_floats(t.dim);
  const uint64_t p0 = (blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x) / 32 * 32;
  if (p0 >= n) return;
  const uint64_t p = p0 + lane;
  const uint32_t my_s = p < n ? __ldg(sorted_src + p) : 0u, my_perm = p < n ? __ldg(perm + p) : 0u;
  const uint64_t my_t = p < n ? index_at(tgt, u64, my_perm) : 0;
  const int count = static_cast<int>(n - p0 < 32 ? n - p0 : 32);
  const uint64_t dim = t.dim;
  constexpr int E = Vec16<T>::kElems;
  uint32_t cur = 0;
  float ss = 0.0f, mine = 0.0f;
  for (int j = 0; j < count; ++j) {
    const uint32_t s = __shfl_sync(kFull, my_s, j);
    if (j == 0 || s != cur) {  // warp-uniform: a new source row
      __syncwarp();
      const unsigned char* a = row_of<T>(t, s);
      float part = 0.0f;
      if constexpr (kVec) {
        for (uint64_t v = lane; v < dim / E; v += 32) {
          float x[E];
          Vec16<T>::load(a + v * 16, x);
#pragma unroll
          for (int e = 0; e < E; ++e) {
            srow[v * E + e] = x[e];
            part = fmaf(x[e], x[e], part);
          }
        }
      } else {
        for (uint64_t d = lane; d < dim; d += 32) {
          const float x = to_f32<T>(reinterpret_cast<const T*>(a)[d]);
          srow[d] = x;
          part = fmaf(x, x, part);
        }
      }
      ss = warp_sum(part);
      cur = s;
      __syncwarp();
    }
    const uint64_t g = __shfl_sync(kFull, static_cast<unsigned long long>(my_t), j);
    const unsigned char* b = row_of<T>(t, g);
    float dot = 0.0f, tt = 0.0f, l2 = 0.0f;
    if constexpr (kVec) {
#pragma unroll 2
      for (uint64_t v = lane; v < dim / E; v += 32) {
        float y[E];
        Vec16<T>::load(b + v * 16, y);
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const float x = srow[v * E + e], d = x - y[e];
          dot = fmaf(x, y[e], dot);
          tt = fmaf(y[e], y[e], tt);
          l2 = fmaf(d, d, l2);
        }
      }
    } else {
      for (uint64_t d = lane; d < dim; d += 32) {
        const float x = srow[d], y = to_f32<T>(reinterpret_cast<const T*>(b)[d]), e = x - y;
        dot = fmaf(x, y, dot);
        tt = fmaf(y, y, tt);
        l2 = fmaf(e, e, l2);
      }
    }
    const float v = finish(t.metric, warp_sum(dot), ss, warp_sum(tt), warp_sum(l2));
    if (lane == j) mine = v;
  }
  if (p < n) scores[my_perm] = mine;
}

__global__ void sort_inputs_kernel(const void* src, bool u64, uint64_t n, uint32_t* keys, uint32_t* perm) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    keys[i] = static_cast<uint32_t>(index_at(src, u64, i));
    perm[i] = static_cast<uint32_t>(i);
  }
}

int key_bits(uint64_t n_items) {
  int b = 1;
  while (b < 32 && (1ull << b) < n_items) ++b;
  return b;
}

// Vector loads need every row to start on a 16-byte boundary.
bool rows_vectorisable(const PairTable& t) { return t.dim * dtype_size(t.dtype) % 16 == 0; }

template <class F>
void with_type(DType dt, F&& f) {
  if (dt == DType::f16)
    f(__half{});
  else if (dt == DType::bf16)
    f(__nv_bfloat16{});
  else
    f(float{});
}

unsigned grid_for(uint64_t n_pairs) {
  return static_cast<unsigned>((n_pairs + 32 * kWarpsPerBlock - 1) / (32 * kWarpsPerBlock));
}

}  // namespace

void launch_pairs_gather(const PairTable& t, const void* src, const void* tgt, bool u64_index, uint64_t n_pairs,
                         float* scores, cudaStream_t st) {
  if (n_pairs == 0) return;
  with_type(t.dtype, [&](auto e) {
    using T = decltype(e);
    if (rows_vectorisable(t))
      pairs_gather_kernel<T, true>
          <<<grid_for(n_pairs), kWarpsPerBlock * 32, 0, st>>>(t, src, tgt, u64_index, n_pairs, scores);
    else
      pairs_gather_kernel<T, false>
          <<<grid_for(n_pairs), kWarpsPerBlock * 32, 0, st>>>(t, src, tgt, u64_index, n_pairs, scores);
  });
  MNEMO_CUDA_LAUNCHED("pairs_gather_kernel");
}

size_t pairs_sort_temp_bytes(uint64_t n_pairs, uint64_t n_items) {
  size_t bytes = 0;
  MNEMO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr), n_pairs, 0, key_bits(n_items)));
  return bytes;
}

void launch_pairs_sort(const void* src, bool u64_index, uint64_t n_pairs, uint64_t n_items, uint32_t* keys_tmp,
                       uint32_t* perm_tmp, uint32_t* keys_sorted, uint32_t* perm_sorted, void* temp, size_t temp_bytes,
                       cudaStream_t st) {
  sort_inputs_kernel<<<std::min<uint64_t>((n_pairs + 255) / 256, 4096), 256, 0, st>>>(src, u64_index, n_pairs, keys_tmp,
                                                                                      perm_tmp);
  MNEMO_CUDA_LAUNCHED("sort_inputs_kernel");
  // Only the bits an index below n_items can use are sorted (fewer passes).
  MNEMO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_tmp, keys_sorted, perm_tmp, perm_sorted,
                                                   n_pairs, 0, key_bits(n_items), st));
}

bool pairs_sorted_fits(uint64_t dim) { return smem_row_floats(dim) * 4 <= kSortedSmemMax; }

void launch_pairs_sorted(const PairTable& t, const uint32_t* sorted_src, const uint32_t* perm, const void* tgt,
                         bool u64_index, uint64_t n_pairs, float* scores, cudaStream_t st) {
  if (n_pairs == 0) return;
  const size_t row_bytes = smem_row_floats(t.dim) * 4;
  // As many warps (each with its own source row) as the shared memory allows.
  const int warps = static_cast<int>(std::min<size_t>(kWarpsPerBlock, kSortedSmemMax / row_bytes));
  const size_t smem = row_bytes * warps;
  const unsigned blocks = static_cast<unsigned>((n_pairs + 32ull * warps - 1) / (32ull * warps));
  with_type(t.dtype, [&](auto e) {
    using T = decltype(e);
    auto launch = [&](auto kernel) {
      MNEMO_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      kernel<<<blocks, warps * 32, smem, st>>>(t, sorted_src, perm, tgt, u64_index, n_pairs, scores);
    };
    if (rows_vectorisable(t))
      launch(pairs_sorted_kernel<T, true>);
    else
      launch(pairs_sorted_kernel<T, false>);
  });
  MNEMO_CUDA_LAUNCHED("pairs_sorted_kernel");
}

}  // namespace mnemo::cuda
