// The memory store entry points.
#include <time.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>

#include "arg_checks.h"
#include "barrier.h"
#include "core/checked.h"
#include "core/validate.h"
#include "fields_in.h"
#include "handles.h"
#include "mnemo.h"

using namespace mnemo;

namespace {

constexpr uint64_t kMaxDim = 65536;
// The search options of ABI 1 (before activation), and the current ones.
constexpr uint32_t kSearchOptionsV1 = 40;
static_assert(offsetof(mnemo_search_options, activation) == kSearchOptionsV1, "options grow at their end");
static_assert(offsetof(mnemo_search_options, check_on_device) == 80, "options grow at their end");
static_assert(offsetof(mnemo_search_options, nprobe) == 96, "options grow at their end");
static_assert(offsetof(mnemo_search_options, where) == 104, "options grow at their end");

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

// Times and importances are always checked: a NaN would poison rankings.
void need_finite_meta(const double* times, const float* importance, uint64_t count) {
  for (uint64_t i = 0; times && i < count; ++i)
    if (!std::isfinite(times[i])) fail(Code::non_finite, "times[" + std::to_string(i) + "] is NaN or infinite");
  const uint64_t bad = importance ? find_non_finite(importance, DType::f32, count) : kNotFound;
  if (bad != kNotFound) fail(Code::non_finite, "importance[" + std::to_string(bad) + "] is NaN or infinite");
}

void store_add(mnemo_store* store, const uint64_t* ids, const void* vectors, int32_t vectors_dtype, uint64_t count,
               const double* times, const float* importance, const FieldsIn* fields = nullptr) {
  Store& s = cabi::store_of(store);
  const DType vdt = cabi::storage_dtype(vectors_dtype, "vectors_dtype");
  if (vdt != DType::f32 && vdt != s.dtype())
    fail(Code::dtype, std::string("vectors_dtype must be F32 or the store's dtype (") + dtype_name(s.dtype()) + ")");
  cabi::need_data(ids, "ids");
  cabi::need_data(vectors, "vectors");
  if (times) cabi::need_data(times, "times");
  if (importance) cabi::need_data(importance, "importance");
  const uint64_t elems = checked_mul(count, s.dim(), "vectors");
  checked_bytes(checked_mul(elems, dtype_size(vdt), "vectors"), "vectors");
  checked_bytes(checked_mul(count, 8, "ids"), "ids");
  if (count == 0) return;
  need_ids_valid(ids, count);
  cabi::need_finite(s.runtime(), vectors, vdt, elems, "vectors");
  if (vdt == DType::f32) need_finite_in(s.runtime(), vectors, s.dtype(), elems);
  need_finite_meta(times, importance, count);
  s.add(ids, vectors, vdt, count, times, importance, fields);
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
  return cabi::guarded("mnemo_store_add",
                       [&] { store_add(store, ids, vectors, vectors_dtype, count, nullptr, nullptr); });
}

MNEMO_API mnemo_status mnemo_store_add_memories(mnemo_store* store, const uint64_t* ids, const void* vectors,
                                                int32_t vectors_dtype, uint64_t count, const double* times,
                                                const float* importance) {
  return cabi::guarded("mnemo_store_add_memories",
                       [&] { store_add(store, ids, vectors, vectors_dtype, count, times, importance); });
}

MNEMO_API mnemo_status mnemo_store_add_with_fields(mnemo_store* store, const uint64_t* ids, const void* vectors,
                                                   int32_t vectors_dtype, uint64_t count, const double* times,
                                                   const float* importance, const mnemo_memory_fields* fields) {
  return cabi::guarded("mnemo_store_add_with_fields", [&] {
    cabi::store_of(store);
    std::vector<FieldsIn> in;
    if (fields && count > 0) in = cabi::fields_in(fields, count);
    store_add(store, ids, vectors, vectors_dtype, count, times, importance, fields && count > 0 ? in.data() : nullptr);
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

MNEMO_API mnemo_status mnemo_store_set_times(mnemo_store* store, const uint64_t* ids, const double* times,
                                             uint64_t count) {
  return cabi::guarded("mnemo_store_set_times", [&] {
    Store& s = cabi::store_of(store);
    cabi::need_data(ids, "ids");
    cabi::need_data(times, "times");
    checked_bytes(checked_mul(count, 8, "ids"), "ids");
    if (count == 0) return;
    need_finite_meta(times, nullptr, count);
    s.set_times(ids, times, count);
  });
}

MNEMO_API mnemo_status mnemo_store_set_importance(mnemo_store* store, const uint64_t* ids, const float* importance,
                                                  uint64_t count) {
  return cabi::guarded("mnemo_store_set_importance", [&] {
    Store& s = cabi::store_of(store);
    cabi::need_data(ids, "ids");
    cabi::need_data(importance, "importance");
    checked_bytes(checked_mul(count, 8, "ids"), "ids");
    if (count == 0) return;
    need_finite_meta(nullptr, importance, count);
    s.set_importance(ids, importance, count);
  });
}

MNEMO_API mnemo_status mnemo_store_get_meta(const mnemo_store* store, const uint64_t* ids, uint64_t count,
                                            double* times, float* importance, float* biases) {
  return cabi::guarded("mnemo_store_get_meta", [&] {
    Store& s = cabi::store_of(store);
    if (count > 0) cabi::need_data(ids, "ids");
    checked_bytes(checked_mul(count, 8, "ids"), "ids");
    if (times) cabi::need_data(times, "times");
    if (importance) cabi::need_data(importance, "importance");
    if (biases) cabi::need_data(biases, "biases");
    if (count == 0) return;
    s.get_meta(ids, count, times, importance, biases);
  });
}

MNEMO_API mnemo_search_options mnemo_search_options_default(void) {
  mnemo_search_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.filter_kind = MNEMO_FILTER_NONE;
  o.w_relevance = 1.0f;
  o.half_life = 86400.0;
  o.now = std::nan("");
  return o;
}

}  // extern "C"

namespace {

double unix_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The activation part of the options, checked.
RankOptions rank_options(const mnemo_search_options& o) {
  RankOptions r;
  r.apply_bias = o.apply_bias != 0;
  auto flag = [](uint32_t v, const char* name) {
    if (v > 1) fail(Code::invalid_argument, std::string("opts->") + name + " must be 0 or 1");
    return v == 1;
  };
  r.act.on = flag(o.activation, "activation");
  r.act.normalize = flag(o.normalize, "normalize");
  r.touch = flag(o.touch, "touch");
  if (!r.act.on) {
    if (r.act.normalize || r.touch)
      fail(Code::invalid_argument, "opts->normalize and opts->touch need opts->activation = 1");
    return r;
  }
  auto weight = [](float w, const char* name) {
    if (!std::isfinite(w)) fail(Code::invalid_argument, std::string("opts->") + name + " must be finite");
    return w;
  };
  r.act.w_rel = weight(o.w_relevance, "w_relevance");
  r.act.w_rec = weight(o.w_recency, "w_recency");
  r.act.w_imp = weight(o.w_importance, "w_importance");
  if (!(o.half_life > 0.0))
    fail(Code::invalid_argument, "opts->half_life must be > 0 (seconds; +infinity for no decay)");
  r.act.half_life = o.half_life;
  if (std::isinf(o.now)) fail(Code::invalid_argument, "opts->now must be finite (NaN: the current time)");
  r.act.now = std::isnan(o.now) ? unix_now() : o.now;
  return r;
}

// Both search entry points: the same checks; query values are checked here
// for host buffers and by the backend for device ones.
void store_search(const mnemo_store* store, const float* queries, uint64_t nq, uint64_t k,
                  const mnemo_search_options* opts, uint64_t* ids, float* scores, Placement place) {
  Store& s = cabi::store_of(store);
  // A caller built against an older header passes a shorter struct: its
  // fields over the defaults of the rest.
  mnemo_search_options o = mnemo_search_options_default();
  if (opts) {
    if (opts->struct_size < kSearchOptionsV1)
      fail(Code::invalid_argument, "opts->struct_size is smaller than sizeof(mnemo_search_options) of ABI 1");
    // A size between two headers' would cut a field (a pointer) in two.
    const uint32_t sz = opts->struct_size;
    if (sz < sizeof o && sz != kSearchOptionsV1 && sz != 80 && sz != 96 && sz != 104)
      fail(Code::invalid_argument, "opts->struct_size = " + std::to_string(sz) +
                                       " is not the size of mnemo_search_options in any header (40, 80, 96, 104 or " +
                                       std::to_string(sizeof o) + " and up)");
    std::memcpy(&o, opts, std::min<size_t>(opts->struct_size, sizeof o));
  }
  cabi::need_positive(k, "k");
  if (o.apply_bias > 1) fail(Code::invalid_argument, "opts->apply_bias must be 0 or 1");
  if (o.check_on_device > 1) fail(Code::invalid_argument, "opts->check_on_device must be 0 or 1");
  if (o.device_status) {
    if (!place.on_device)
      fail(Code::invalid_argument, "opts->device_status is for mnemo_store_search_device only (it is device memory)");
    cabi::need_data(o.device_status, "opts->device_status");
  }
  place.check_on_device = place.on_device && o.check_on_device == 1;
  place.device_status = o.device_status;
  RankOptions rank = rank_options(o);
  if (o.reserved2 != 0) fail(Code::invalid_argument, "opts->reserved2 must be zero");
  rank.nprobe = o.nprobe;
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
  if (o.where) f.where = &o.where->filter, f.where->root();
  std::vector<const Filter*> each;
  if (o.where_each && nq > 0) {
    checked_bytes(checked_mul(nq, sizeof(void*), "opts->where_each"), "opts->where_each");
    each.resize(nq);
    for (uint64_t i = 0; i < nq; ++i) {
      each[i] = o.where_each[i] ? &o.where_each[i]->filter : nullptr;
      if (each[i]) each[i]->root();  // an empty filter is refused before the search
    }
    // Queries without a filter of their own take `where` (or none): one
    // all-pass filter stands in for them.
    f.each = each.data();
  }
  static const Filter kAll = [] {
    Filter a;
    FilterNode n;
    n.kind = NodeKind::all_of;
    a.add(std::move(n));
    return a;
  }();
  for (auto& e : each)
    if (!e) e = &kAll;
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
  s.search(queries, nq, k, f, rank, ids, scores, place);
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
