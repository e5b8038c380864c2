#include "slot_postings.h"

#include <cmath>

#include "number_order.h"

namespace mnemo {

namespace {

SlotPostings::Kind kind_of(ValueType t) {
  switch (t) {
    case ValueType::boolean: return SlotPostings::boolean;
    case ValueType::str: return SlotPostings::text_kind;
    default: return SlotPostings::number;
  }
}

}  // namespace

void SlotPostings::add(uint32_t slot, const Record& r) {
  ++version_;
  for (uint32_t t : r.tags) tags_[t].add(slot);
  if (r.ns) {
    ns_[r.ns].add(slot);
    any_ns_.add(slot);
  }
  for (const auto& [name, v] : r.attrs) {
    has_[key(name, any)].add(slot);
    has_[key(name, kind_of(v.type))].add(slot);
    switch (v.type) {
      case ValueType::i64: numbers_[name].ints.emplace(v.i, slot); break;
      case ValueType::f64: numbers_[name].reals.emplace(v.d, slot); break;
      case ValueType::boolean: flags_[key(name, v.i ? 1 : 0)].add(slot); break;
      case ValueType::str: text_[key(name, v.s)].add(slot); break;
      case ValueType::none: break;
    }
  }
}

void SlotPostings::remove(uint32_t slot, const Record& r) {
  ++version_;
  for (uint32_t t : r.tags) tags_[t].remove(slot);
  if (r.ns) {
    ns_[r.ns].remove(slot);
    any_ns_.remove(slot);
  }
  for (const auto& [name, v] : r.attrs) {
    has_[key(name, any)].remove(slot);
    has_[key(name, kind_of(v.type))].remove(slot);
    switch (v.type) {
      case ValueType::i64: numbers_[name].ints.erase({v.i, slot}); break;
      case ValueType::f64: numbers_[name].reals.erase({v.d, slot}); break;
      case ValueType::boolean: flags_[key(name, v.i ? 1 : 0)].remove(slot); break;
      case ValueType::str: text_[key(name, v.s)].remove(slot); break;
      case ValueType::none: break;
    }
  }
}

void SlotPostings::clear() {
  ++version_;
  tags_.clear();
  ns_.clear();
  has_.clear();
  text_.clear();
  flags_.clear();
  numbers_.clear();
  any_ns_ = Roaring();
}

void SlotPostings::flatten(ListNumbers& lists, std::vector<uint64_t>& at, std::vector<uint32_t>& slots) const {
  lists = ListNumbers{};
  at.assign(1, 0);
  uint64_t total = 0;
  auto count = [&](const auto& m) {
    for (const auto& [k, set] : m) total += set.cardinality();
  };
  count(tags_), count(ns_), count(has_), count(text_), count(flags_);
  slots.resize(total);
  auto put = [&](std::unordered_map<uint64_t, uint32_t>& numbers, const auto& m) {
    for (const auto& [k, set] : m) {
      if (set.isEmpty()) continue;
      numbers.emplace(k, static_cast<uint32_t>(at.size() - 1));
      set.toUint32Array(slots.data() + at.back());
      at.push_back(at.back() + set.cardinality());
    }
  };
  put(lists.tag, tags_);
  put(lists.ns, ns_);
  put(lists.has, has_);
  put(lists.text, text_);
  put(lists.flag, flags_);
  slots.resize(at.back());
}

std::vector<uint32_t> SlotPostings::text_values(uint32_t name) const {
  std::vector<uint32_t> out;
  for (const auto& [k, set] : text_)
    if (static_cast<uint32_t>(k >> 32) == name && !set.isEmpty()) out.push_back(static_cast<uint32_t>(k));
  return out;
}

int compare_numbers(const ValueIn& a, const ValueIn& b) {
  return order_numbers(a.type == ValueType::i64, a.i, a.d, b.type == ValueType::i64, b.i, b.d);
}

namespace {

template <class T>
bool in_range(T v, const ValueIn* lo, bool lo_incl, const ValueIn* hi, bool hi_incl) {
  ValueIn x;
  if constexpr (std::is_same_v<T, int64_t>) {
    x.type = ValueType::i64;
    x.i = v;
  } else {
    x.type = ValueType::f64;
    x.d = v;
  }
  if (lo) {
    const int c = compare_numbers(x, *lo);
    if (c < 0 || (c == 0 && !lo_incl)) return false;
  }
  if (hi) {
    const int c = compare_numbers(x, *hi);
    if (c > 0 || (c == 0 && !hi_incl)) return false;
  }
  return true;
}

// The first element of `s` whose value may be >= lo: started one step
// below the rounded bound, then walked up by the exact test.
template <class T>
auto first_from(const std::set<std::pair<T, uint32_t>>& s, const ValueIn* lo) {
  if (!lo) return s.begin();
  const long double b = lo->type == ValueType::i64 ? static_cast<long double>(lo->i) : lo->d;
  T start;
  if constexpr (std::is_same_v<T, int64_t>) {
    if (b <= static_cast<long double>(INT64_MIN)) return s.begin();
    if (b > static_cast<long double>(INT64_MAX)) return s.end();
    start = static_cast<int64_t>(std::floor(b));
    if (start > INT64_MIN) --start;
  } else {
    start = std::nextafter(static_cast<double>(b), -INFINITY);
  }
  return s.lower_bound({start, 0});
}

}  // namespace

template <class Fn>
void SlotPostings::numeric_walk(uint32_t name, const ValueIn* lo, bool lo_incl, const ValueIn* hi, bool hi_incl,
                                Fn fn) const {
  auto it = numbers_.find(name);
  if (it == numbers_.end()) return;
  bool go = true;
  auto walk = [&](const auto& set) {
    for (auto e = first_from(set, lo); go && e != set.end(); ++e) {
      if (in_range(e->first, lo, lo_incl, hi, hi_incl)) {
        go = fn(e->second);
        continue;
      }
      // Below the lower bound (the start is one step early): go on;
      // past the upper bound: stop.
      if (hi) {
        ValueIn x;
        if constexpr (std::is_same_v<std::decay_t<decltype(e->first)>, int64_t>) {
          x.type = ValueType::i64;
          x.i = e->first;
        } else {
          x.type = ValueType::f64;
          x.d = e->first;
        }
        const int c = compare_numbers(x, *hi);
        if (c > 0 || (c == 0 && !hi_incl)) break;
      }
    }
  };
  walk(it->second.ints);
  if (go) walk(it->second.reals);
}

Roaring SlotPostings::numeric(uint32_t name, const ValueIn* lo, bool lo_incl, const ValueIn* hi, bool hi_incl) const {
  Roaring out;
  numeric_walk(name, lo, lo_incl, hi, hi_incl, [&](uint32_t slot) {
    out.add(slot);
    return true;
  });
  return out;
}

uint64_t SlotPostings::numeric_count(uint32_t name, const ValueIn* lo, bool lo_incl, const ValueIn* hi, bool hi_incl,
                                     uint64_t cap) const {
  uint64_t n = 0;
  numeric_walk(name, lo, lo_incl, hi, hi_incl, [&](uint32_t) { return ++n < cap; });
  return n;
}

}  // namespace mnemo
