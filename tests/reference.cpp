#include "reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace ref {

namespace {

// Round to nearest integer, ties to even, without depending on the FP
// environment's rounding mode. v is exact and small enough that the
// subtraction below is exact.
double round_half_even(double v) {
  const double f = std::floor(v);
  const double d = v - f;
  if (d > 0.5) return f + 1.0;
  if (d < 0.5) return f;
  return std::fmod(f, 2.0) == 0.0 ? f : f + 1.0;
}

uint32_t f32_bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

}  // namespace

uint16_t f16_from_f32(float x) {
  const uint16_t sign = static_cast<uint16_t>((f32_bits(x) >> 16) & 0x8000u);
  if (std::isnan(x)) return static_cast<uint16_t>(sign | 0x7E00u);
  const double a = std::fabs(static_cast<double>(x));
  // 65520 is halfway between the largest half (65504) and 2^16: it and
  // everything above round to infinity.
  if (a >= 65520.0) return static_cast<uint16_t>(sign | 0x7C00u);
  if (a < std::ldexp(1.0, -14)) {
    // Subnormal range: multiples of 2^-24. A result of 1024 is the smallest
    // normal, whose encoding is also 1024.
    const double m = round_half_even(std::ldexp(a, 24));
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(m));
  }
  int e = 0;
  std::frexp(a, &e);
  int exponent = e - 1;                                        // a in [2^exponent, 2^(exponent+1))
  double sig = round_half_even(std::ldexp(a, 10 - exponent));  // [1024, 2048]
  if (sig == 2048.0) {
    sig = 1024.0;
    exponent += 1;
  }
  if (exponent > 15) return static_cast<uint16_t>(sign | 0x7C00u);
  return static_cast<uint16_t>(sign | ((exponent + 15) << 10) | static_cast<int>(sig - 1024.0));
}

double f16_value(uint16_t h) {
  const int e = (h >> 10) & 31;
  const int m = h & 1023;
  double v;
  if (e == 0) {
    v = std::ldexp(static_cast<double>(m), -24);
  } else if (e == 31) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(static_cast<double>(1024 + m), e - 25);
  }
  return (h & 0x8000u) ? -v : v;
}

uint16_t bf16_from_f32(float x) {
  const uint32_t b = f32_bits(x);
  if (std::isnan(x)) return static_cast<uint16_t>(((b >> 16) & 0x8000u) | 0x7FC0u);
  uint32_t upper = b >> 16;
  const uint32_t lower = b & 0xFFFFu;
  // Carry into the exponent is right: it rounds up to the next binade or to
  // infinity.
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) upper += 1;
  return static_cast<uint16_t>(upper);
}

double bf16_value(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, sizeof f);
  return static_cast<double>(f);
}

size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case MNEMO_DTYPE_F32: return 4;
    case MNEMO_DTYPE_F16: return 2;
    case MNEMO_DTYPE_BF16: return 2;
    case MNEMO_DTYPE_F64: return 8;
    case MNEMO_DTYPE_U32: return 4;
    case MNEMO_DTYPE_U64: return 8;
    default: return 0;
  }
}

double load(const void* base, int32_t dtype, size_t i) {
  const auto* p = static_cast<const unsigned char*>(base);
  switch (dtype) {
    case MNEMO_DTYPE_F32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case MNEMO_DTYPE_F64: {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      return d;
    }
    case MNEMO_DTYPE_F16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return f16_value(h);
    }
    case MNEMO_DTYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return bf16_value(h);
    }
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

