#include "resample_oracle.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "reference.h"

namespace fz {

namespace {

// One interpolated element: w from the exact times, out = fma(w, b - a, a)
// in f32 rounded to the data dtype. The bound allows for w's roundings in
// the time dtype.
std::string check_interp(double a, double b, double w, double got, int32_t dtype) {
  const float fa = static_cast<float>(a), fb = static_cast<float>(b);
  const float diff = fb - fa;
  char msg[200];
  if (!std::isfinite(diff)) {
    // b - a overflows f32: the formula gives infinity, unless w rounds to an
    // end weight, which copies that sample.
    if (got == a || got == b || (std::isinf(got) && std::signbit(got) == std::signbit(diff))) return "";
    std::snprintf(msg, sizeof msg, "b - a overflows f32 (a %.9g, b %.9g, w %.9g) but got %.9g", a, b, w, got);
    return msg;
  }
  const double exact = a + w * (b - a);
  // Plus one f32 subnormal step: below 2^-126 the f32 result keeps no
  // relative precision.
  const double tol = ref::interp_tol(dtype, a, b, exact) + 0x1p-149;
  if (std::fabs(got - exact) <= tol) return "";
  std::snprintf(msg, sizeof msg, "got %.9g, exact %.9g (a %.9g, b %.9g, w %.9g, bound %.3g)", got, exact, a, b, w, tol);
  return msg;
}

// ref::resample_plan with the weight taken in long double, whose range
// holds the difference of any two finite doubles (ref's double arithmetic
// overflows for times near the top of the f64 range).
std::vector<ref::ResampleTarget> resample_plan(const std::vector<double>& st, const std::vector<double>& tt,
                                               uint64_t batch, uint64_t n_src, uint64_t n_tgt,
                                               const std::vector<uint64_t>& sl, const std::vector<uint64_t>& tl) {
  std::vector<ref::ResampleTarget> plan = ref::resample_plan(st, tt, batch, n_src, n_tgt, sl, tl);
  for (uint64_t b = 0; b < batch; ++b)
    for (uint64_t j = 0; j < n_tgt; ++j) {
      ref::ResampleTarget& p = plan[b * n_tgt + j];
      if (p.kind == ref::ResampleTarget::kZero) continue;
      const uint64_t L = sl.empty() ? n_src : sl[b];
      const double t = tt[b * n_tgt + j];
      const double* ts = st.data() + b * n_src;
      uint64_t count_le = 0;
      for (uint64_t i = 0; i < L; ++i)
        if (ts[i] <= t) count_le = i + 1;
      if (count_le == 0 || count_le == L) continue;  // an end sample: ref has it right
      const uint64_t i = count_le - 1;
      long double w = (static_cast<long double>(t) - ts[i]) / (static_cast<long double>(ts[i + 1]) - ts[i]);
      w = std::min<long double>(1, std::max<long double>(0, w));
      p = w == 0 ? ref::ResampleTarget{ref::ResampleTarget::kSample, i, 0.0}
                 : ref::ResampleTarget{ref::ResampleTarget::kInterp, i, static_cast<double>(w)};
    }
  return plan;
}

}  // namespace

std::string check_resample(const std::vector<double>& stv, const std::vector<double>& ttv, const void* data,
                           const void* out, int32_t ddt, uint64_t batch, uint64_t n_src, uint64_t dim, uint64_t n_tgt,
                           const std::vector<uint64_t>& sl, const std::vector<uint64_t>& tl) {
  const size_t esz = ref::dtype_size(ddt);
  const auto* din = static_cast<const unsigned char*>(data);
  const auto* dout = static_cast<const unsigned char*>(out);
  const std::vector<ref::ResampleTarget> plan = resample_plan(stv, ttv, batch, n_src, n_tgt, sl, tl);
  for (uint64_t b = 0; b < batch; ++b)
    for (uint64_t j = 0; j < n_tgt; ++j) {
      const ref::ResampleTarget& p = plan[b * n_tgt + j];
      for (uint64_t d = 0; d < dim; ++d) {
        char where[200];
        std::snprintf(where, sizeof where,
                      "row %llu target %llu (time %.9g) dim %llu: ", static_cast<unsigned long long>(b),
                      static_cast<unsigned long long>(j), ttv[b * n_tgt + j], static_cast<unsigned long long>(d));
        const uint64_t o_i = (b * n_tgt + j) * dim + d;
        const double got = ref::load(out, ddt, o_i);
        if (p.kind == ref::ResampleTarget::kZero) {
          if (got != 0.0) return std::string(where) + "past tgt_lengths but not zero";
          continue;
        }
        const uint64_t a_i = (b * n_src + p.i) * dim + d;
        if (p.kind == ref::ResampleTarget::kSample) {
          if (std::memcmp(dout + o_i * esz, din + a_i * esz, esz) != 0)
            return std::string(where) + "not an exact copy of sample " + std::to_string(p.i);
          continue;
        }
        const std::string why = check_interp(ref::load(data, ddt, a_i), ref::load(data, ddt, a_i + dim), p.w, got, ddt);
        if (!why.empty()) {
          char times[120];
          std::snprintf(times, sizeof times, " between times %.9g and %.9g", stv[b * n_src + p.i],
                        stv[b * n_src + p.i + 1]);
          return std::string(where) + why + times;
        }
      }
    }
  return "";
}

}  // namespace fz
