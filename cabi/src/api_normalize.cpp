// Row L2-normalisation and LayerNorm.
#include <cmath>

#include "arg_checks.h"
#include "barrier.h"
#include "core/checked.h"
#include "mnemo.h"

using namespace mnemo;

namespace {

// Shared checks of both entry points; fills a and returns the byte count.
uint64_t check_rows(Runtime& r, const void* in, void* out, int32_t dtype, uint64_t rows, uint64_t dim, NormArgs& a,
                    const Placement& place) {
  a.place = place;
  a.place.validate = r.validate();
  a.dtype = cabi::storage_dtype(dtype, "dtype");
  cabi::need_positive(dim, "dim");
  cabi::need_data(in, "in");
  cabi::need_data(out, "out");
  const uint64_t elems = checked_mul(rows, dim, "rows x dim");
  const uint64_t bytes = checked_bytes(checked_mul(elems, dtype_size(a.dtype), "rows x dim"), "rows x dim");
  cabi::need_disjoint(in, bytes, out, bytes, "in and out (only exact in-place is allowed)", true);
  if (!place.on_device) cabi::need_finite(r, in, a.dtype, elems, "in");
  a.in = in;
  a.out = out;
  a.rows = rows;
  a.dim = dim;
  return bytes;
}

void normalize_rows(mnemo_runtime* rt, const void* in, void* out, int32_t dtype, uint64_t rows, uint64_t dim,
                    const Placement& place) {
  Runtime& r = cabi::runtime_of(rt);
  NormArgs a;
  const uint64_t bytes = check_rows(r, in, out, dtype, rows, dim, a, place);
  if (rows == 0) return;
  if (place.on_device)
    r.device_backend(Op::normalize_rows).normalize_rows(a);
  else
    r.pick(Op::normalize_rows, 2 * bytes).normalize_rows(a);
}

void layer_norm(mnemo_runtime* rt, const void* in, void* out, int32_t dtype, uint64_t rows, uint64_t dim,
                const float* gamma, const float* beta, float eps, const Placement& place) {
  Runtime& r = cabi::runtime_of(rt);
  NormArgs a;
  if (gamma) cabi::need_aligned(gamma, "gamma");
  if (beta) cabi::need_aligned(beta, "beta");
  if (!std::isfinite(eps) || eps < 0.0f) fail(Code::invalid_argument, "eps must be finite and >= 0");
  const uint64_t bytes = check_rows(r, in, out, dtype, rows, dim, a, place);
  const uint64_t pbytes = dim * 4;
  if (gamma) {
    cabi::need_disjoint(gamma, pbytes, out, bytes, "gamma and out", false);
    if (!place.on_device) cabi::need_finite(r, gamma, DType::f32, dim, "gamma");
  }
  if (beta) {
    cabi::need_disjoint(beta, pbytes, out, bytes, "beta and out", false);
    if (!place.on_device) cabi::need_finite(r, beta, DType::f32, dim, "beta");
  }
  if (rows == 0) return;
  a.gamma = gamma;
  a.beta = beta;
  a.eps = eps;
  if (place.on_device)
    r.device_backend(Op::layer_norm).layer_norm(a);
  else
    r.pick(Op::layer_norm, 2 * bytes).layer_norm(a);
}

}  // namespace

extern "C" {

MNEMO_API mnemo_status mnemo_normalize_rows(mnemo_runtime* rt, const void* in, void* out, int32_t dtype, uint64_t rows,
                                            uint64_t dim) {
  return cabi::guarded("mnemo_normalize_rows", [&] { normalize_rows(rt, in, out, dtype, rows, dim, Placement{}); });
}

MNEMO_API mnemo_status mnemo_normalize_rows_device(mnemo_runtime* rt, const void* in, void* out, int32_t dtype,
                                                   uint64_t rows, uint64_t dim, void* stream) {
  return cabi::guarded("mnemo_normalize_rows_device", [&] {
    normalize_rows(rt, in, out, dtype, rows, dim, Placement{true, stream, true});
  });
}

MNEMO_API mnemo_status mnemo_layer_norm(mnemo_runtime* rt, const void* in, void* out, int32_t dtype, uint64_t rows,
                                        uint64_t dim, const float* gamma, const float* beta, float eps) {
  return cabi::guarded("mnemo_layer_norm",
                       [&] { layer_norm(rt, in, out, dtype, rows, dim, gamma, beta, eps, Placement{}); });
}

MNEMO_API mnemo_status mnemo_layer_norm_device(mnemo_runtime* rt, const void* in, void* out, int32_t dtype,
                                               uint64_t rows, uint64_t dim, const float* gamma, const float* beta,
                                               float eps, void* stream) {
  return cabi::guarded("mnemo_layer_norm_device", [&] {
    layer_norm(rt, in, out, dtype, rows, dim, gamma, beta, eps, Placement{true, stream, true});
  });
}

}  // extern "C"
