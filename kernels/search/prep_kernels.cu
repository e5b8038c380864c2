// Small element-wise kernels around the GEMM path: query norms, dtype
// conversions, and turning dot products into keys.
#include "scan/row_dot.cuh"

namespace mnemo::cuda {

namespace {

// bad (or null): bad[r] set to whether row r holds NaN or infinity, the
// device search's query check done on the way.
// One block of kNormThreads a query: one warp looping over a 2048-wide
// query took 8.8 us on the H200, its loads waiting on each other, ahead of
// a scan of a few hundred.
constexpr int kNormThreads = 256;
__global__ void __launch_bounds__(kNormThreads)
    row_norms_kernel(const float* q, uint32_t nq, uint64_t ld, float* norms, unsigned* bad) {
  __shared__ float part[kNormThreads / 32];
  __shared__ unsigned finite_all;
  const uint32_t r = blockIdx.x;
  if (r >= nq) return;
  if (threadIdx.x == 0) finite_all = 1u;
  __syncthreads();
  float acc = 0.0f;
  bool finite = true;
#pragma unroll 4
  for (uint64_t d = threadIdx.x; d < ld; d += kNormThreads) {
    const float v = q[r * ld + d];
    finite = finite && isfinite(v);
    acc = fmaf(v, v, acc);
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(kFullMask, acc, off);
  if (!__all_sync(kFullMask, finite) && threadIdx.x % 32 == 0) finite_all = 0u;
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = threadIdx.x < kNormThreads / 32 ? part[threadIdx.x] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(kFullMask, t, off);
    if (threadIdx.x == 0) {
      norms[r] = sqrtf(t);
      if (bad) bad[r] = finite_all ? 0u : 1u;
    }
  }
}

template <class T>
__global__ void stored_norms_kernel(const T* rows, uint64_t n, uint64_t ld, float* norms) {
  const uint64_t r = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= n) return;
  float acc = 0.0f;
  for (uint64_t d = lane; d < ld; d += 32) {
    const float v = to_f32(rows[r * ld + d]);
    acc = fmaf(v, v, acc);
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(kFullMask, acc, off);
  if (lane == 0) norms[r] = sqrtf(acc);
}

template <class T>
__global__ void f32_to_kernel(const float* src, T* dst, uint64_t n) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = static_cast<T>(src[i]);
}

// Rows of ld divided by their norms (0 for a zero norm, as the kernels' cosine
// scale), then rounded once to T.
template <class T>
__global__ void f32_to_unit_kernel(const float* src, T* dst, uint64_t n, uint64_t ld, const float* norms) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float nrm = norms[i / ld];
  dst[i] = static_cast<T>(nrm != 0.0f ? src[i] * (1.0f / nrm) : 0.0f);
}

template <class T>
__global__ void widen_kernel(const T* src, float* dst, uint64_t n) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = to_f32(src[i]);
}

template <bool ACT>
__global__ void finish_keys_kernel(StoreRef s, const float* qnorms, uint32_t nq, uint32_t first, uint32_t n,
                                   float* dots) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<uint64_t>(nq) * n) return;
  const uint32_t q = static_cast<uint32_t>(i / n);
  const uint32_t slot = first + static_cast<uint32_t>(i % n);
  const SlotMeta m = slot_meta<ACT>(s, slot);
  if (!m.live) {
    dots[i] = __int_as_float(0x7fc00000);
    return;
  }
  float sum = dots[i];
  if (s.metric == KeyMetric::l2) {
    // Expansion; the final candidates are re-scored exactly.
    const float xn = s.norms[slot], qn = qnorms[q];
    sum = fmaxf(fmaf(-2.0f, sum, xn * xn + qn * qn), 0.0f);
  }
  dots[i] = key_of<ACT>(s, sum, qnorms[q], m);
}

// One thread a slot: the memory terms that slot_meta would form inline
// (slot_extra), so the keys do not change by a bit. Dead slots get terms too
// (their keys are never formed).
__global__ void activation_terms_kernel(StoreRef s, float* __restrict__ extra) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= s.slots) return;
  extra[i] = slot_extra(s, i, s.apply_bias ? s.biases[i] : 0.0f);
}

__global__ void f16_misfit_kernel(const float* q, uint64_t nq, uint64_t dim, unsigned long long* result) {
  const uint64_t r = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= nq) return;
  float m = 0.0f;
  for (uint64_t d = lane; d < dim; d += 32) m = fmaxf(m, fabsf(q[r * dim + d]));
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, off));
  // The bounds of fast_queries_fit (cuda_backend.cu).
  if (lane == 0 && (m > 32768.0f || (m > 0.0f && m < 0x1p-10f))) atomicMin(result, static_cast<unsigned long long>(r));
}

}  // namespace

