// Row L2-normalisation and LayerNorm. Each row's statistics are taken before
// any of it is written, so in-place calls are safe. f32 rows go through the
// SIMD kernels (f32 sums, four accumulators); the 16-bit types keep the
// scalar f64 path.
#include <cmath>

#include "cpu_backend.h"
#include "simd_kernels.h"

namespace mnemo::cpu {

void CpuBackend::normalize_rows(const NormArgs& a) {
  const size_t esz = dtype_size(a.dtype);
  const int64_t rows = static_cast<int64_t>(a.rows);
  if (a.dtype == DType::f32) {
    const auto* in = static_cast<const float*>(a.in);
    auto* out = static_cast<float*>(a.out);
    const bool stream = in != out && a.rows * a.dim * sizeof(float) >= simd::kStreamMinBytes;
#pragma omp parallel num_threads(threads())
    {
#pragma omp for schedule(dynamic, 256) nowait
      for (int64_t r = 0; r < rows; ++r)
        simd::normalize_f32(in + static_cast<uint64_t>(r) * a.dim, out + static_cast<uint64_t>(r) * a.dim, a.dim,
                            stream);
      if (stream) simd::stream_fence();
    }
    return;
  }
#pragma omp parallel for schedule(dynamic, 256) num_threads(threads())
  for (int64_t r = 0; r < rows; ++r) {
    const void* in = static_cast<const unsigned char*>(a.in) + static_cast<uint64_t>(r) * a.dim * esz;
    void* out = static_cast<unsigned char*>(a.out) + static_cast<uint64_t>(r) * a.dim * esz;
    double ss = 0.0;
    for (uint64_t d = 0; d < a.dim; ++d) {
      const double v = load_elem(in, a.dtype, d);
      ss += v * v;
    }
    const double inv = ss > 0.0 ? 1.0 / std::sqrt(ss) : 0.0;
    for (uint64_t d = 0; d < a.dim; ++d)
      store_elem(out, a.dtype, d, static_cast<float>(load_elem(in, a.dtype, d) * inv));
  }
}

void CpuBackend::layer_norm(const NormArgs& a) {
  const size_t esz = dtype_size(a.dtype);
  const int64_t rows = static_cast<int64_t>(a.rows);
  if (a.dtype == DType::f32) {
    const auto* in = static_cast<const float*>(a.in);
    auto* out = static_cast<float*>(a.out);
    const bool stream = in != out && a.rows * a.dim * sizeof(float) >= simd::kStreamMinBytes;
#pragma omp parallel num_threads(threads())
    {
#pragma omp for schedule(dynamic, 256) nowait
      for (int64_t r = 0; r < rows; ++r)
        simd::layer_norm_f32(in + static_cast<uint64_t>(r) * a.dim, out + static_cast<uint64_t>(r) * a.dim, a.dim,
                             a.gamma, a.beta, a.eps, stream);
      if (stream) simd::stream_fence();
    }
    return;
  }
#pragma omp parallel for schedule(dynamic, 256) num_threads(threads())
  for (int64_t r = 0; r < rows; ++r) {
    const void* in = static_cast<const unsigned char*>(a.in) + static_cast<uint64_t>(r) * a.dim * esz;
    void* out = static_cast<unsigned char*>(a.out) + static_cast<uint64_t>(r) * a.dim * esz;
    double sum = 0.0;
    for (uint64_t d = 0; d < a.dim; ++d) sum += load_elem(in, a.dtype, d);
    const double mean = sum / static_cast<double>(a.dim);
    double var = 0.0;
    for (uint64_t d = 0; d < a.dim; ++d) {
      const double c = load_elem(in, a.dtype, d) - mean;
      var += c * c;
    }
    var /= static_cast<double>(a.dim);
    const double denom = var + static_cast<double>(a.eps);
    const double rstd = denom > 0.0 ? 1.0 / std::sqrt(denom) : 0.0;
    for (uint64_t d = 0; d < a.dim; ++d) {
      const double g = a.gamma ? a.gamma[d] : 1.0, b = a.beta ? a.beta[d] : 0.0;
      store_elem(out, a.dtype, d, static_cast<float>((load_elem(in, a.dtype, d) - mean) * rstd * g + b));
    }
  }
}

}  // namespace mnemo::cpu
