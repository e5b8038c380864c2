// The filter builder and the selection of matching memories.
#include <cmath>
#include <cstring>
#include <string>

#include "arg_checks.h"
#include "barrier.h"
#include "core/checked.h"
#include "fields_in.h"
#include "handles.h"

using namespace mnemo;

namespace {

Filter& filter_of(mnemo_filter* f) {
  if (!f) fail(Code::null_pointer, "filter is NULL");
  return f->filter;
}

std::vector<std::string> strings(const char* const* v, uint64_t n, const char* what) {
  if (n > 0 && !v) fail(Code::null_pointer, std::string(what) + " is NULL with a count of " + std::to_string(n));
  std::vector<std::string> out;
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    if (!v[i]) fail(Code::null_pointer, std::string(what) + "[" + std::to_string(i) + "] is NULL");
    out.emplace_back(v[i]);
  }
  return out;
}

template <class F>
mnemo_status build(const char* fn, mnemo_filter* f, uint32_t* node, F make) {
  return cabi::guarded(fn, [&] {
    Filter& flt = filter_of(f);
    const uint32_t n = flt.add(make());
    if (node) *node = n;
  });
}

FilterNode node_of(NodeKind k, int32_t op = 0) {
  FilterNode n;
  n.kind = k;
  n.op = static_cast<FilterOp>(op);
  return n;
}

}  // namespace

extern "C" {

MNEMO_API mnemo_status mnemo_filter_create(mnemo_filter** out) {
  return cabi::guarded("mnemo_filter_create", [&] {
    cabi::need_nonnull(out, "out");
    *out = new mnemo_filter();
  });
}

MNEMO_API void mnemo_filter_destroy(mnemo_filter* filter) { delete filter; }

MNEMO_API mnemo_status mnemo_filter_namespace(mnemo_filter* f, int32_t op, const char* const* parts, uint32_t depth,
                                              uint32_t* node) {
  return build("mnemo_filter_namespace", f, node, [&] {
    if (depth > MNEMO_MAX_NAMESPACE_DEPTH) fail(Code::invalid_argument, "depth is above MNEMO_MAX_NAMESPACE_DEPTH");
    FilterNode n = node_of(NodeKind::ns, op);
    n.strs = strings(parts, depth, "parts");
    return n;
  });
}

MNEMO_API mnemo_status mnemo_filter_tags(mnemo_filter* f, int32_t op, const char* const* tags, uint32_t count,
                                         uint32_t* node) {
  return build("mnemo_filter_tags", f, node, [&] {
    FilterNode n = node_of(NodeKind::tags, op);
    n.strs = strings(tags, count, "tags");
    return n;
  });
}

MNEMO_API mnemo_status mnemo_filter_attribute(mnemo_filter* f, const char* name, int32_t op, const mnemo_value* values,
                                              uint32_t count, uint32_t* node) {
  return build("mnemo_filter_attribute", f, node, [&] {
    cabi::need_nonnull(name, "name");
    if (count > 0) cabi::need_nonnull(values, "values");
    FilterNode n = node_of(NodeKind::attribute, op);
    n.name = name;
    for (uint32_t i = 0; i < count; ++i)
      n.values.push_back(cabi::value_in(values[i], "values[" + std::to_string(i) + "]"));
    return n;
  });
}

MNEMO_API mnemo_status mnemo_filter_keys(mnemo_filter* f, const char* const* keys, uint64_t count, uint32_t* node) {
  return build("mnemo_filter_keys", f, node, [&] {
    FilterNode n = node_of(NodeKind::keys);
    n.strs = strings(keys, count, "keys");
    return n;
  });
}

MNEMO_API mnemo_status mnemo_filter_ids(mnemo_filter* f, const uint64_t* ids, uint64_t count, uint32_t* node) {
  return build("mnemo_filter_ids", f, node, [&] {
    if (count > 0) cabi::need_data(ids, "ids");
    checked_bytes(checked_mul(count, 8, "ids"), "ids");
    FilterNode n = node_of(NodeKind::ids);
    n.ids.assign(ids, ids + count);
    return n;
  });
}

MNEMO_API mnemo_status mnemo_filter_time(mnemo_filter* f, double lo, double hi, uint32_t* node) {
  return build("mnemo_filter_time", f, node, [&] {
    FilterNode n = node_of(NodeKind::time);
    n.lo = lo;
    n.hi = hi;
    return n;
  });
}

MNEMO_API mnemo_status mnemo_filter_importance(mnemo_filter* f, double lo, double hi, uint32_t* node) {
  return build("mnemo_filter_importance", f, node, [&] {
    FilterNode n = node_of(NodeKind::importance);
    n.lo = lo;
    n.hi = hi;
    return n;
  });
}

MNEMO_API mnemo_status mnemo_filter_and(mnemo_filter* f, const uint32_t* children, uint32_t count, uint32_t* node) {
  return build("mnemo_filter_and", f, node, [&] {
    if (count > 0) cabi::need_nonnull(children, "children");
    FilterNode n = node_of(NodeKind::all_of);
    n.children.assign(children, children + count);
    return n;
  });
}

MNEMO_API mnemo_status mnemo_filter_or(mnemo_filter* f, const uint32_t* children, uint32_t count, uint32_t* node) {
  return build("mnemo_filter_or", f, node, [&] {
    if (count > 0) cabi::need_nonnull(children, "children");
    FilterNode n = node_of(NodeKind::any_of);
    n.children.assign(children, children + count);
    return n;
  });
}

MNEMO_API mnemo_status mnemo_filter_not(mnemo_filter* f, uint32_t child, uint32_t* node) {
  return build("mnemo_filter_not", f, node, [&] {
    FilterNode n = node_of(NodeKind::negate);
    n.children.push_back(child);
    return n;
  });
}

MNEMO_API mnemo_status mnemo_filter_set_root(mnemo_filter* f, uint32_t node) {
  return cabi::guarded("mnemo_filter_set_root", [&] { filter_of(f).set_root(node); });
}

MNEMO_API mnemo_status mnemo_store_select(const mnemo_store* store, const mnemo_filter* filter, uint64_t offset,
                                          uint64_t capacity, uint64_t* ids, uint64_t* written, uint64_t* total) {
  return cabi::guarded("mnemo_store_select", [&] {
    const Store& s = cabi::store_of(store);
    cabi::need_nonnull(written, "written");
    if (capacity > 0) cabi::need_data(ids, "ids");
    checked_bytes(checked_mul(capacity, 8, "ids"), "ids");
    if (filter) filter->filter.root();
    const auto got = s.select(filter ? &filter->filter : nullptr, offset, capacity, total);
    if (!got.empty()) std::memcpy(ids, got.data(), got.size() * 8);
    *written = got.size();
  });
}

}  // extern "C"
