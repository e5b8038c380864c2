// Trajectory resampling by linear interpolation, with the end and
// equal-time rules of mnemo.h (numpy.interp's).
#include <algorithm>
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

// What one target needs: where its output goes and how it is made.
struct Plan {
  enum Kind : uint8_t { zero, copy, lerp } kind;
  float w;
  const unsigned char* a;  // the copied sample, or the left one of a lerp
};

// Plans target t of row b (the rules of mnemo.h).
template <class T>
inline Plan plan_of(const ResampleArgs& a, size_t esz, uint64_t b, uint64_t t) {
  const uint64_t D = a.dim;
  const uint64_t S = a.src_lengths ? a.src_lengths[b] : a.n_src;
  const uint64_t T_valid = a.tgt_lengths ? a.tgt_lengths[b] : a.n_tgt;
  if (t >= T_valid) return {Plan::zero, 0.0f, nullptr};
  const unsigned char* row = static_cast<const unsigned char*>(a.data) + b * a.n_src * D * esz;
  const T* times = static_cast<const T*>(a.src_times) + b * a.n_src;
  const T target = static_cast<const T*>(a.tgt_times)[b * a.n_tgt + t];
  // Outside the range (or a single sample): an exact copy of an end sample.
  if (S == 1 || target >= times[S - 1]) return {Plan::copy, 0.0f, row + (S - 1) * D * esz};
  if (target < times[0]) return {Plan::copy, 0.0f, row};
  uint64_t i;
  float w;
  interval_of<T>(times, S, target, i, w);
  // The end weights copy a sample exactly, whatever its dtype.
  if (w == 0.0f) return {Plan::copy, 0.0f, row + i * D * esz};
  if (w == 1.0f) return {Plan::copy, 0.0f, row + (i + 1) * D * esz};
  return {Plan::lerp, w, row + i * D * esz};
}

// Asks for the source bytes of a plan ahead of their use: targets come in
// any order, so their rows are scattered reads the hardware prefetcher
// cannot guess, and each would otherwise wait a full memory latency.
inline void prefetch(const Plan& p, size_t row_bytes) {
  if (p.kind == Plan::zero) return;
  const size_t n = p.kind == Plan::lerp ? 2 * row_bytes : row_bytes;
  for (size_t o = 0; o < n; o += 64) __builtin_prefetch(p.a + o);
}

template <class T>
void run(const CpuBackend& be, const ResampleArgs& a) {
  const size_t esz = dtype_size(a.data_dtype);
  const uint64_t D = a.dim;
  const size_t row_bytes = D * esz;
  auto* out = static_cast<unsigned char*>(a.out);
  const uint64_t total = a.batch * a.n_tgt;
  const bool stream = total * D * esz >= simd::kStreamMinBytes;
  // Targets are planned kAhead before they are made, in chunks of kChunk.
  constexpr uint64_t kChunk = 256, kAhead = 8;
  const int64_t chunks = static_cast<int64_t>((total + kChunk - 1) / kChunk);
#pragma omp parallel num_threads(be.threads())
  {
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t c = 0; c < chunks; ++c) {
      const uint64_t first = static_cast<uint64_t>(c) * kChunk;
      const uint64_t last = std::min(total, first + kChunk);
      Plan ring[kAhead];
      auto plan_at = [&](uint64_t bt) { return plan_of<T>(a, esz, bt / a.n_tgt, bt % a.n_tgt); };
      for (uint64_t bt = first; bt < std::min(last, first + kAhead); ++bt) {
        ring[bt % kAhead] = plan_at(bt);
        prefetch(ring[bt % kAhead], row_bytes);
      }
      for (uint64_t bt = first; bt < last; ++bt) {
        const Plan p = ring[bt % kAhead];
        if (bt + kAhead < last) {
          ring[bt % kAhead] = plan_at(bt + kAhead);
          prefetch(ring[bt % kAhead], row_bytes);
        }
        unsigned char* dst = out + bt * row_bytes;
        if (p.kind == Plan::zero) {
          std::memset(dst, 0, row_bytes);
        } else if (p.kind == Plan::copy) {
          std::memcpy(dst, p.a, row_bytes);
        } else if (a.data_dtype == DType::f32) {
          const float* pa = reinterpret_cast<const float*>(p.a);
          simd::lerp_f32(pa, pa + D, p.w, reinterpret_cast<float*>(dst), D, stream);
        } else {
          const unsigned char* pb = p.a + row_bytes;
          for (uint64_t d = 0; d < D; ++d) {
            const float x = load_elem(p.a, a.data_dtype, d), y = load_elem(pb, a.data_dtype, d);
            store_elem(dst, a.data_dtype, d, std::fma(p.w, y - x, x));
          }
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
