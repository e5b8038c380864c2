// Trajectory resampling. A block takes one batch row and a run of targets:
// phase 1 finds each target's interval (one warp per target, a 32-way
// search: each lane tests one pivot and a ballot narrows the range), over
// the row's source times in shared memory when they fit and in global
// memory otherwise (same search, same results); phase 2 spreads
// (target, 16-byte vector) items over the whole block for the
// interpolation, so any dim keeps every thread busy.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "device/vec_load.cuh"
#include "ops/op_kernels.h"

namespace mnemo::cuda {

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kThreads = 256;
constexpr size_t kTimesSmemMax = 32 << 10;

// What a target becomes: zeros (past the row's valid targets), an exact
// copy of sample `a`, or fma(w, x[a+1] - x[a], x[a]).
enum : uint8_t { kZero = 0, kCopy = 1, kLerp = 2 };

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

// The last i with times[i] <= x, given times[0] <= x < times[S-1].
template <class TT>
__device__ __forceinline__ uint64_t interval_of(const TT* times, uint64_t S, TT x, int lane) {
  uint64_t lo = 0, hi = S - 1;  // times[lo] <= x < times[hi]
  while (hi - lo > 1) {
    const uint64_t step = (hi - lo + 31) / 32;
    const uint64_t pos = lo + (lane + 1) * step;
    // Sorted times make the predicate true for a prefix of the lanes.
    const bool le = pos < hi && times[pos] <= x;
    const uint64_t c = __popc(__ballot_sync(kFull, le));
    const uint64_t nlo = lo + c * step;
    hi = min(hi, nlo + step);
    lo = nlo;
  }
  return lo;
}

template <class T, class TT, bool kVec, bool kSharedTimes>
__global__ void __launch_bounds__(kThreads) resample_kernel(ResampleRef r, uint32_t per_block) {
  extern __shared__ float4 smem4[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem4);
  uint64_t* from = reinterpret_cast<uint64_t*>(smem);
  float* weight = reinterpret_cast<float*>(from + per_block);
  uint8_t* mode = reinterpret_cast<uint8_t*>(weight + per_block);
  const uint64_t b = blockIdx.y, t0 = static_cast<uint64_t>(blockIdx.x) * per_block;
  const uint64_t S = r.src_lengths ? r.src_lengths[b] : r.n_src;
  const uint64_t Tv = r.tgt_lengths ? r.tgt_lengths[b] : r.n_tgt;
  const TT* times = static_cast<const TT*>(r.src_times) + b * r.n_src;
  if constexpr (kSharedTimes) {
    TT* st = reinterpret_cast<TT*>(smem + (per_block * 13 + 15) / 16 * 16);
    for (uint64_t i = threadIdx.x; i < S; i += blockDim.x) st[i] = times[i];
    times = st;
    __syncthreads();
  }
  const TT* targets = static_cast<const TT*>(r.tgt_times) + b * r.n_tgt;
  auto record = [&](uint32_t tl, uint64_t t, auto&& search) {
    uint8_t m = kCopy;
    uint64_t a = 0;
    float w = 0.0f;
    if (t >= Tv) {
      m = kZero;
    } else {
      const TT x = targets[t];
      if (S == 1 || x >= times[S - 1]) {
        a = S - 1;
      } else if (x >= times[0]) {
        a = search(x);
        TT num = x - times[a], den = times[a + 1] - times[a];
        if (!isfinite(den)) {
          // Finite times far apart overflow their difference: the halved
          // operands give the quotient (the CPU backend's rule too).
          num = x / 2 - times[a] / 2;
          den = times[a + 1] / 2 - times[a] / 2;
        }
        TT q = num / den;
        q = q < TT(0) ? TT(0) : (q > TT(1) ? TT(1) : q);
        w = static_cast<float>(q);
        // The end weights copy a sample exactly, whatever its dtype.
        if (w == 1.0f) ++a;
        if (w != 0.0f && w != 1.0f) m = kLerp;
      }
    }
    return [=] {
      from[tl] = a;
      weight[tl] = w;
      mode[tl] = m;
    };
  };
  if constexpr (kSharedTimes) {
    // Times in shared memory: one thread per target, a plain binary search
    // (shared-memory latency is low, so 32 targets per warp at once win).
    for (uint32_t tl = threadIdx.x; tl < per_block && t0 + tl < r.n_tgt; tl += blockDim.x)
      record(tl, t0 + tl, [&](TT x) {
        uint64_t lo = 0, hi = S - 1;  // times[lo] <= x < times[hi]
        while (hi - lo > 1) {
          const uint64_t mid = lo + (hi - lo) / 2;
          if (times[mid] <= x)
            lo = mid;
          else
            hi = mid;
        }
        return lo;
      })();
  } else {
    // Times in global memory: a warp per target, 32 pivots per step, so a
    // search takes log32(S) dependent loads instead of log2(S).
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    for (uint32_t tl = warp; tl < per_block && t0 + tl < r.n_tgt; tl += kThreads / 32) {
      auto write = record(tl, t0 + tl, [&](TT x) { return interval_of<TT>(times, S, x, lane); });
      if (lane == 0) write();
    }
  }
  __syncthreads();

  constexpr int E = kVec ? Vec16<T>::kElems : 1;
  const uint64_t per_row = r.dim / E;  // items per target
  const uint64_t rows_here = r.n_tgt - t0 < per_block ? r.n_tgt - t0 : per_block;
  const size_t row_bytes = r.dim * sizeof(T);
  const unsigned char* data = static_cast<const unsigned char*>(r.data) + b * r.n_src * row_bytes;
  unsigned char* out = static_cast<unsigned char*>(r.out) + (b * r.n_tgt + t0) * row_bytes;
  for (uint64_t g = threadIdx.x; g < rows_here * per_row; g += blockDim.x) {
    const uint64_t tl = g / per_row, v = g - tl * per_row;
    unsigned char* dst = out + tl * row_bytes + v * E * sizeof(T);
    const uint8_t m = mode[tl];
    const unsigned char* pa = data + from[tl] * row_bytes + v * E * sizeof(T);
    if constexpr (kVec) {
      if (m == kZero) {
        *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
      } else if (m == kCopy) {
        *reinterpret_cast<uint4*>(dst) = __ldg(reinterpret_cast<const uint4*>(pa));
      } else {
        float x[E], y[E];
        Vec16<T>::load(pa, x);
        Vec16<T>::load(pa + row_bytes, y);
        const float w = weight[tl];
        T o[E];
#pragma unroll
        for (int e = 0; e < E; ++e) o[e] = from_f32<T>(fmaf(w, y[e] - x[e], x[e]));
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(o);
      }
    } else {
      T* d = reinterpret_cast<T*>(dst);
      const T* xa = reinterpret_cast<const T*>(pa);
      if (m == kZero) {
        *d = from_f32<T>(0.0f);
      } else if (m == kCopy) {
        *d = *xa;
      } else {
        const T* xb = reinterpret_cast<const T*>(pa + row_bytes);
        const float x = to_f32<T>(*xa), y = to_f32<T>(*xb);
        *d = from_f32<T>(fmaf(weight[tl], y - x, x));
      }
    }
  }
}

template <class T, class TT>
void launch_typed(const ResampleRef& r, cudaStream_t st) {
  const bool vec = r.dim * sizeof(T) % 16 == 0;
  const uint64_t per_row = vec ? r.dim * sizeof(T) / 16 : r.dim;
  // About 2048 items per block: enough work per thread, few re-reads of the
  // row's times by the blocks of one row.
  const size_t times_bytes = r.n_src * sizeof(TT);
  const bool shared = times_bytes <= kTimesSmemMax;
  uint64_t per_block = std::max<uint64_t>(8, std::min<uint64_t>({r.n_tgt, 256, (2048 + per_row - 1) / per_row}));
  // Each block copies its row's times to shared memory: give it at least
  // four times that many items of work.
  if (shared)
    per_block = std::max(per_block, std::min<uint64_t>({r.n_tgt, 1024, (4 * r.n_src + per_row - 1) / per_row}));
  const size_t plan_bytes = (per_block * 13 + 15) / 16 * 16;
  const size_t smem = plan_bytes + (shared ? times_bytes : 0);
  const dim3 grid(static_cast<unsigned>((r.n_tgt + per_block - 1) / per_block), static_cast<unsigned>(r.batch));
  const uint32_t pb = static_cast<uint32_t>(per_block);
  if (vec) {
    if (shared)
      resample_kernel<T, TT, true, true><<<grid, kThreads, smem, st>>>(r, pb);
    else
      resample_kernel<T, TT, true, false><<<grid, kThreads, smem, st>>>(r, pb);
  } else {
    if (shared)
      resample_kernel<T, TT, false, true><<<grid, kThreads, smem, st>>>(r, pb);
    else
      resample_kernel<T, TT, false, false><<<grid, kThreads, smem, st>>>(r, pb);
  }
  MNEMO_CUDA_LAUNCHED("resample_kernel");
}

template <class T>
void launch_times(const ResampleRef& r, cudaStream_t st) {
  if (r.f64_times)
    launch_typed<T, double>(r, st);
  else
    launch_typed<T, float>(r, st);
}

}  // namespace

