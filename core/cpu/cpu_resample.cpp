// Trajectory resampling by linear interpolation, with the end and
// equal-time rules of mnemo.h (numpy.interp's).
#include <cmath>
#include <cstring>

#include "cpu_backend.h"
#include "simd_kernels.h"

namespace mnemo::cpu {

namespace {

// Interval and weight for target t over times[0..S), S >= 2, with
// times[0] <= t < times[S-1]: i is the last index with times[i] <= t, so
// times[i] <= t < times[i+1] and the denominator is positive.
template <class T>
inline void interval_of(const T* times, uint64_t S, T t, uint64_t& i, float& w) {
  // Branch-free bisection over [0, S-1): the loads do not wait on
  // mispredicted compares.
  uint64_t lo = 0, len = S - 1;
  while (len > 1) {
    const uint64_t half = len / 2;
    lo = times[lo + half] <= t ? lo + half : lo;
    len -= half;
  }
  i = lo;
  T num = t - times[lo], den = times[lo + 1] - times[lo];
  if (!std::isfinite(den)) {
    // Finite times far apart overflow their difference: halving every
    // operand is exact and gives the same quotient.
    num = t / 2 - times[lo] / 2;
    den = times[lo + 1] / 2 - times[lo] / 2;
  }
  T r = num / den;
  r = r < T(0) ? T(0) : (r > T(1) ? T(1) : r);
  w = static_cast<float>(r);
}

template <class T>
void run(const CpuBackend& be, const ResampleArgs& a) {
  const size_t esz = dtype_size(a.data_dtype);
  const uint64_t D = a.dim;
  const auto* data = static_cast<const unsigned char*>(a.data);
  auto* out = static_cast<unsigned char*>(a.out);
  const T* st = static_cast<const T*>(a.src_times);
  const T* tt = static_cast<const T*>(a.tgt_times);
  const int64_t total = static_cast<int64_t>(a.batch * a.n_tgt);
  const bool stream = a.batch * a.n_tgt * D * esz >= simd::kStreamMinBytes;
#pragma omp parallel num_threads(be.threads())
  {
#pragma omp for schedule(dynamic, 256) nowait
    for (int64_t bt = 0; bt < total; ++bt) {
      const uint64_t b = static_cast<uint64_t>(bt) / a.n_tgt, t = static_cast<uint64_t>(bt) % a.n_tgt;
      void* dst = out + (b * a.n_tgt + t) * D * esz;
      const uint64_t S = a.src_lengths ? a.src_lengths[b] : a.n_src;
      const uint64_t T_valid = a.tgt_lengths ? a.tgt_lengths[b] : a.n_tgt;
      if (t >= T_valid) {
        std::memset(dst, 0, D * esz);
        continue;
      }
      const unsigned char* row = data + b * a.n_src * D * esz;
      const T* times = st + b * a.n_src;
      const T target = tt[b * a.n_tgt + t];
      // Outside the range (or a single sample): an exact copy of an end sample.
      if (S == 1 || target >= times[S - 1]) {
        std::memcpy(dst, row + (S - 1) * D * esz, D * esz);
        continue;
      }
      if (target < times[0]) {
        std::memcpy(dst, row, D * esz);
        continue;
      }
      uint64_t i;
      float w;
      interval_of<T>(times, S, target, i, w);
      const void* pa = row + i * D * esz;
      const void* pb = row + (i + 1) * D * esz;
      // The end weights copy a sample exactly, whatever its dtype.
      if (w == 0.0f) {
        std::memcpy(dst, pa, D * esz);
      } else if (w == 1.0f) {
        std::memcpy(dst, pb, D * esz);
      } else if (a.data_dtype == DType::f32) {
        simd::lerp_f32(static_cast<const float*>(pa), static_cast<const float*>(pb), w, static_cast<float*>(dst), D,
                       stream);
      } else {
        for (uint64_t d = 0; d < D; ++d) {
          const float x = load_elem(pa, a.data_dtype, d), y = load_elem(pb, a.data_dtype, d);
          store_elem(dst, a.data_dtype, d, std::fma(w, y - x, x));
        }
      }
    }
    if (stream) simd::stream_fence();
  }
}

}  // namespace

void CpuBackend::resample(const ResampleArgs& a) {
  if (a.time_dtype == DType::f64)
    run<double>(*this, a);
  else
    run<float>(*this, a);
}

}  // namespace mnemo::cpu