void store(void* base, int32_t dtype, size_t i, double v) {
  auto* p = static_cast<unsigned char*>(base);
  switch (dtype) {
    case MNEMO_DTYPE_F32: {
      const float f = static_cast<float>(v);
      std::memcpy(p + 4 * i, &f, 4);
      break;
    }
    case MNEMO_DTYPE_F64: std::memcpy(p + 8 * i, &v, 8); break;
    case MNEMO_DTYPE_F16: {
      const uint16_t h = f16_from_f32(static_cast<float>(v));
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case MNEMO_DTYPE_BF16: {
      const uint16_t h = bf16_from_f32(static_cast<float>(v));
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    default: break;
  }
}

double rounding_tol(int32_t dtype, double v) {
  const double a = std::fabs(v);
  switch (dtype) {
    case MNEMO_DTYPE_F16: return std::ldexp(a, -11) + std::ldexp(1.0, -25);
    case MNEMO_DTYPE_BF16: return std::ldexp(a, -8) + std::ldexp(1.0, -134);
    case MNEMO_DTYPE_F32: return std::ldexp(a, -24) + std::ldexp(1.0, -150);
    default: return 0.0;
  }
}

bool higher_is_better(int32_t metric) { return metric != MNEMO_METRIC_L2SQ; }

double score(int32_t metric, const double* x, const double* y, size_t dim) {
  double dot = 0, nx = 0, ny = 0, l2 = 0;
  for (size_t i = 0; i < dim; ++i) {
    dot += x[i] * y[i];
    nx += x[i] * x[i];
    ny += y[i] * y[i];
    const double d = x[i] - y[i];
    l2 += d * d;
  }
  switch (metric) {
    case MNEMO_METRIC_COSINE:
      if (nx == 0 || ny == 0) return 0.0;
      return dot / (std::sqrt(nx) * std::sqrt(ny));
    case MNEMO_METRIC_DOT: return dot;
    case MNEMO_METRIC_L2SQ: return l2;
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

double score_tol(int32_t metric, const double* x, const double* y, size_t dim, double ref_score) {
  switch (metric) {
    case MNEMO_METRIC_COSINE: return 1e-5;
    case MNEMO_METRIC_DOT: {
      double s = 0;
      for (size_t i = 0; i < dim; ++i) s += std::fabs(x[i] * y[i]);
      return 1e-5 * std::max(1.0, s);
    }
    case MNEMO_METRIC_L2SQ: {
      double nx = 0, ny = 0;
      for (size_t i = 0; i < dim; ++i) {
        nx += x[i] * x[i];
        ny += y[i] * y[i];
      }
      return 1e-5 * std::fabs(ref_score) + 1e-7 * (nx + ny);
    }
    default: return 0.0;
  }
}

std::vector<Candidate> rank(int32_t metric, std::vector<Candidate> cands) {
  cands.erase(std::remove_if(cands.begin(), cands.end(), [](const Candidate& c) { return std::isnan(c.score); }),
              cands.end());
  const bool hi = higher_is_better(metric);
  std::sort(cands.begin(), cands.end(), [hi](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return hi ? a.score > b.score : a.score < b.score;
    return a.id < b.id;
  });
  return cands;
}

void topk(int32_t metric, const std::vector<Candidate>& cands, size_t k, std::vector<uint64_t>* ids,
          std::vector<double>* scores) {
  const std::vector<Candidate> r = rank(metric, cands);
  ids->assign(k, MNEMO_NO_ID);
  scores->assign(k, std::numeric_limits<double>::quiet_NaN());
  for (size_t j = 0; j < k && j < r.size(); ++j) {
    (*ids)[j] = r[j].id;
    (*scores)[j] = r[j].score;
  }
}

std::vector<ResampleTarget> resample_plan(const std::vector<double>& src_times, const std::vector<double>& tgt_times,
                                          size_t batch, size_t n_src, size_t n_tgt,
                                          const std::vector<uint64_t>& src_len, const std::vector<uint64_t>& tgt_len) {
  std::vector<ResampleTarget> plan(batch * n_tgt);
  for (size_t b = 0; b < batch; ++b) {
    const size_t L = src_len.empty() ? n_src : src_len[b];
    const size_t T = tgt_len.empty() ? n_tgt : tgt_len[b];
    const double* ts = src_times.data() + b * n_src;
    for (size_t j = 0; j < n_tgt; ++j) {
      ResampleTarget& p = plan[b * n_tgt + j];
      if (j >= T) {
        p = {ResampleTarget::kZero, 0, 0.0};
        continue;
      }
      const double t = tgt_times[b * n_tgt + j];
      // Largest i with ts[i] <= t, by a plain scan (independent of any
      // binary search the implementation uses).
      size_t count_le = 0;
      for (size_t i = 0; i < L; ++i)
        if (ts[i] <= t) count_le = i + 1;
      if (count_le == 0) {
        p = {ResampleTarget::kSample, 0, 0.0};
      } else if (count_le == L) {
        p = {ResampleTarget::kSample, L - 1, 0.0};
      } else {
        const size_t i = count_le - 1;
        double w = (t - ts[i]) / (ts[i + 1] - ts[i]);
        w = std::min(1.0, std::max(0.0, w));
        if (w == 0.0)
          p = {ResampleTarget::kSample, i, 0.0};
        else
          p = {ResampleTarget::kInterp, i, w};
      }
    }
  }
  return plan;
}

double interp_tol(int32_t dtype, double a, double b, double value) {
  // w carries about 3 roundings, b - a one, the fma one: 16 ulps of the
  // larger end point covers them with room to spare.
  const double m = std::max(std::fabs(a), std::fabs(b));
  return std::ldexp(m, -20) + (dtype == MNEMO_DTYPE_F32 ? 0.0 : rounding_tol(dtype, value));
}

std::vector<double> normalize_rows(const std::vector<double>& in, size_t rows, size_t dim) {
  std::vector<double> out(rows * dim, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (size_t c = 0; c < dim; ++c) ss += in[r * dim + c] * in[r * dim + c];
    if (ss == 0) continue;
    const double n = std::sqrt(ss);
    for (size_t c = 0; c < dim; ++c) out[r * dim + c] = in[r * dim + c] / n;
  }
  return out;
}

std::vector<double> layer_norm(const std::vector<double>& in, size_t rows, size_t dim, const float* gamma,
                               const float* beta, double eps, int32_t dtype, std::vector<double>* tol) {
  std::vector<double> out(rows * dim);
  tol->assign(rows * dim, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    const double* x = in.data() + r * dim;
    double mean = 0;
    for (size_t c = 0; c < dim; ++c) mean += x[c];
    mean /= static_cast<double>(dim);
    double var = 0;
    for (size_t c = 0; c < dim; ++c) var += (x[c] - mean) * (x[c] - mean);
    var /= static_cast<double>(dim);
    const double denom = var + eps;
    for (size_t c = 0; c < dim; ++c) {
      const double g = gamma ? gamma[c] : 1.0;
      const double bt = beta ? beta[c] : 0.0;
      const double z = denom == 0.0 ? 0.0 : (x[c] - mean) / std::sqrt(denom);
      const double v = z * g + bt;
      out[r * dim + c] = v;
      (*tol)[r * dim + c] = 1e-5 * std::fabs(g) * (std::fabs(z) + 1.0) + 1e-6 * std::fabs(bt) + rounding_tol(dtype, v);
    }
  }
  return out;
}

}  // namespace ref
