// Content checks over device memory for the _device entry points: the same
// questions core/validate.h answers on the host, each reduced to the first
// offending position with an atomic minimum.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/op_kernels.h"

namespace mnemo::cuda {

namespace {

constexpr int kThreads = 256;

unsigned grid_for(uint64_t n) { return static_cast<unsigned>(std::min<uint64_t>((n + kThreads - 1) / kThreads, 8192)); }

#define MNEMO_GRID_STRIDE(i, n)                                                            \
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)

__device__ __forceinline__ bool finite_at(const void* p, DType t, uint64_t i) {
  switch (t) {
    case DType::f16: return isfinite(__half2float(static_cast<const __half*>(p)[i]));
    case DType::bf16: return isfinite(__bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]));
    case DType::f64: return isfinite(static_cast<const double*>(p)[i]);
    default: return isfinite(static_cast<const float*>(p)[i]);
  }
}

__device__ __forceinline__ double time_at(const void* p, bool f64, uint64_t i) {
  return f64 ? static_cast<const double*>(p)[i] : static_cast<const float*>(p)[i];
}

__global__ void non_finite_kernel(const void* data, DType t, uint64_t n, unsigned long long* result) {
  MNEMO_GRID_STRIDE(i, n) {
    if (!finite_at(data, t, i)) atomicMin(result, static_cast<unsigned long long>(i));
  }
}

__global__ void poison_bad_rows_kernel(const unsigned* bad, uint64_t nq, uint64_t k, uint64_t* ids, float* scores,
                                       int32_t* status) {
  MNEMO_GRID_STRIDE(i, nq * k) {
    if (bad[i / k]) {
      ids[i] = ~0ull;
      scores[i] = __int_as_float(0x7fc00000);
    }
  }
  if (status == nullptr || blockIdx.x != 0) return;
  bool any = false;
  for (uint64_t q = threadIdx.x; q < nq; q += blockDim.x) any = any || bad[q] != 0;
  // mnemo_status codes, pinned by the ABI: MNEMO_OK 0, MNEMO_E_NON_FINITE 6.
  if (__syncthreads_or(any)) {
    if (threadIdx.x == 0) *status = 6;
  } else if (threadIdx.x == 0) {
    *status = 0;
  }
}

__global__ void out_of_range_kernel(const void* index, bool u64, uint64_t n, uint64_t limit,
                                    unsigned long long* result) {
  MNEMO_GRID_STRIDE(i, n) {
    const uint64_t v = u64 ? static_cast<const unsigned long long*>(index)[i] : static_cast<const uint32_t*>(index)[i];
    if (v >= limit) atomicMin(result, static_cast<unsigned long long>(i));
  }
}

__device__ __forceinline__ uint64_t src_len(const ResampleRef& r, uint64_t b) {
  // Clamped so a bad length never sends a later check out of bounds.
  const uint64_t s = r.src_lengths ? r.src_lengths[b] : r.n_src;
  return s > r.n_src ? r.n_src : s;
}
__device__ __forceinline__ uint64_t tgt_len(const ResampleRef& r, uint64_t b) {
  const uint64_t s = r.tgt_lengths ? r.tgt_lengths[b] : r.n_tgt;
  return s > r.n_tgt ? r.n_tgt : s;
}

__global__ void resample_lengths_kernel(ResampleRef r, unsigned long long* result) {
  MNEMO_GRID_STRIDE(b, r.batch) {
    const uint64_t s = r.src_lengths ? r.src_lengths[b] : r.n_src;
    const uint64_t t = r.tgt_lengths ? r.tgt_lengths[b] : r.n_tgt;
    if (s == 0 || s > r.n_src || t > r.n_tgt) atomicMin(result, static_cast<unsigned long long>(b));
  }
}

__global__ void resample_src_times_kernel(ResampleRef r, bool finite, unsigned long long* result) {
  MNEMO_GRID_STRIDE(e, r.batch * r.n_src) {
    const uint64_t b = e / r.n_src, i = e - b * r.n_src;
    if (i >= src_len(r, b)) continue;
    const double x = time_at(r.src_times, r.f64_times, e);
    if (finite && !isfinite(x)) atomicMin(result + 2, static_cast<unsigned long long>(e));
    if (i > 0 && x < time_at(r.src_times, r.f64_times, e - 1))
      atomicMin(result + 1, static_cast<unsigned long long>(e));
  }
}

__global__ void resample_tgt_times_kernel(ResampleRef r, unsigned long long* result) {
  MNEMO_GRID_STRIDE(e, r.batch * r.n_tgt) {
    const uint64_t b = e / r.n_tgt, i = e - b * r.n_tgt;
    if (i < tgt_len(r, b) && !isfinite(time_at(r.tgt_times, r.f64_times, e)))
      atomicMin(result + 3, static_cast<unsigned long long>(e));
  }
}

__global__ void resample_data_kernel(ResampleRef r, unsigned long long* result) {
  MNEMO_GRID_STRIDE(e, r.batch * r.n_src * r.dim) {
    const uint64_t row = e / r.dim, b = row / r.n_src, i = row - b * r.n_src;
    if (i < src_len(r, b) && !finite_at(r.data, r.dtype, e)) atomicMin(result + 4, static_cast<unsigned long long>(e));
  }
}

}  // namespace

void launch_poison_bad_rows(const unsigned* bad, uint64_t nq, uint64_t k, uint64_t* ids, float* scores, int32_t* status,
                            cudaStream_t st) {
  if (nq == 0) return;
  poison_bad_rows_kernel<<<grid_for(nq * k), kThreads, 0, st>>>(bad, nq, k, ids, scores, status);
  MNEMO_CUDA_LAUNCHED("poison_bad_rows_kernel");
}

void launch_find_non_finite(const void* data, DType t, uint64_t n, unsigned long long* result, cudaStream_t st) {
  if (n == 0) return;
  non_finite_kernel<<<grid_for(n), kThreads, 0, st>>>(data, t, n, result);
  MNEMO_CUDA_LAUNCHED("non_finite_kernel");
}

void launch_find_out_of_range(const void* index, bool u64, uint64_t n, uint64_t limit, unsigned long long* result,
                              cudaStream_t st) {
  if (n == 0) return;
  out_of_range_kernel<<<grid_for(n), kThreads, 0, st>>>(index, u64, n, limit, result);
  MNEMO_CUDA_LAUNCHED("out_of_range_kernel");
}

void launch_check_resample(const ResampleRef& r, bool finite, unsigned long long* result, cudaStream_t st) {
  resample_lengths_kernel<<<grid_for(r.batch), kThreads, 0, st>>>(r, result);
  resample_src_times_kernel<<<grid_for(r.batch * r.n_src), kThreads, 0, st>>>(r, finite, result);
  if (finite) {
    resample_tgt_times_kernel<<<grid_for(r.batch * r.n_tgt), kThreads, 0, st>>>(r, result);
    resample_data_kernel<<<grid_for(r.batch * r.n_src * r.dim), kThreads, 0, st>>>(r, result);
  }
  MNEMO_CUDA_LAUNCHED("resample check kernels");
}

}  // namespace mnemo::cuda