void launch_resample(const ResampleRef& r, cudaStream_t st) {
  if (r.batch == 0 || r.n_tgt == 0) return;
  // The grid's y dimension holds at most 65535 rows: larger batches go in
  // slices.
  const size_t esz = dtype_size(r.dtype), tsz = r.f64_times ? 8 : 4;
  for (uint64_t b0 = 0; b0 < r.batch; b0 += 65535) {
    ResampleRef s = r;
    s.batch = std::min<uint64_t>(65535, r.batch - b0);
    s.data = static_cast<const unsigned char*>(r.data) + b0 * r.n_src * r.dim * esz;
    s.out = static_cast<unsigned char*>(r.out) + b0 * r.n_tgt * r.dim * esz;
    s.src_times = static_cast<const unsigned char*>(r.src_times) + b0 * r.n_src * tsz;
    s.tgt_times = static_cast<const unsigned char*>(r.tgt_times) + b0 * r.n_tgt * tsz;
    if (r.src_lengths) s.src_lengths = r.src_lengths + b0;
    if (r.tgt_lengths) s.tgt_lengths = r.tgt_lengths + b0;
    if (r.dtype == DType::f16)
      launch_times<__half>(s, st);
    else if (r.dtype == DType::bf16)
      launch_times<__nv_bfloat16>(s, st);
    else
      launch_times<float>(s, st);
  }
}

}  // namespace mnemo::cuda
