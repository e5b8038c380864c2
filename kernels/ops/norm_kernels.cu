// Row L2-normalisation and LayerNorm with f32 statistics. Rows of up to
// 4 KiB whose starts are 16-byte aligned take one warp each, held in
// registers between the statistics and the write (so in place is safe);
// other rows take a block each with a two-level reduction (warp shuffles,
// then one value per warp through shared memory) and re-read the row for
// each pass. When a sum of squares overflows or underflows f32, the row is
// rescaled by its largest magnitude and summed again, so extreme but finite
// inputs keep their contract.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>

#include "device/vec_load.cuh"
#include "ops/op_kernels.h"

namespace mnemo::cuda {

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kBlock = 256;
// Sums of squares outside [kTiny, FLT_MAX] are redone on rescaled values.
constexpr float kTiny = 1e-30f;

template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}
// Two sums at once: independent shuffle chains overlap their latency.
__device__ __forceinline__ void warp_sum2(float& a, float& b) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_xor_sync(kFull, a, o);
    b += __shfl_xor_sync(kFull, b, o);
  }
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

// Two-level block reduction: warp shuffles, then the warps' partials.
template <bool kMax>
__device__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;  // magnitudes are >= 0, so 0 is neutral for max too
  return kMax ? warp_max(v) : warp_sum(v);
}

__device__ __forceinline__ bool outside_d(float ss) { return !(ss >= kTiny && ss <= FLT_MAX); }

// The scale and shift a row's elements get: out = fma(c * rstd, g, b) with
// c = x - mean (for layer norm x and mean centred on the row's first
// element; mean = 0 for L2-normalisation), or (c / m) * rstd when the row
// was rescaled by m.
struct RowScale {
  float mean = 0.0f, inv_m = 1.0f, rstd = 0.0f;
};

// ---- one warp per row, the row in registers -------------------------------

