// Postings of one store's (or shard's) slots, derived from its records:
// per tag, per namespace and per attribute name (presence) a sorted slot
// set (CRoaring); per string or bool attribute value another; per numeric
// attribute an ordered index of (value, slot). The sizes of the sets are the
// filter planner's cardinality estimate. Slots renumbered by a compaction or
// an index layout make the postings stale: the store then rebuilds them
// from the records before the next filtered read.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <roaring/roaring.hh>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fields.h"

namespace mnemo {

class SlotPostings {
 public:
  void add(uint32_t slot, const Record& r);
  void remove(uint32_t slot, const Record& r);
  void clear();
  // nullptr when nothing holds it.
  const Roaring* tag(uint32_t tag) const { return find(tags_, tag); }
  const Roaring* ns(uint32_t ns) const { return find(ns_, ns); }
  // Slots holding the attribute: with any value, or of one kind.
  enum Kind : uint32_t { any = 0, number = 1, boolean = 2, text_kind = 3 };
  const Roaring* has(uint32_t name, Kind kind = any) const { return find(has_, key(name, kind)); }
  // String values (pool id) and bools (0/1) of an attribute.
  const Roaring* text(uint32_t name, uint32_t s) const { return find(text_, key(name, s)); }
  const Roaring* flag(uint32_t name, bool b) const { return find(flags_, key(name, b ? 1 : 0)); }
  // Slots whose numeric value v of `name` lies in the range: lo/hi are the
  // bounds (ValueIn of type i64 or f64, or none for open), inclusive or not.
  Roaring numeric(uint32_t name, const ValueIn* lo, bool lo_incl, const ValueIn* hi, bool hi_incl) const;
  // How many slots numeric() would return, at most `cap` (the planner's
  // estimate; found by two binary searches).
  uint64_t numeric_count(uint32_t name, const ValueIn* lo, bool lo_incl, const ValueIn* hi, bool hi_incl,
                         uint64_t cap) const;
  // Slots with any namespace / with fields at all.
  const Roaring& any_ns() const { return any_ns_; }
  // Distinct namespaces in use and their slot counts.
  const std::unordered_map<uint32_t, Roaring>& namespaces() const { return ns_; }
  // The string values (pool ids) an attribute holds.
  std::vector<uint32_t> text_values(uint32_t name) const;
  // Changes with every add, remove and clear (never 0).
  uint64_t version() const { return version_; }
  // Every non-empty set end to end (slots ascending within each) into
  // at / slots, and each set's number by the key that finds it here (tag
  // and namespace ids; has_key, value_key): what a backend evaluating
  // filters reads its drivers from.
  struct ListNumbers {
    std::unordered_map<uint64_t, uint32_t> tag, ns, has, text, flag;
  };
  void flatten(ListNumbers& lists, std::vector<uint64_t>& at, std::vector<uint32_t>& slots) const;
  static uint64_t has_key(uint32_t name, Kind kind) { return key(name, kind); }
  static uint64_t value_key(uint32_t name, uint32_t v) { return key(name, v); }

 private:
  static uint64_t key(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }
  // Calls fn(entries, count) for each run of (value, slot) entries
  // numeric() returns (the int64 values', then the doubles').
  template <class Fn>
  void numeric_walk(uint32_t name, const ValueIn* lo, bool lo_incl, const ValueIn* hi, bool hi_incl, Fn fn) const;
  template <class K>
  static const Roaring* find(const std::unordered_map<K, Roaring>& m, K k) {
    auto it = m.find(k);
    return it == m.end() || it->second.isEmpty() ? nullptr : &it->second;
  }
  // Per numeric attribute: ordered sets that follow every write, and flat
  // copies of them that range reads walk (contiguous, no node per entry),
  // made again by the first read after a change (under flat_mu_: readers
  // share the store's lock; writers hold it alone).
  struct Numbers {
    std::set<std::pair<int64_t, uint32_t>> ints;
    std::set<std::pair<double, uint32_t>> reals;
    mutable std::vector<std::pair<int64_t, uint32_t>> flat_ints;
    mutable std::vector<std::pair<double, uint32_t>> flat_reals;
    mutable bool stale = true;
  };
  // The flat copies of `n`, made current.
  const Numbers& flat(const Numbers& n) const;
  mutable std::mutex flat_mu_;
  std::unordered_map<uint32_t, Roaring> tags_, ns_;
  std::unordered_map<uint64_t, Roaring> has_, text_, flags_;
  std::unordered_map<uint32_t, Numbers> numbers_;
  Roaring any_ns_;
  uint64_t version_ = 1;
};

// Exact comparison of two numbers that may be int64 or double (-1, 0, 1).
int compare_numbers(const ValueIn& a, const ValueIn& b);

}  // namespace mnemo
