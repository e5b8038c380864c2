// The memory store entry points.
#include <cstring>
#include <string>

#include "arg_checks.h"
#include "barrier.h"
#include "core/checked.h"
#include "core/validate.h"
#include "mnemo.h"

using namespace mnemo;

namespace {

constexpr uint64_t kMaxDim = 65536;
constexpr uint32_t kSearchOptionsV1 = sizeof(mnemo_search_options);

void need_ids_valid(const uint64_t* ids, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i)
    if (ids[i] == MNEMO_NO_ID)
      fail(Code::out_of_range, "ids[" + std::to_string(i) + "] is MNEMO_NO_ID, which is reserved");
}

// F32 input to an F16/BF16 store: a finite value beyond the dtype's range
// would be stored as infinity, so it is refused like an infinite input.
void need_finite_in(const Runtime& rt, const void* vectors, DType store_dtype, uint64_t n) {
  if (!rt.validate() || store_dtype == DType::f32) return;
  const auto* v = static_cast<const float*>(vectors);
  for (uint64_t i = 0; i < n; ++i) {
    const uint16_t cell = store_dtype == DType::f16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
    if (find_non_finite(&cell, store_dtype, 1) != kNotFound)
      fail(Code::non_finite, "vectors[" + std::to_string(i) + "] = " + std::to_string(v[i]) + " is infinite in " +
                                 dtype_name(store_dtype));
  }
}

mnemo_store* wrap(std::unique_ptr<Store> s) {
  auto h = std::make_unique<mnemo_store>();
  h->store = std::move(s);
  return h.release();
}

}  // namespace

extern "C" {

MNEMO_API mnemo_status mnemo_store_create(mnemo_runtime* rt, uint64_t dim, int32_t dtype, int32_t metric,
                                          mnemo_store** out) {
  return cabi::guarded("mnemo_store_create", [&] {
    Runtime& r = cabi::runtime_of(rt);
    cabi::need_nonnull(out, "out");
    const DType dt = cabi::storage_dtype(dtype, "dtype");
    const Metric m = cabi::metric_of(metric);
    if (dim == 0 || dim > kMaxDim) fail(Code::invalid_argument, "dim must be in [1, 65536]");
    *out = wrap(std::make_unique<Store>(r, dim, dt, m));
  });
}

MNEMO_API void mnemo_store_destroy(mnemo_store* store) {
  try {
    delete store;
  } catch (...) {
  }
}

MNEMO_API mnemo_status mnemo_store_add(mnemo_store* store, const uint64_t* ids, const void* vectors,
                                       int32_t vectors_dtype, uint64_t count) {
  return cabi::guarded("mnemo_store_add", [&] {
    Store& s = cabi::store_of(store);
    const DType vdt = cabi::storage_dtype(vectors_dtype, "vectors_dtype");
    if (vdt != DType::f32 && vdt != s.dtype())
      fail(Code::dtype, std::string("vectors_dtype must be F32 or the store's dtype (") + dtype_name(s.dtype()) + ")");
    cabi::need_data(ids, "ids");
    cabi::need_data(vectors, "vectors");
    const uint64_t elems = checked_mul(count, s.dim(), "vectors");
    checked_bytes(checked_mul(elems, dtype_size(vdt), "vectors"), "vectors");
    checked_bytes(checked_mul(count, 8, "ids"), "ids");
    if (count == 0) return;
    need_ids_valid(ids, count);
    cabi::need_finite(s.runtime(), vectors, vdt, elems, "vectors");
    if (vdt == DType::f32) need_finite_in(s.runtime(), vectors, s.dtype(), elems);
    s.add(ids, vectors, vdt, count);
  });
}

MNEMO_API mnemo_status mnemo_store_remove(mnemo_store* store, const uint64_t* ids, uint64_t count, uint64_t* removed) {
  return cabi::guarded("mnemo_store_remove", [&] {
    Store& s = cabi::store_of(store);
    if (count > 0) cabi::need_data(ids, "ids");
    checked_bytes(checked_mul(count, 8, "ids"), "ids");
    const uint64_t n = count ? s.remove(ids, count) : 0;
    if (removed) *removed = n;
  });
}

MNEMO_API mnemo_status mnemo_store_count(const mnemo_store* store, uint64_t* out) {
  return cabi::guarded("mnemo_store_count", [&] {
    Store& s = cabi::store_of(store);
    cabi::need_nonnull(out, "out");
    *out = s.count();
  });
}

MNEMO_API mnemo_status mnemo_store_shape(const mnemo_store* store, uint64_t* dim, int32_t* dtype, int32_t* metric) {
  return cabi::guarded("mnemo_store_shape", [&] {
    Store& s = cabi::store_of(store);
    if (dim) *dim = s.dim();
    if (dtype) *dtype = static_cast<int32_t>(s.dtype());
    if (metric) *metric = static_cast<int32_t>(s.metric());
  });
}

MNEMO_API mnemo_status mnemo_store_get(const mnemo_store* store, uint64_t id, float* out) {
  return cabi::guarded("mnemo_store_get", [&] {
    Store& s = cabi::store_of(store);
    cabi::need_data(out, "out");
    if (!s.get(id, out)) fail(Code::not_found, "id " + std::to_string(id) + " is not in the store");
  });
}

MNEMO_API mnemo_status mnemo_store_slot_count(const mnemo_store* store, uint64_t* out) {
  return cabi::guarded("mnemo_store_slot_count", [&] {
    Store& s = cabi::store_of(store);
    cabi::need_nonnull(out, "out");
    *out = s.slot_count();
  });
}

MNEMO_API mnemo_status mnemo_store_slot_of(const mnemo_store* store, uint64_t id, uint64_t* slot) {
  return cabi::guarded("mnemo_store_slot_of", [&] {
    Store& s = cabi::store_of(store);
    cabi::need_nonnull(slot, "slot");
    uint64_t v = 0;
    if (!s.slot_of(id, v)) fail(Code::not_found, "id " + std::to_string(id) + " is not in the store");
    *slot = v;
  });
}

MNEMO_API mnemo_status mnemo_store_set_bias(mnemo_store* store, const uint64_t* ids, const float* biases,
                                            uint64_t count) {
  return cabi::guarded("mnemo_store_set_bias", [&] {
    Store& s = cabi::store_of(store);
    cabi::need_data(ids, "ids");
    cabi::need_data(biases, "biases");
    checked_bytes(checked_mul(count, 8, "ids"), "ids");
    if (count == 0) return;
    // Biases are always checked: a NaN bias would poison every ranking.
    const uint64_t bad = find_non_finite(biases, DType::f32, count);
    if (bad != kNotFound) fail(Code::non_finite, "biases[" + std::to_string(bad) + "] is NaN or infinite");
    s.set_bias(ids, biases, count);
  });
}

MNEMO_API mnemo_search_options mnemo_search_options_default(void) {
  mnemo_search_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.filter_kind = MNEMO_FILTER_NONE;
  return o;
}

}  // extern "C"

