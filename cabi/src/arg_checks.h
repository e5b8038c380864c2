// Argument checks shared by the entry points. Each throws mnemo::Error with
// a message naming the argument; all run before any output is written.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/runtime.h"
#include "handles.h"

namespace mnemo::cabi {

void need_nonnull(const void* p, const char* name);
void need_aligned(const void* p, const char* name);
// NULL check plus alignment: the usual pair for data pointers.
inline void need_data(const void* p, const char* name) {
  need_nonnull(p, name);
  need_aligned(p, name);
}
Runtime& runtime_of(mnemo_runtime* rt);
Store& store_of(const mnemo_store* s);

DType storage_dtype(int32_t v, const char* name);  // f32, f16, bf16
DType time_dtype(int32_t v, const char* name);     // f32, f64
DType index_dtype(int32_t v, const char* name);    // u32, u64
Metric metric_of(int32_t v);
void need_positive(uint64_t v, const char* name);

// Non-finite check, only when the runtime validates.
void need_finite(const Runtime& rt, const void* p, DType t, uint64_t n, const char* name);
// Byte ranges [a, a+na) and [b, b+nb) must not overlap (unless allow_same
// and a == b with equal sizes: in-place).
void need_disjoint(const void* a, uint64_t na, const void* b, uint64_t nb, const char* what, bool allow_same);

}  // namespace mnemo::cabi