__global__ void negate_kernel(float* x, uint64_t n) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = -x[i];
}

void launch_negate(float* x, uint64_t n, cudaStream_t st) {
  if (n == 0) return;
  negate_kernel<<<ceil_div(n, 256), 256, 0, st>>>(x, n);
  MNEMO_CUDA_LAUNCHED("negate_kernel");
}

void launch_find_f16_misfit(const float* q, uint64_t nq, uint64_t dim, unsigned long long* result, cudaStream_t st) {
  if (nq == 0) return;
  f16_misfit_kernel<<<ceil_div(nq * 32, 256), 256, 0, st>>>(q, nq, dim, result);
  MNEMO_CUDA_LAUNCHED("f16_misfit_kernel");
}

void launch_activation_terms(const StoreRef& s, float* extra, cudaStream_t st) {
  if (s.slots == 0) return;
  activation_terms_kernel<<<ceil_div(s.slots, 256), 256, 0, st>>>(s, extra);
  MNEMO_CUDA_LAUNCHED("activation_terms_kernel");
}

void launch_row_norms(const float* q, uint32_t nq, uint64_t ld, float* norms, cudaStream_t st, unsigned* bad) {
  if (nq == 0) return;
  row_norms_kernel<<<nq, kNormThreads, 0, st>>>(q, nq, ld, norms, bad);
  MNEMO_CUDA_LAUNCHED("row_norms_kernel");
}

void launch_stored_norms(const void* rows, DType t, uint64_t n, uint64_t ld, float* norms, cudaStream_t st) {
  if (n == 0) return;
  const unsigned blocks = ceil_div(n * 32, 256);
  switch (t) {
    case DType::f16: stored_norms_kernel<<<blocks, 256, 0, st>>>(static_cast<const __half*>(rows), n, ld, norms); break;
    case DType::bf16:
      stored_norms_kernel<<<blocks, 256, 0, st>>>(static_cast<const __nv_bfloat16*>(rows), n, ld, norms);
      break;
    default: stored_norms_kernel<<<blocks, 256, 0, st>>>(static_cast<const float*>(rows), n, ld, norms); break;
  }
  MNEMO_CUDA_LAUNCHED("stored_norms_kernel");
}

void launch_f32_to(DType t, const float* src, void* dst, uint64_t n, cudaStream_t st) {
  if (n == 0) return;
  if (t == DType::f16)
    f32_to_kernel<<<ceil_div(n, 256), 256, 0, st>>>(src, static_cast<__half*>(dst), n);
  else
    f32_to_kernel<<<ceil_div(n, 256), 256, 0, st>>>(src, static_cast<__nv_bfloat16*>(dst), n);
  MNEMO_CUDA_LAUNCHED("f32_to_kernel");
}

void launch_f32_to_unit(DType t, const float* src, void* dst, uint64_t rows, uint64_t ld, const float* norms,
                        cudaStream_t st) {
  const uint64_t n = rows * ld;
  if (n == 0) return;
  if (t == DType::f32)
    f32_to_unit_kernel<<<ceil_div(n, 256), 256, 0, st>>>(src, static_cast<float*>(dst), n, ld, norms);
  else if (t == DType::f16)
    f32_to_unit_kernel<<<ceil_div(n, 256), 256, 0, st>>>(src, static_cast<__half*>(dst), n, ld, norms);
  else
    f32_to_unit_kernel<<<ceil_div(n, 256), 256, 0, st>>>(src, static_cast<__nv_bfloat16*>(dst), n, ld, norms);
  MNEMO_CUDA_LAUNCHED("f32_to_unit_kernel");
}

void launch_widen_rows(const void* src, DType t, uint64_t rows, uint64_t ld, float* dst, cudaStream_t st) {
  const uint64_t n = rows * ld;
  if (n == 0) return;
  if (t == DType::f16)
    widen_kernel<<<ceil_div(n, 256), 256, 0, st>>>(static_cast<const __half*>(src), dst, n);
  else
    widen_kernel<<<ceil_div(n, 256), 256, 0, st>>>(static_cast<const __nv_bfloat16*>(src), dst, n);
  MNEMO_CUDA_LAUNCHED("widen_kernel");
}

void launch_finish_keys(const StoreRef& s, const float* qnorms, uint32_t nq, uint32_t first, uint32_t n, float* dots,
                        cudaStream_t st) {
  const uint64_t total = static_cast<uint64_t>(nq) * n;
  if (total == 0) return;
  auto kernel = s.act ? finish_keys_kernel<true> : finish_keys_kernel<false>;
  kernel<<<ceil_div(total, 256), 256, 0, st>>>(s, qnorms, nq, first, n, dots);
  MNEMO_CUDA_LAUNCHED("finish_keys_kernel");
}

}  // namespace mnemo::cuda