namespace {

// Both search entry points: the same checks; query values are checked here
// for host buffers and by the backend for device ones.
void store_search(const mnemo_store* store, const float* queries, uint64_t nq, uint64_t k,
                  const mnemo_search_options* opts, uint64_t* ids, float* scores, const Placement& place) {
  Store& s = cabi::store_of(store);
  const mnemo_search_options o = opts ? *opts : mnemo_search_options_default();
  if (o.struct_size < kSearchOptionsV1)
    fail(Code::invalid_argument, "opts->struct_size is smaller than sizeof(mnemo_search_options) of ABI 1");
  cabi::need_positive(k, "k");
  if (o.apply_bias > 1) fail(Code::invalid_argument, "opts->apply_bias must be 0 or 1");
  SearchFilter f;
  switch (o.filter_kind) {
    case MNEMO_FILTER_NONE: break;
    case MNEMO_FILTER_IDS:
      f.kind = FilterKind::ids;
      if (o.filter_count > 0) cabi::need_data(o.filter_ids, "opts->filter_ids");
      checked_bytes(checked_mul(o.filter_count, 8, "opts->filter_ids"), "opts->filter_ids");
      f.ids = o.filter_ids;
      f.count = o.filter_count;
      break;
    case MNEMO_FILTER_SLOT_BITMAP:
      f.kind = FilterKind::slot_bitmap;
      if (o.filter_count > 0) cabi::need_data(o.filter_bitmap, "opts->filter_bitmap");
      f.bitmap = o.filter_bitmap;
      f.count = o.filter_count;
      break;
    default:
      fail(Code::invalid_argument,
           "opts->filter_kind = " + std::to_string(o.filter_kind) + " is not a mnemo_filter_kind");
  }
  cabi::need_data(queries, "queries");
  cabi::need_data(ids, "ids");
  cabi::need_data(scores, "scores");
  const uint64_t q_elems = checked_mul(nq, s.dim(), "queries");
  const uint64_t out_elems = checked_mul(nq, k, "nq x k");
  checked_bytes(checked_mul(q_elems, 4, "queries"), "queries");
  checked_bytes(checked_mul(out_elems, 8, "ids"), "ids");
  if (place.on_device) s.runtime().device_backend(Op::search);  // a CPU runtime is refused first
  if (nq == 0) return;
  cabi::need_disjoint(ids, out_elems * 8, scores, out_elems * 4, "ids and scores", false);
  cabi::need_disjoint(ids, out_elems * 8, queries, q_elems * 4, "ids and queries", false);
  cabi::need_disjoint(scores, out_elems * 4, queries, q_elems * 4, "scores and queries", false);
  if (!place.on_device) cabi::need_finite(s.runtime(), queries, DType::f32, q_elems, "queries");
  s.search(queries, nq, k, f, o.apply_bias != 0, ids, scores, place);
}

}  // namespace

extern "C" {

MNEMO_API mnemo_status mnemo_store_search(const mnemo_store* store, const float* queries, uint64_t nq, uint64_t k,
                                          const mnemo_search_options* opts, uint64_t* ids, float* scores) {
  return cabi::guarded("mnemo_store_search",
                       [&] { store_search(store, queries, nq, k, opts, ids, scores, Placement{}); });
}

MNEMO_API mnemo_status mnemo_store_search_device(const mnemo_store* store, const float* queries, uint64_t nq,
                                                 uint64_t k, const mnemo_search_options* opts, uint64_t* ids,
                                                 float* scores, void* stream) {
  return cabi::guarded("mnemo_store_search_device", [&] {
    store_search(store, queries, nq, k, opts, ids, scores, Placement{true, stream, true});
  });
}

MNEMO_API mnemo_status mnemo_store_save(const mnemo_store* store, const char* path) {
  return cabi::guarded("mnemo_store_save", [&] {
    Store& s = cabi::store_of(store);
    cabi::need_nonnull(path, "path");
    save_store(s, path);
  });
}

MNEMO_API mnemo_status mnemo_store_open(mnemo_runtime* rt, const char* path, mnemo_store** out) {
  return cabi::guarded("mnemo_store_open", [&] {
    Runtime& r = cabi::runtime_of(rt);
    cabi::need_nonnull(path, "path");
    cabi::need_nonnull(out, "out");
    *out = wrap(load_store(r, path));
  });
}

}  // extern "C"
