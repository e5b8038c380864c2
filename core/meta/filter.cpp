#include "filter.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mnemo {

namespace {

[[noreturn]] void bad(const std::string& what) { fail(Code::invalid_argument, what); }

bool is_number(const ValueIn& v) { return v.type == ValueType::i64 || v.type == ValueType::f64; }

void need_operands(const FilterNode& n) {
  const size_t c = n.values.size();
  switch (n.op) {
    case FilterOp::eq:
    case FilterOp::ne:
    case FilterOp::lt:
    case FilterOp::le:
    case FilterOp::gt:
    case FilterOp::ge:
      if (c != 1) bad("this attribute operator takes one value, not " + std::to_string(c));
      break;
    case FilterOp::between:
      if (c != 2) bad("BETWEEN takes two values, not " + std::to_string(c));
      if (!(is_number(n.values[0]) && is_number(n.values[1])) &&
          !(n.values[0].type == ValueType::str && n.values[1].type == ValueType::str))
        bad("BETWEEN takes two numbers or two strings");
      break;
    case FilterOp::exists:
      if (c != 0) bad("EXISTS takes no value");
      break;
    case FilterOp::in:
    case FilterOp::not_in: break;
    default: bad("operator " + std::to_string(static_cast<int>(n.op)) + " does not apply to an attribute");
  }
  if (n.op >= FilterOp::lt && n.op <= FilterOp::ge && n.values[0].type == ValueType::boolean)
    bad("booleans are only compared by EQ, NE, IN and NOT_IN");
  for (const auto& v : n.values)
    if (v.type == ValueType::f64 && !std::isfinite(v.d)) bad("a DOUBLE operand is NaN or infinite");
}

}  // namespace

uint32_t Filter::add(FilterNode n) {
  if (nodes_.size() >= 65536) bad("a filter holds at most MNEMO_MAX_FILTER_NODES (65536) nodes");
  switch (n.kind) {
    case NodeKind::ns:
      if (n.op != FilterOp::ns_eq && n.op != FilterOp::ns_under)
        bad("a namespace takes NAMESPACE_EQ or NAMESPACE_UNDER");
      break;
    case NodeKind::tags:
      if (n.op != FilterOp::any && n.op != FilterOp::all) bad("tags take ANY or ALL");
      break;
    case NodeKind::attribute:
      if (n.name.empty()) bad("an attribute name is empty");
      need_operands(n);
      break;
    case NodeKind::time:
    case NodeKind::importance:
      if (std::isnan(n.lo) || std::isnan(n.hi)) bad("a range bound is NaN");
      break;
    case NodeKind::all_of:
    case NodeKind::any_of:
    case NodeKind::negate:
      for (uint32_t c : n.children)
        if (c >= nodes_.size())
          bad("child node " + std::to_string(c) + " does not exist (" + std::to_string(nodes_.size()) +
              " nodes built)");
      break;
    default: break;
  }
  uint32_t depth = 1;
  for (uint32_t c : n.children) depth = std::max(depth, depth_[c] + 1);
  if (depth > 256) bad("a filter nests at most 256 levels deep");
  depth_.push_back(depth);
  nodes_.push_back(std::move(n));
  root_ = static_cast<int64_t>(nodes_.size() - 1);
  return static_cast<uint32_t>(root_);
}

void Filter::set_root(uint32_t node) {
  if (node >= nodes_.size())
    bad("node " + std::to_string(node) + " does not exist (" + std::to_string(nodes_.size()) + " nodes built)");
  root_ = node;
}

uint32_t Filter::root() const {
  if (root_ < 0) bad("the filter is empty (no node built)");
  return static_cast<uint32_t>(root_);
}

namespace {

class Evaluator {
 public:
  Evaluator(const Filter& f, const FilterScope& s) : f_(f), s_(s) {}

