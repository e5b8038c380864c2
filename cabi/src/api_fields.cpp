// The entry points of memories' fields: writes, key look-ups, reads and the
// namespaces in use.
#include <cmath>
#include <cstring>
#include <string>

#include "arg_checks.h"
#include "barrier.h"
#include "core/checked.h"
#include "core/meta/fields_codec.h"
#include "fields_in.h"
#include "handles.h"

using namespace mnemo;

namespace mnemo::cabi {

namespace {

// The struct sizes this library knows: the fields struct of ABI 1's
// header. A larger one from a newer header is read up to what is known.
constexpr uint32_t kFieldsV1 = sizeof(mnemo_memory_fields);

// `what` names the argument in a failure's message: a callable returning
// it, made only when a check fails (a write of many memories checks every
// name of every attribute, and building the names took several
// allocations a memory).
template <class What>
std::string c_string(const char* s, uint64_t limit, const What& what) {
  if (!s) fail(Code::null_pointer, what() + " is NULL");
  const size_t n = strnlen(s, limit + 1);
  if (n > limit) fail(Code::invalid_argument, what() + " is longer than " + std::to_string(limit) + " bytes");
  return std::string(s, n);
}

template <class What>
std::vector<std::string> c_strings(const char* const* v, uint64_t n, uint64_t limit, const What& what) {
  if (n > 0 && !v) fail(Code::null_pointer, what() + " is NULL with a count of " + std::to_string(n));
  std::vector<std::string> out;
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i)
    out.push_back(c_string(v[i], limit, [&] { return what() + "[" + std::to_string(i) + "]"; }));
  return out;
}

template <class What>
ValueIn checked_value(const mnemo_value& v, const What& where) {
  ValueIn x;
  if (v.reserved != 0) fail(Code::invalid_argument, where() + ".reserved must be zero");
  switch (v.type) {
    case MNEMO_VALUE_INT:
      x.type = ValueType::i64;
      x.i = v.i;
      break;
    case MNEMO_VALUE_DOUBLE:
      if (!std::isfinite(v.d)) fail(Code::invalid_argument, where() + " is a DOUBLE that is NaN or infinite");
      x.type = ValueType::f64;
      x.d = v.d;
      break;
    case MNEMO_VALUE_BOOL:
      if (v.i != 0 && v.i != 1) fail(Code::invalid_argument, where() + " is a BOOL that is not 0 or 1");
      x.type = ValueType::boolean;
      x.i = v.i;
      break;
    case MNEMO_VALUE_STRING:
      x.type = ValueType::str;
      x.s = c_string(v.s, kMaxNameBytes, [&] { return where() + ".s"; });
      break;
    default: fail(Code::invalid_argument, where() + ".type = " + std::to_string(v.type) + " is not a mnemo_value_type");
  }
  return x;
}

// mnemo_store_read(_fields): the records of `ids` with the fields in
// `wanted`, and the C views into them, checked before anything is read.
void read_records(const mnemo_store* store, const uint64_t* ids, uint64_t count, uint32_t wanted, mnemo_records** out) {
  const Store& s = store_of(store);
  need_nonnull(out, "out");
  if (count > 0) need_data(ids, "ids");
  checked_bytes(checked_mul(count, 8, "ids"), "ids");
  constexpr uint32_t known = MNEMO_FIELD_ALL | MNEMO_READ_META;
  if (wanted & ~known)
    fail(Code::invalid_argument, "fields = " + std::to_string(wanted) +
                                     " names bits outside MNEMO_FIELD_ALL | MNEMO_READ_META (" + std::to_string(known) +
                                     ")");
  auto r = std::make_unique<mnemo_records>();
  r->rows = s.read(ids, count, wanted & MNEMO_FIELD_ALL, (wanted & MNEMO_READ_META) != 0);
  r->ns.resize(count);
  r->tags.resize(count);
  r->attrs.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    const FieldsOut& f = r->rows[i];
    for (const auto& p : f.ns) r->ns[i].push_back(p.c_str());
    for (const auto& t : f.tags) r->tags[i].push_back(t.c_str());
    for (const auto& [name, v] : f.attrs) {
      mnemo_attribute a;
      std::memset(&a, 0, sizeof a);
      a.name = name.c_str();
      switch (v.type) {
        case ValueType::i64: a.value.type = MNEMO_VALUE_INT; break;
        case ValueType::f64: a.value.type = MNEMO_VALUE_DOUBLE; break;
        case ValueType::boolean: a.value.type = MNEMO_VALUE_BOOL; break;
        default: a.value.type = MNEMO_VALUE_STRING; break;
      }
      a.value.i = v.i;
      a.value.d = v.d;
      a.value.s = v.type == ValueType::str ? v.s.c_str() : nullptr;
      r->attrs[i].push_back(a);
    }
  }
  *out = r.release();
}

}  // namespace

