#include "filter_test.h"

#include <algorithm>

namespace mnemo {

FilterTest::FilterTest(const Filter& f, const FilterScope& s) : s_(s), root_(f.root()) {
  for (const FilterNode& fn : f.nodes()) {
    Node n;
    n.kind = fn.kind;
    n.op = fn.op;
    n.lo = fn.lo;
    n.hi = fn.hi;
    n.children = fn.children;
    switch (fn.kind) {
      case NodeKind::tags:
        for (const auto& t : fn.strs) {
          const uint32_t id = s.pool->find(t);
          if (id)
            n.ids.push_back(id);
          else
            n.unknown = true;
        }
        break;
      case NodeKind::ns: n.unknown = !namespace_ids(fn, s, n.ids); break;
      case NodeKind::attribute:
        n.name = s.pool->find(fn.name);
        n.values = fn.values;
        for (const auto& v : fn.values) n.text.push_back(v.type == ValueType::str ? s.pool->find(v.s) : 0);
        break;
      case NodeKind::ids:
      case NodeKind::keys: {
        const std::vector<uint64_t> ids = named_ids(fn, s);
        n.id_set.insert(ids.begin(), ids.end());
        break;
      }
      default: break;
    }
    nodes_.push_back(std::move(n));
  }
}

namespace {

bool has_tag(const Record* r, uint32_t t) { return r && std::binary_search(r->tags.begin(), r->tags.end(), t); }

// The stored value as a ValueIn for the ordering rules (strings by text).
ValueIn as_value(const Value& v, const StringPool& pool) {
  ValueIn x;
  x.type = v.type;
  x.i = v.i;
  x.d = v.d;
  if (v.type == ValueType::str) x.s = pool.str(v.s);
  return x;
}

bool numeric(ValueType t) { return t == ValueType::i64 || t == ValueType::f64; }

}  // namespace

bool FilterTest::attribute(const Node& n, const Record* rec) const {
  if (!rec || !n.name) return false;
  auto it = std::lower_bound(rec->attrs.begin(), rec->attrs.end(), n.name,
                             [](const auto& a, uint32_t name) { return a.first < name; });
  if (it == rec->attrs.end() || it->first != n.name) return false;
  const Value& v = it->second;
  // Equality by the store's rules: numbers as numbers, strings by their
  // interned id, bools by value, other pairs never equal.
  auto eq = [&](size_t j) {
    const ValueIn& o = n.values[j];
    if (numeric(v.type) && numeric(o.type)) return compare_numbers(as_value(v, *s_.pool), o) == 0;
    if (v.type != o.type) return false;
    if (v.type == ValueType::str) return n.text[j] != 0 && v.s == n.text[j];
    return v.i == o.i;
  };
  // Ordering: numbers with numbers, strings with strings; -2 when they do
  // not order.
  auto cmp = [&](size_t j) {
    const ValueIn& o = n.values[j];
    if (numeric(v.type) && numeric(o.type)) return compare_numbers(as_value(v, *s_.pool), o);
    if (v.type == ValueType::str && o.type == ValueType::str) {
      const int c = s_.pool->str(v.s).compare(o.s);
      return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    return -2;
  };
  switch (n.op) {
    case FilterOp::exists: return true;
    case FilterOp::eq: return eq(0);
    case FilterOp::ne: return !eq(0);
    case FilterOp::in:
      for (size_t j = 0; j < n.values.size(); ++j)
        if (eq(j)) return true;
      return false;
    case FilterOp::not_in:
      for (size_t j = 0; j < n.values.size(); ++j)
        if (eq(j)) return false;
      return true;
    case FilterOp::lt: {
      const int c = cmp(0);
      return c != -2 && c < 0;
    }
    case FilterOp::le: {
      const int c = cmp(0);
      return c != -2 && c <= 0;
    }
    case FilterOp::gt: {
      const int c = cmp(0);
      return c != -2 && c > 0;
    }
    case FilterOp::ge: {
      const int c = cmp(0);
      return c != -2 && c >= 0;
    }
    case FilterOp::between: {
      const int a = cmp(0), b = cmp(1);
      return a != -2 && b != -2 && a >= 0 && b <= 0;
    }
    default: return false;
  }
}

bool FilterTest::test(uint32_t i, uint64_t slot, const Record* rec) const {
  const Node& n = nodes_[i];
  switch (n.kind) {
    case NodeKind::tags:
      if (n.op == FilterOp::any) {
        for (uint32_t t : n.ids)
          if (has_tag(rec, t)) return true;
        return false;
      }
      if (n.unknown) return false;
      for (uint32_t t : n.ids)
        if (!has_tag(rec, t)) return false;
      return true;
    case NodeKind::ns:
      if (!rec || !rec->ns) return false;
      return std::binary_search(n.ids.begin(), n.ids.end(), rec->ns);
    case NodeKind::attribute: return attribute(n, rec);
    case NodeKind::ids:
    case NodeKind::keys: return n.id_set.count(s_.slot_ids[slot]) > 0;
    case NodeKind::time: return s_.times[slot] >= n.lo && s_.times[slot] <= n.hi;
    case NodeKind::importance: return s_.importance[slot] >= n.lo && s_.importance[slot] <= n.hi;
    case NodeKind::all_of:
      for (uint32_t c : n.children)
        if (!test(c, slot, rec)) return false;
      return true;
    case NodeKind::any_of:
      for (uint32_t c : n.children)
        if (test(c, slot, rec)) return true;
      return false;
    case NodeKind::negate: return n.children.empty() || !test(n.children[0], slot, rec);
  }
  return false;
}

namespace {

uint64_t size_of(const Roaring* r) { return r ? r->cardinality() : 0; }

uint64_t bound(const Filter& f, uint32_t i, const FilterScope& s) {
  const FilterNode& n = f.nodes()[i];
  const uint64_t all = s.slots;
  switch (n.kind) {
    case NodeKind::tags: {
      if (n.op == FilterOp::all && n.strs.empty()) return all;
      uint64_t sum = 0, least = all;
      for (const auto& t : n.strs) {
        const uint32_t id = s.pool->find(t);
        const uint64_t c = id ? size_of(s.postings->tag(id)) : 0;
        sum += c;
        least = std::min(least, c);
      }
      if (n.op == FilterOp::any || n.strs.size() < 2 || least == 0)
        return std::min(all, n.op == FilterOp::any ? sum : least);
      // ALL of several tags: the intersection's exact size (its sets are
      // at hand; the smallest bounds the work), where the smallest set
      // alone would let a post-filter be tried and fail.
      std::vector<const Roaring*> sets;
      for (const auto& t : n.strs) sets.push_back(s.postings->tag(s.pool->find(t)));
      std::sort(sets.begin(), sets.end(), [](auto* a, auto* b) { return a->cardinality() < b->cardinality(); });
      if (sets.size() == 2) return sets[0]->and_cardinality(*sets[1]);
      Roaring x = *sets[0] & *sets[1];
      for (size_t j = 2; j < sets.size() && !x.isEmpty(); ++j) x &= *sets[j];
      return x.cardinality();
    }
    case NodeKind::ns: {
      std::vector<uint32_t> parts;
      for (const auto& p : n.strs) {
        const uint32_t id = s.pool->find(p);
        if (!id) return 0;
        parts.push_back(id);
      }
      if (n.op == FilterOp::ns_eq) {
        const uint32_t id = s.namespaces->find(parts);
        return id ? size_of(s.postings->ns(id)) : 0;
      }
      if (parts.empty()) return s.postings->any_ns().cardinality();
      uint64_t sum = 0;
      for (uint32_t id : s.namespaces->under(parts)) sum += size_of(s.postings->ns(id));
      return std::min(all, sum);
    }
    case NodeKind::attribute: {
      const uint32_t name = s.pool->find(n.name);
      if (!name) return 0;
      if ((n.op == FilterOp::eq || n.op == FilterOp::in) &&
          std::all_of(n.values.begin(), n.values.end(), [](const ValueIn& v) { return v.type == ValueType::str; })) {
        uint64_t sum = 0;
        for (const auto& v : n.values)
          if (const uint32_t id = s.pool->find(v.s)) sum += size_of(s.postings->text(name, id));
        return std::min(all, sum);
      }
      // Numbers: counted in the ordered index (up to the slots).
      const bool numbers = !n.values.empty() && std::all_of(n.values.begin(), n.values.end(), [](const ValueIn& v) {
        return v.type == ValueType::i64 || v.type == ValueType::f64;
      });
      if (numbers) {
        const auto& v = n.values;
        const SlotPostings& p = *s.postings;
        switch (n.op) {
          case FilterOp::eq: return p.numeric_count(name, &v[0], true, &v[0], true, all);
          case FilterOp::in: {
            uint64_t sum = 0;
            for (const auto& x : v) sum += p.numeric_count(name, &x, true, &x, true, all);
            return std::min(all, sum);
          }
          case FilterOp::lt: return p.numeric_count(name, nullptr, false, &v[0], false, all);
          case FilterOp::le: return p.numeric_count(name, nullptr, false, &v[0], true, all);
          case FilterOp::gt: return p.numeric_count(name, &v[0], false, nullptr, false, all);
          case FilterOp::ge: return p.numeric_count(name, &v[0], true, nullptr, false, all);
          case FilterOp::between: return p.numeric_count(name, &v[0], true, &v[1], true, all);
          default: break;
        }
      }
      return size_of(s.postings->has(name));
    }
    case NodeKind::ids: return std::min<uint64_t>(all, n.ids.size());
    case NodeKind::keys: return std::min<uint64_t>(all, n.strs.size());
    case NodeKind::all_of: {
      uint64_t least = all;
      for (uint32_t c : n.children) least = std::min(least, bound(f, c, s));
      return least;
    }
    case NodeKind::any_of: {
      uint64_t sum = 0;
      for (uint32_t c : n.children) sum += bound(f, c, s);
      return std::min(all, sum);
    }
    default: return all;  // time, importance, NOT: no cheap bound
  }
}

}  // namespace

uint64_t estimate_matches(const Filter& f, const FilterScope& scope) { return bound(f, f.root(), scope); }

}  // namespace mnemo