  Roaring eval(uint32_t i) const {
    const FilterNode& n = f_.nodes()[i];
    switch (n.kind) {
      case NodeKind::ns: return ns(n);
      case NodeKind::tags: return tags(n);
      case NodeKind::attribute: return attribute(n);
      case NodeKind::keys: return keys(n);
      case NodeKind::ids: return ids(n);
      case NodeKind::time: return range_of(s_.times, n.lo, n.hi);
      case NodeKind::importance: return range_of(s_.importance, n.lo, n.hi);
      case NodeKind::all_of: {
        if (n.children.empty()) return everything();
        // Smallest first: every later intersection is bounded by it.
        std::vector<Roaring> parts;
        for (uint32_t c : n.children) parts.push_back(eval(c));
        std::sort(parts.begin(), parts.end(),
                  [](const Roaring& a, const Roaring& b) { return a.cardinality() < b.cardinality(); });
        Roaring out = std::move(parts[0]);
        for (size_t j = 1; j < parts.size() && !out.isEmpty(); ++j) out &= parts[j];
        return out;
      }
      case NodeKind::any_of: {
        Roaring out;
        for (uint32_t c : n.children) out |= eval(c);
        return out;
      }
      case NodeKind::negate: {
        Roaring out = everything();
        if (!n.children.empty()) out -= eval(n.children[0]);
        return out;
      }
    }
    return Roaring();
  }

 private:
  Roaring everything() const {
    Roaring r;
    if (s_.slots > 0) r.addRange(0, s_.slots);
    return r;
  }
  static Roaring copy(const Roaring* r) { return r ? *r : Roaring(); }

  // The interned ids of strings; false when one was never interned.
  bool interned(const std::vector<std::string>& strs, std::vector<uint32_t>& out) const {
    out.clear();
    for (const auto& x : strs) {
      const uint32_t id = s_.pool->find(x);
      if (!id) return false;
      out.push_back(id);
    }
    return true;
  }

  Roaring ns(const FilterNode& n) const {
    std::vector<uint32_t> parts;
    if (!interned(n.strs, parts)) return Roaring();
    if (n.op == FilterOp::ns_eq) {
      const uint32_t id = s_.namespaces->find(parts);
      return id ? copy(s_.postings->ns(id)) : Roaring();
    }
    if (parts.empty()) return s_.postings->any_ns();
    Roaring out;
    for (uint32_t id : s_.namespaces->under(parts))
      if (const Roaring* r = s_.postings->ns(id)) out |= *r;
    return out;
  }

  Roaring tags(const FilterNode& n) const {
    if (n.op == FilterOp::any) {
      Roaring out;
      for (const auto& t : n.strs)
        if (const uint32_t id = s_.pool->find(t))
          if (const Roaring* r = s_.postings->tag(id)) out |= *r;
      return out;
    }
    if (n.strs.empty()) return everything();
    std::vector<const Roaring*> sets;
    for (const auto& t : n.strs) {
      const uint32_t id = s_.pool->find(t);
      const Roaring* r = id ? s_.postings->tag(id) : nullptr;
      if (!r) return Roaring();
      sets.push_back(r);
    }
    std::sort(sets.begin(), sets.end(), [](auto* a, auto* b) { return a->cardinality() < b->cardinality(); });
    Roaring out = *sets[0];
    for (size_t j = 1; j < sets.size() && !out.isEmpty(); ++j) out &= *sets[j];
    return out;
  }

  // Slots whose attribute equals v (same kind, or both numbers).
  Roaring equal(uint32_t name, const ValueIn& v) const {
    switch (v.type) {
      case ValueType::str: {
        const uint32_t id = s_.pool->find(v.s);
        return id ? copy(s_.postings->text(name, id)) : Roaring();
      }
      case ValueType::boolean: return copy(s_.postings->flag(name, v.i != 0));
      default: return s_.postings->numeric(name, &v, true, &v, true);
    }
  }

  // String values of `name` within [lo, hi] (either may be null: open).
  Roaring text_range(uint32_t name, const std::string* lo, bool lo_incl, const std::string* hi, bool hi_incl) const {
    Roaring out;
    for (uint32_t id : s_.postings->text_values(name)) {
      const std::string& x = s_.pool->str(id);
      if (lo && (x < *lo || (x == *lo && !lo_incl))) continue;
      if (hi && (x > *hi || (x == *hi && !hi_incl))) continue;
      if (const Roaring* r = s_.postings->text(name, id)) out |= *r;
    }
    return out;
  }

