// Row L2-normalisation and LayerNorm. Each row's statistics are taken before
// any of it is written, so in-place calls are safe. f32 rows go through the
// SIMD kernels (f32 sums, four accumulators); the 16-bit types, and f32
// rows whose sums of squares leave the f32 range, take the scalar f64 path.
#include <cmath>

#include "cpu_backend.h"
#include "simd_kernels.h"

namespace mnemo::cpu {

namespace {

// The f64 reference-grade row kernels: every dtype, and f32 rows whose
// statistics leave the f32 range.
void normalize_row(const void* in, void* out, DType t, uint64_t dim) {
  double ss = 0.0;
  for (uint64_t d = 0; d < dim; ++d) {
    const double v = load_elem(in, t, d);
    ss += v * v;
  }
  const double inv = ss > 0.0 ? 1.0 / std::sqrt(ss) : 0.0;
  for (uint64_t d = 0; d < dim; ++d) store_elem(out, t, d, static_cast<float>(load_elem(in, t, d) * inv));
}

void layer_norm_row(const void* in, void* out, DType t, uint64_t dim, const float* gamma, const float* beta,
                    float eps) {
  double sum = 0.0;
  for (uint64_t d = 0; d < dim; ++d) sum += load_elem(in, t, d);
  const double mean = sum / static_cast<double>(dim);
  double var = 0.0;
  for (uint64_t d = 0; d < dim; ++d) {
    const double c = load_elem(in, t, d) - mean;
    var += c * c;
  }
  var /= static_cast<double>(dim);
  const double denom = var + static_cast<double>(eps);
  const double rstd = denom > 0.0 ? 1.0 / std::sqrt(denom) : 0.0;
  for (uint64_t d = 0; d < dim; ++d) {
    const double g = gamma ? gamma[d] : 1.0, b = beta ? beta[d] : 0.0;
    store_elem(out, t, d, static_cast<float>((load_elem(in, t, d) - mean) * rstd * g + b));
  }
}

}  // namespace

void CpuBackend::normalize_rows(const NormArgs& a) {
  const size_t esz = dtype_size(a.dtype);
  const int64_t rows = static_cast<int64_t>(a.rows);
  const bool f32 = a.dtype == DType::f32;
  const bool stream = f32 && a.in != a.out && a.rows * a.dim * sizeof(float) >= simd::kStreamMinBytes;
#pragma omp parallel num_threads(threads())
  {
#pragma omp for schedule(dynamic, 256) nowait
    for (int64_t r = 0; r < rows; ++r) {
      const uint64_t off = static_cast<uint64_t>(r) * a.dim;
      if (f32 &&
          simd::normalize_f32(static_cast<const float*>(a.in) + off, static_cast<float*>(a.out) + off, a.dim, stream))
        continue;
      normalize_row(static_cast<const unsigned char*>(a.in) + off * esz, static_cast<unsigned char*>(a.out) + off * esz,
                    a.dtype, a.dim);
    }
    if (stream) simd::stream_fence();
  }
}

void CpuBackend::layer_norm(const NormArgs& a) {
  const size_t esz = dtype_size(a.dtype);
  const int64_t rows = static_cast<int64_t>(a.rows);
  const bool f32 = a.dtype == DType::f32;
  const bool stream = f32 && a.in != a.out && a.rows * a.dim * sizeof(float) >= simd::kStreamMinBytes;
#pragma omp parallel num_threads(threads())
  {
#pragma omp for schedule(dynamic, 256) nowait
    for (int64_t r = 0; r < rows; ++r) {
      const uint64_t off = static_cast<uint64_t>(r) * a.dim;
      if (f32 && simd::layer_norm_f32(static_cast<const float*>(a.in) + off, static_cast<float*>(a.out) + off, a.dim,
                                      a.gamma, a.beta, a.eps, stream))
        continue;
      layer_norm_row(static_cast<const unsigned char*>(a.in) + off * esz,
                     static_cast<unsigned char*>(a.out) + off * esz, a.dtype, a.dim, a.gamma, a.beta, a.eps);
    }
    if (stream) simd::stream_fence();
  }
}

}  // namespace mnemo::cpu
