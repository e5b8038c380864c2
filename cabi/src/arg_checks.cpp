#include "arg_checks.h"

#include <string>

#include "core/error.h"
#include "core/validate.h"
#include "mnemo.h"

namespace mnemo::cabi {

void need_nonnull(const void* p, const char* name) {
  if (p == nullptr) fail(Code::null_pointer, std::string(name) + " is NULL");
}

void need_aligned(const void* p, const char* name) {
  if (reinterpret_cast<uintptr_t>(p) % MNEMO_ALIGNMENT != 0)
    fail(Code::misaligned,
         std::string(name) + " is not " + std::to_string(MNEMO_ALIGNMENT) + "-byte aligned (use mnemo_alloc)");
}

Runtime& runtime_of(mnemo_runtime* rt) {
  need_nonnull(rt, "rt");
  return *rt->rt;
}

Store& store_of(const mnemo_store* s) {
  need_nonnull(s, "store");
  return *s->store;
}

DType storage_dtype(int32_t v, const char* name) {
  if (v == MNEMO_DTYPE_F32 || v == MNEMO_DTYPE_F16 || v == MNEMO_DTYPE_BF16) return static_cast<DType>(v);
  fail(Code::dtype, std::string(name) + " = " + std::to_string(v) + " is not F32, F16 or BF16");
}

DType time_dtype(int32_t v, const char* name) {
  if (v == MNEMO_DTYPE_F32 || v == MNEMO_DTYPE_F64) return static_cast<DType>(v);
  fail(Code::dtype, std::string(name) + " = " + std::to_string(v) + " is not F32 or F64");
}

DType index_dtype(int32_t v, const char* name) {
  if (v == MNEMO_DTYPE_U32 || v == MNEMO_DTYPE_U64) return static_cast<DType>(v);
  fail(Code::dtype, std::string(name) + " = " + std::to_string(v) + " is not U32 or U64");
}

Metric metric_of(int32_t v) {
  if (v >= MNEMO_METRIC_COSINE && v <= MNEMO_METRIC_L2SQ) return static_cast<Metric>(v);
  fail(Code::invalid_argument, "metric = " + std::to_string(v) + " is not a mnemo_metric");
}

void need_positive(uint64_t v, const char* name) {
  if (v == 0) fail(Code::invalid_argument, std::string(name) + " must be at least 1");
}

void need_finite(const Runtime& rt, const void* p, DType t, uint64_t n, const char* name) {
  if (!rt.validate()) return;
  const uint64_t at = find_non_finite(p, t, n);
  if (at != kNotFound) fail(Code::non_finite, std::string(name) + "[" + std::to_string(at) + "] is NaN or infinite");
}

void need_disjoint(const void* a, uint64_t na, const void* b, uint64_t nb, const char* what, bool allow_same) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  if (allow_same && pa == pb && na == nb) return;
  if (na == 0 || nb == 0) return;
  if (pa < pb + nb && pb < pa + na) fail(Code::invalid_argument, std::string(what) + " overlap");
}

}  // namespace mnemo::cabi