template <class T, int NV, bool kLN>
__global__ void __launch_bounds__(kBlock) rows_warp_kernel(RowsRef r) {
  constexpr int E = Vec16<T>::kElems;
  const uint64_t row = (blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x) / 32;
  if (row >= r.rows) return;
  const int lane = threadIdx.x & 31;
  const uint64_t nvec = r.dim / E;
  const unsigned char* in = static_cast<const unsigned char*>(r.in) + row * r.dim * sizeof(T);
  unsigned char* out = static_cast<unsigned char*>(r.out) + row * r.dim * sizeof(T);
  float x[NV][E];
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const uint64_t v = lane + 32 * i;
    if (v < nvec) {
      Vec16<T>::load(in + v * 16, x[i]);
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) x[i][e] = 0.0f;
    }
  }
  const float n = static_cast<float>(r.dim);
  RowScale s;
  float ss = 0.0f;  // sum of squares about the mean
  if constexpr (kLN) {
    // Centred about the row's first element: x - shift is exact for elements
    // within a factor 2 of it, so the centred row loses nothing to the size
    // of its mean, only to its spread (a mean rounded to f32 would).
    const float shift = __shfl_sync(0xffffffffu, x[0][0], 0);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; ++i)
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (lane + 32 * i < nvec) sum += x[i][e] - shift;
    sum = warp_sum(sum);
    if (isfinite(sum)) {
#pragma unroll
      for (int i = 0; i < NV; ++i)
#pragma unroll
        for (int e = 0; e < E; ++e)
          if (lane + 32 * i < nvec) x[i][e] -= shift;
    } else {  // a difference or the sum overflowed: the values as they are
      sum = 0.0f;
#pragma unroll
      for (int i = 0; i < NV; ++i)
#pragma unroll
        for (int e = 0; e < E; ++e) sum += x[i][e];
      sum = warp_sum(sum);
    }
    if (isfinite(sum)) {
      s.mean = sum / n;
    } else {  // the sum overflowed: average the scaled values instead
      float m = 0.0f;
#pragma unroll
      for (int i = 0; i < NV; ++i)
#pragma unroll
        for (int e = 0; e < E; ++e) m += x[i][e] / n;
      s.mean = warp_sum(m);
    }
    // One pass gives both the residual sum (a refinement of the mean: a
    // constant row then gets its value back exactly, so its variance is
    // exactly 0 as the eps = 0 rule needs) and the squares about the first
    // mean, reduced together: sum (x - mean)^2 = q - n corr^2.
    float res = 0.0f, q = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; ++i)
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (lane + 32 * i < nvec) {
          const float c = x[i][e] - s.mean;
          res += c;
          q = fmaf(c, c, q);
        }
    warp_sum2(res, q);
    const float corr = res / n;
    // (Rows of huge values can overflow the residual sum: keep the first
    // mean then.)
    if (isfinite(corr)) {
      s.mean += corr;
      ss = fmaxf(q - n * corr * corr, 0.0f);
    } else {
      ss = q;
    }
  } else {
#pragma unroll
    for (int i = 0; i < NV; ++i)
#pragma unroll
      for (int e = 0; e < E; ++e) ss = fmaf(x[i][e], x[i][e], ss);
    ss = warp_sum(ss);
  }
  const float extra = kLN ? r.eps : 0.0f;
  if (outside_d(ss)) {
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; ++i)
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (lane + 32 * i < nvec) m = fmaxf(m, fabsf(x[i][e] - s.mean));
    m = warp_max(m);
    if (m == 0.0f) {
      s.rstd = extra > 0.0f ? 1.0f / sqrtf(extra) : 0.0f;
    } else {
      float q = 0.0f;
#pragma unroll
      for (int i = 0; i < NV; ++i)
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const float c = (lane + 32 * i < nvec) ? (x[i][e] - s.mean) / m : 0.0f;
          q = fmaf(c, c, q);
        }
      q = warp_sum(q);
      s.inv_m = 1.0f / m;
      // (c / m) / sqrt(q / n + eps / m^2): the statistics of the scaled row.
      s.rstd = 1.0f / sqrtf((kLN ? q / n : q) + extra / m / m);
    }
  } else {
    s.rstd = (kLN ? ss / n : ss) + extra > 0.0f ? 1.0f / sqrtf((kLN ? ss / n : ss) + extra) : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const uint64_t v = lane + 32 * i;
    if (v >= nvec) continue;
    T o[E];
    // gamma and beta of these E elements: 16-byte loads (E is a multiple
    // of 4 and the arrays are 16-byte aligned), L1-resident across rows.
    float g[E], b[E];
#pragma unroll
    for (int e = 0; e < E; e += 4) {
      const float4 gv = (kLN && r.gamma) ? __ldg(reinterpret_cast<const float4*>(r.gamma + v * E + e))
                                         : make_float4(1.0f, 1.0f, 1.0f, 1.0f);
      const float4 bv = (kLN && r.beta) ? __ldg(reinterpret_cast<const float4*>(r.beta + v * E + e))
                                        : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      g[e] = gv.x, g[e + 1] = gv.y, g[e + 2] = gv.z, g[e + 3] = gv.w;
      b[e] = bv.x, b[e + 1] = bv.y, b[e + 2] = bv.z, b[e + 3] = bv.w;
    }
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float c = (x[i][e] - s.mean) * s.inv_m * s.rstd;
      if constexpr (kLN)
        o[e] = from_f32<T>(fmaf(c, g[e], b[e]));
      else
        o[e] = from_f32<T>(c);
    }
    *reinterpret_cast<uint4*>(out + v * 16) = *reinterpret_cast<const uint4*>(o);
  }
}

// ---- one block per row, any dim and alignment -----------------------------

