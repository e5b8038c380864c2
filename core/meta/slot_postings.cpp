#include "slot_postings.h"

#include <algorithm>

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
      case ValueType::i64:
        numbers_[name].ints.emplace(v.i, slot);
        numbers_[name].stale = true;
        break;
      case ValueType::f64:
        numbers_[name].reals.emplace(v.d, slot);
        numbers_[name].stale = true;
        break;
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
      case ValueType::i64:
        numbers_[name].ints.erase({v.i, slot});
        numbers_[name].stale = true;
        break;
      case ValueType::f64:
        numbers_[name].reals.erase({v.d, slot});
        numbers_[name].stale = true;
        break;
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

// The order of a stored number against a bound (order_numbers).
template <class T>
int order_to(T v, const ValueIn& b) {
  if constexpr (std::is_same_v<T, int64_t>)
    return order_numbers(true, v, 0.0, b.type == ValueType::i64, b.i, b.d);
  else
    return order_numbers(false, 0, v, b.type == ValueType::i64, b.i, b.d);
}

// The first index of the sorted `v` whose entry `below` says false for
// (below is true for a prefix: values only grow).
template <class T, class Below>
size_t partition_at(const std::vector<std::pair<T, uint32_t>>& v, Below below) {
  size_t lo = 0, hi = v.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (below(v[mid]))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// The entries [first, last) of the sorted `v` inside the range, by the
// exact order (no bound is rounded).
template <class T>
std::pair<size_t, size_t> range_of(const std::vector<std::pair<T, uint32_t>>& v, const ValueIn* lo, bool lo_incl,
                                   const ValueIn* hi, bool hi_incl) {
  const size_t a = !lo ? 0 : partition_at(v, [&](const std::pair<T, uint32_t>& e) {
    const int c = order_to(e.first, *lo);
    return c < 0 || (c == 0 && !lo_incl);
  });
  const size_t b = !hi ? v.size() : partition_at(v, [&](const std::pair<T, uint32_t>& e) {
    const int c = order_to(e.first, *hi);
    return c < 0 || (c == 0 && hi_incl);
  });
  return {a, std::max(a, b)};
}

}  // namespace

const SlotPostings::Numbers& SlotPostings::flat(const Numbers& n) const {
  std::lock_guard<std::mutex> g(flat_mu_);
  if (n.stale) {
    n.flat_ints.assign(n.ints.begin(), n.ints.end());
    n.flat_reals.assign(n.reals.begin(), n.reals.end());
    n.stale = false;
  }
  return n;
}

template <class Fn>
void SlotPostings::numeric_walk(uint32_t name, const ValueIn* lo, bool lo_incl, const ValueIn* hi, bool hi_incl,
                                Fn fn) const {
  auto it = numbers_.find(name);
  if (it == numbers_.end()) return;
  const Numbers& n = flat(it->second);
  const auto [ia, ib] = range_of(n.flat_ints, lo, lo_incl, hi, hi_incl);
  const auto [ra, rb] = range_of(n.flat_reals, lo, lo_incl, hi, hi_incl);
  fn(n.flat_ints.data() + ia, ib - ia);
  fn(n.flat_reals.data() + ra, rb - ra);
}

Roaring SlotPostings::numeric(uint32_t name, const ValueIn* lo, bool lo_incl, const ValueIn* hi, bool hi_incl) const {
  std::vector<uint32_t> slots;
  numeric_walk(name, lo, lo_incl, hi, hi_incl, [&](const auto* e, size_t count) {
    for (size_t i = 0; i < count; ++i) slots.push_back(e[i].second);
  });
  // Ascending slots go into the set a container at a time.
  std::sort(slots.begin(), slots.end());
  return Roaring(slots.size(), slots.data());
}

uint64_t SlotPostings::numeric_count(uint32_t name, const ValueIn* lo, bool lo_incl, const ValueIn* hi, bool hi_incl,
                                     uint64_t cap) const {
  uint64_t n = 0;
  numeric_walk(name, lo, lo_incl, hi, hi_incl, [&](const auto*, size_t count) { n += count; });
  return std::min(n, cap);
}

}  // namespace mnemo