  Roaring ordered(uint32_t name, const ValueIn* lo, bool lo_incl, const ValueIn* hi, bool hi_incl) const {
    const ValueIn& v = lo ? *lo : *hi;
    if (v.type == ValueType::str)
      return text_range(name, lo ? &lo->s : nullptr, lo_incl, hi ? &hi->s : nullptr, hi_incl);
    return s_.postings->numeric(name, lo, lo_incl, hi, hi_incl);
  }

  Roaring attribute(const FilterNode& n) const {
    const uint32_t name = s_.pool->find(n.name);
    if (!name) return Roaring();
    const auto& v = n.values;
    switch (n.op) {
      case FilterOp::exists: return copy(s_.postings->has(name));
      case FilterOp::eq: return equal(name, v[0]);
      case FilterOp::ne: {
        Roaring out = copy(s_.postings->has(name));
        out -= equal(name, v[0]);
        return out;
      }
      case FilterOp::in: {
        Roaring out;
        for (const auto& x : v) out |= equal(name, x);
        return out;
      }
      case FilterOp::not_in: {
        Roaring out = copy(s_.postings->has(name));
        for (const auto& x : v) out -= equal(name, x);
        return out;
      }
      case FilterOp::lt: return ordered(name, nullptr, false, &v[0], false);
      case FilterOp::le: return ordered(name, nullptr, false, &v[0], true);
      case FilterOp::gt: return ordered(name, &v[0], false, nullptr, false);
      case FilterOp::ge: return ordered(name, &v[0], true, nullptr, false);
      case FilterOp::between: return ordered(name, &v[0], true, &v[1], true);
      default: return Roaring();
    }
  }

  Roaring ids(const FilterNode& n) const {
    std::vector<uint32_t> slots;
    for (uint64_t id : n.ids)
      if (const auto* e = s_.slot_of->find(id)) slots.push_back(static_cast<uint32_t>(e->second));
    std::sort(slots.begin(), slots.end());
    return Roaring(slots.size(), slots.data());
  }

  Roaring keys(const FilterNode& n) const {
    std::vector<uint32_t> slots;
    for (const auto& k : n.strs) {
      auto it = s_.key_ids->find(k);
      if (it == s_.key_ids->end()) continue;
      if (const auto* e = s_.slot_of->find(it->second)) slots.push_back(static_cast<uint32_t>(e->second));
    }
    std::sort(slots.begin(), slots.end());
    return Roaring(slots.size(), slots.data());
  }

  template <class T>
  Roaring range_of(const T* col, double lo, double hi) const {
    std::vector<uint32_t> slots;
    for (uint64_t i = 0; i < s_.slots; ++i)
      if (col[i] >= lo && col[i] <= hi) slots.push_back(static_cast<uint32_t>(i));
    return Roaring(slots.size(), slots.data());
  }

  const Filter& f_;
  const FilterScope& s_;
};

}  // namespace

Roaring evaluate(const Filter& f, const FilterScope& scope) { return Evaluator(f, scope).eval(f.root()); }

bool namespace_ids(const FilterNode& n, const FilterScope& s, std::vector<uint32_t>& ids) {
  ids.clear();
  std::vector<uint32_t> parts;
  for (const auto& p : n.strs) {
    const uint32_t id = s.pool->find(p);
    if (!id) return false;
    parts.push_back(id);
  }
  if (n.op == FilterOp::ns_eq) {
    if (const uint32_t id = s.namespaces->find(parts)) ids.push_back(id);
  } else {
    ids = s.namespaces->under(parts);
  }
  std::sort(ids.begin(), ids.end());
  return true;
}

std::vector<uint64_t> named_ids(const FilterNode& n, const FilterScope& s) {
  std::vector<uint64_t> ids;
  if (n.kind == NodeKind::ids) {
    ids = n.ids;
  } else {
    for (const auto& k : n.strs) {
      auto it = s.key_ids->find(k);
      if (it != s.key_ids->end()) ids.push_back(it->second);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace mnemo