ValueIn value_in(const mnemo_value& v, const std::string& where) {
  return checked_value(v, [&] { return where; });
}

std::vector<FieldsIn> fields_in(const mnemo_memory_fields* fields, uint64_t count) {
  need_nonnull(fields, "fields");
  checked_bytes(checked_mul(count, sizeof(mnemo_memory_fields), "fields"), "fields");
  std::vector<FieldsIn> out(count);
  for (uint64_t i = 0; i < count; ++i) {
    const mnemo_memory_fields& f = fields[i];
    const std::string at = "fields[" + std::to_string(i) + "]";
    if (f.struct_size != kFieldsV1)
      fail(Code::invalid_argument,
           at + ".struct_size must be sizeof(mnemo_memory_fields) (" + std::to_string(kFieldsV1) + ")");
    if (f.reserved0 != 0) fail(Code::invalid_argument, at + ".reserved0 must be zero");
    FieldsIn& o = out[i];
    o.set = f.set;
    if (f.set & ~uint32_t{MNEMO_FIELD_ALL})
      fail(Code::invalid_argument, at + ".set holds bits other than MNEMO_FIELD_*");
    if ((f.set & MNEMO_FIELD_KEY) && f.key) o.key = c_string(f.key, kMaxKeyBytes, [&] { return at + ".key"; });
    if (f.set & MNEMO_FIELD_NAMESPACE) {
      if (f.namespace_depth > kMaxNamespaceDepth)
        fail(Code::invalid_argument, at + ".namespace_depth is above MNEMO_MAX_NAMESPACE_DEPTH");
      o.ns = c_strings(f.namespace_parts, f.namespace_depth, kMaxNameBytes, [&] { return at + ".namespace_parts"; });
    }
    if (f.set & MNEMO_FIELD_TAGS) {
      if (f.tag_count > kMaxTags) fail(Code::invalid_argument, at + ".tag_count is above MNEMO_MAX_TAGS");
      o.tags = c_strings(f.tags, f.tag_count, kMaxNameBytes, [&] { return at + ".tags"; });
    }
    if (f.set & MNEMO_FIELD_ATTRIBUTES) {
      if (f.attribute_count > kMaxAttributes)
        fail(Code::invalid_argument, at + ".attribute_count is above MNEMO_MAX_ATTRIBUTES");
      if (f.attribute_count > 0 && !f.attributes) fail(Code::null_pointer, at + ".attributes is NULL");
      o.attrs.reserve(f.attribute_count);
      for (uint32_t a = 0; a < f.attribute_count; ++a) {
        const auto an = [&] { return at + ".attributes[" + std::to_string(a) + "]"; };
        std::string name = c_string(f.attributes[a].name, kMaxNameBytes, [&] { return an() + ".name"; });
        o.attrs.emplace_back(std::move(name), checked_value(f.attributes[a].value, [&] { return an() + ".value"; }));
      }
    }
    if ((f.set & MNEMO_FIELD_PAYLOAD) && f.payload_bytes > 0) {
      if (f.payload_bytes > kMaxPayloadBytes)
        fail(Code::invalid_argument, at + ".payload_bytes is above MNEMO_MAX_PAYLOAD_BYTES");
      if (!f.payload) fail(Code::null_pointer, at + ".payload is NULL with payload_bytes > 0");
      o.payload.assign(static_cast<const char*>(f.payload), f.payload_bytes);
    }
    check_fields(o, at);
  }
  return out;
}

}  // namespace mnemo::cabi