template <class T, bool kLN>
__global__ void __launch_bounds__(kBlock) rows_block_kernel(RowsRef r) {
  __shared__ float scratch[32];
  const uint64_t row = blockIdx.x;
  const T* in = static_cast<const T*>(r.in) + row * r.dim;
  T* out = static_cast<T*>(r.out) + row * r.dim;
  const float n = static_cast<float>(r.dim);
  RowScale s;
  // Layer norm centres about the row's first element, as the warp kernel
  // does (read by every thread before the first barrier, so in place is safe).
  float shift = kLN ? to_f32<T>(in[0]) : 0.0f;
  auto val = [&](uint64_t d) { return to_f32<T>(in[d]) - shift; };
  if constexpr (kLN) {
    float sum = 0.0f;
    for (uint64_t d = threadIdx.x; d < r.dim; d += blockDim.x) sum += val(d);
    sum = block_reduce<false>(sum, scratch);
    if (!isfinite(sum)) {  // a difference or the sum overflowed: no shift
      shift = 0.0f;
      sum = 0.0f;
      for (uint64_t d = threadIdx.x; d < r.dim; d += blockDim.x) sum += val(d);
      sum = block_reduce<false>(sum, scratch);
    }
    if (isfinite(sum)) {
      s.mean = sum / n;
    } else {
      float m = 0.0f;
      for (uint64_t d = threadIdx.x; d < r.dim; d += blockDim.x) m += val(d) / n;
      s.mean = block_reduce<false>(m, scratch);
    }
    float res = 0.0f;  // the refinement step of the warp kernel
    for (uint64_t d = threadIdx.x; d < r.dim; d += blockDim.x) res += val(d) - s.mean;
    const float corr = block_reduce<false>(res, scratch) / n;
    if (isfinite(corr)) s.mean += corr;
  }
  float ss = 0.0f;
  for (uint64_t d = threadIdx.x; d < r.dim; d += blockDim.x) {
    const float c = val(d) - s.mean;
    ss = fmaf(c, c, ss);
  }
  ss = block_reduce<false>(ss, scratch);
  const float extra = kLN ? r.eps : 0.0f;
  if (outside_d(ss)) {
    float m = 0.0f;
    for (uint64_t d = threadIdx.x; d < r.dim; d += blockDim.x) m = fmaxf(m, fabsf(val(d) - s.mean));
    m = block_reduce<true>(m, scratch);
    if (m == 0.0f) {
      s.rstd = extra > 0.0f ? 1.0f / sqrtf(extra) : 0.0f;
    } else {
      float q = 0.0f;
      for (uint64_t d = threadIdx.x; d < r.dim; d += blockDim.x) {
        const float c = (val(d) - s.mean) / m;
        q = fmaf(c, c, q);
      }
      q = block_reduce<false>(q, scratch);
      s.inv_m = 1.0f / m;
      s.rstd = 1.0f / sqrtf((kLN ? q / n : q) + extra / m / m);
    }
  } else {
    const float v = (kLN ? ss / n : ss) + extra;
    s.rstd = v > 0.0f ? 1.0f / sqrtf(v) : 0.0f;
  }
  // Every element is read by the thread that writes it: in place is safe.
  for (uint64_t d = threadIdx.x; d < r.dim; d += blockDim.x) {
    const float c = (val(d) - s.mean) * s.inv_m * s.rstd;
    if constexpr (kLN) {
      const float g = r.gamma ? r.gamma[d] : 1.0f, b = r.beta ? r.beta[d] : 0.0f;
      out[d] = from_f32<T>(fmaf(c, g, b));
    } else {
      out[d] = from_f32<T>(c);
    }
  }
}

template <class T, bool kLN>
void launch_typed(const RowsRef& r, cudaStream_t st) {
  constexpr int E = Vec16<T>::kElems;
  const bool vec = r.dim % E == 0;
  const uint64_t per_lane = (r.dim / E + 31) / 32;
  if (vec && per_lane <= 8) {
    const unsigned blocks = static_cast<unsigned>((r.rows + kBlock / 32 - 1) / (kBlock / 32));
    if (per_lane <= 1)
      rows_warp_kernel<T, 1, kLN><<<blocks, kBlock, 0, st>>>(r);
    else if (per_lane <= 2)
      rows_warp_kernel<T, 2, kLN><<<blocks, kBlock, 0, st>>>(r);
    else if (per_lane <= 4)
      rows_warp_kernel<T, 4, kLN><<<blocks, kBlock, 0, st>>>(r);
    else if (per_lane <= 6)
      rows_warp_kernel<T, 6, kLN><<<blocks, kBlock, 0, st>>>(r);
    else
      rows_warp_kernel<T, 8, kLN><<<blocks, kBlock, 0, st>>>(r);
    MNEMO_CUDA_LAUNCHED("rows_warp_kernel");
    return;
  }
  // One block per row; the grid's x dimension takes 2^31 - 1 rows at a time.
  const size_t esz = sizeof(T);
  for (uint64_t r0 = 0; r0 < r.rows; r0 += 0x7fffffffull) {
    RowsRef s = r;
    s.rows = std::min<uint64_t>(0x7fffffffull, r.rows - r0);
    s.in = static_cast<const unsigned char*>(r.in) + r0 * r.dim * esz;
    s.out = static_cast<unsigned char*>(r.out) + r0 * r.dim * esz;
    rows_block_kernel<T, kLN><<<static_cast<unsigned>(s.rows), kBlock, 0, st>>>(s);
    MNEMO_CUDA_LAUNCHED("rows_block_kernel");
  }
}

template <bool kLN>
void launch_rows(const RowsRef& r, cudaStream_t st) {
  if (r.rows == 0) return;
  if (r.dtype == DType::f16)
    launch_typed<__half, kLN>(r, st);
  else if (r.dtype == DType::bf16)
    launch_typed<__nv_bfloat16, kLN>(r, st);
  else
    launch_typed<float, kLN>(r, st);
}

}  // namespace

void launch_normalize_rows(const RowsRef& r, cudaStream_t st) { launch_rows<false>(r, st); }
void launch_layer_norm(const RowsRef& r, cudaStream_t st) { launch_rows<true>(r, st); }

}  // namespace mnemo::cuda