extern "C" {

MNEMO_API mnemo_memory_fields mnemo_memory_fields_default(void) {
  mnemo_memory_fields f;
  std::memset(&f, 0, sizeof f);
  f.struct_size = sizeof f;
  return f;
}

MNEMO_API mnemo_status mnemo_store_update_fields(mnemo_store* store, const uint64_t* ids,
                                                 const mnemo_memory_fields* fields, uint64_t count) {
  return cabi::guarded("mnemo_store_update_fields", [&] {
    Store& s = cabi::store_of(store);
    if (count == 0) return;
    cabi::need_data(ids, "ids");
    checked_bytes(checked_mul(count, 8, "ids"), "ids");
    const auto in = cabi::fields_in(fields, count);
    s.update_fields(ids, in.data(), count);
  });
}

MNEMO_API mnemo_status mnemo_store_ids_of_keys(const mnemo_store* store, const char* const* keys, uint64_t count,
                                               uint64_t* ids) {
  return cabi::guarded("mnemo_store_ids_of_keys", [&] {
    const Store& s = cabi::store_of(store);
    if (count == 0) return;
    cabi::need_data(ids, "ids");
    checked_bytes(checked_mul(count, 8, "ids"), "ids");
    // A key longer than any stored one cannot be held: looked up as is.
    const auto k = cabi::c_strings(keys, count, UINT64_MAX - 1, [] { return std::string("keys"); });
    s.ids_of_keys(k.data(), count, ids);
  });
}

MNEMO_API mnemo_status mnemo_store_read(const mnemo_store* store, const uint64_t* ids, uint64_t count,
                                        mnemo_records** out) {
  return cabi::guarded("mnemo_store_read",
                       [&] { cabi::read_records(store, ids, count, MNEMO_FIELD_ALL | MNEMO_READ_META, out); });
}

MNEMO_API mnemo_status mnemo_store_read_fields(const mnemo_store* store, const uint64_t* ids, uint64_t count,
                                               uint32_t fields, mnemo_records** out) {
  return cabi::guarded("mnemo_store_read_fields", [&] { cabi::read_records(store, ids, count, fields, out); });
}

MNEMO_API void mnemo_records_destroy(mnemo_records* records) { delete records; }

MNEMO_API uint64_t mnemo_records_count(const mnemo_records* records) { return records ? records->rows.size() : 0; }

MNEMO_API mnemo_status mnemo_records_get(const mnemo_records* records, uint64_t i, uint32_t* found, uint64_t* id,
                                         mnemo_memory_fields* fields, double* time, float* importance) {
  return cabi::guarded("mnemo_records_get", [&] {
    cabi::need_nonnull(records, "records");
    cabi::need_nonnull(found, "found");
    if (i >= records->rows.size())
      fail(Code::out_of_range,
           "i = " + std::to_string(i) + " but the records hold " + std::to_string(records->rows.size()));
    if (fields && fields->struct_size < sizeof(mnemo_memory_fields))
      fail(Code::invalid_argument, "fields->struct_size is smaller than sizeof(mnemo_memory_fields)");
    const FieldsOut& f = records->rows[i];
    *found = f.found ? 1 : 0;
    if (!f.found) return;
    if (id) *id = f.id;
    if (time) *time = f.time;
    if (importance) *importance = f.importance;
    if (!fields) return;
    mnemo_memory_fields o = mnemo_memory_fields_default();
    o.set = f.set;
    o.key = f.key.empty() ? nullptr : f.key.c_str();
    o.namespace_parts = records->ns[i].data();
    o.namespace_depth = static_cast<uint32_t>(records->ns[i].size());
    o.tags = records->tags[i].data();
    o.tag_count = static_cast<uint32_t>(records->tags[i].size());
    o.attributes = records->attrs[i].data();
    o.attribute_count = static_cast<uint32_t>(records->attrs[i].size());
    o.payload = f.payload.empty() ? nullptr : f.payload.data();
    o.payload_bytes = f.payload.size();
    std::memcpy(fields, &o, sizeof o);
  });
}

MNEMO_API mnemo_status mnemo_store_namespaces(const mnemo_store* store, mnemo_namespaces** out) {
  return cabi::guarded("mnemo_store_namespaces", [&] {
    const Store& s = cabi::store_of(store);
    cabi::need_nonnull(out, "out");
    auto l = std::make_unique<mnemo_namespaces>();
    l->rows = s.namespaces();
    for (const auto& [path, n] : l->rows) {
      std::vector<const char*> p;
      for (const auto& x : path) p.push_back(x.c_str());
      l->parts.push_back(std::move(p));
    }
    *out = l.release();
  });
}

MNEMO_API mnemo_status mnemo_store_cluster(mnemo_store* store) {
  return cabi::guarded("mnemo_store_cluster", [&] { cabi::store_of(store).cluster(); });
}

MNEMO_API void mnemo_namespaces_destroy(mnemo_namespaces* list) { delete list; }

MNEMO_API uint64_t mnemo_namespaces_count(const mnemo_namespaces* list) { return list ? list->rows.size() : 0; }

MNEMO_API mnemo_status mnemo_namespaces_get(const mnemo_namespaces* list, uint64_t i, const char* const** parts,
                                            uint32_t* depth, uint64_t* memories) {
  return cabi::guarded("mnemo_namespaces_get", [&] {
    cabi::need_nonnull(list, "list");
    if (i >= list->rows.size())
      fail(Code::out_of_range, "i = " + std::to_string(i) + " but the list holds " + std::to_string(list->rows.size()));
    if (parts) *parts = list->parts[i].data();
    if (depth) *depth = static_cast<uint32_t>(list->parts[i].size());
    if (memories) *memories = list->rows[i].second;
  });
}

}  // extern "C"
