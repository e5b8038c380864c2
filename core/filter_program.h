// Filters for a backend that evaluates them where the store lives (a GPU):
// the store's fields as flat columns (uploaded once per change), and per
// group of queries a compiled program over them with its driver, a union of
// posting lists that holds every match. The backend tests each driver slot
// against the program and scans the rows that pass, so neither the matches
// nor the lists of slots cross to the host.
#pragma once

#include <cstdint>
#include <vector>

namespace mnemo {

// One attribute of one slot: bits by type (ValueType numbers): i64 and
// bool as the integer, f64 as its bits, str as the pool id.
struct ColumnAttr {
  uint32_t name = 0;
  uint32_t type = 0;
  uint64_t bits = 0;
};

// One store's fields as flat arrays. Slots at or past `slots` and removed
// slots hold nothing.
struct FieldColumns {
  uint64_t version = 0;  // the postings' version they were built at
  uint64_t slots = 0;
  std::vector<uint64_t> tag_at;   // [slots + 1]
  std::vector<uint32_t> tags;     // pool ids, ascending within a slot
  std::vector<uint32_t> ns;       // [slots] NamespaceTable id, 0: none
  std::vector<uint64_t> attr_at;  // [slots + 1]
  std::vector<ColumnAttr> attrs;  // ascending by name within a slot
  std::vector<uint64_t> list_at;  // [lists + 1]: the posting lists end to end
  std::vector<uint32_t> lists;    // slots, ascending within a list
};

// A program runs its nodes in order over a stack of booleans: leaves push
// their test, all_of / any_of pop `n` and push their conjunction or
// disjunction, negate flips the top. At most kProgramStack deep and
// kProgramStack children a node (deeper filters stay on the host).
constexpr uint32_t kProgramStack = 63;

enum class ProgOp : uint8_t {
  push_false,
  push_true,
  tag_any,        // u32[a, a+n): any of these tags
  tag_all,        // u32[a, a+n): all of them
  ns_in,          // u32[a, a+n): the namespace is one of these (ascending)
  attr_exists,    // name
  attr_eq,        // values[a]
  attr_ne,        // values[a]
  attr_in,        // values[a, a+n)
  attr_not_in,    // values[a, a+n)
  attr_order,     // numbers values[a, a+n) by cmp (FilterOp lt .. between)
  attr_text_in,   // a string value among u32[a, a+n) (ascending)
  ids_in,         // u64[a, a+n): the slot's id is one of these (ascending)
  time_in,        // lo <= time <= hi
  importance_in,  // lo <= importance <= hi
  all_of,
  any_of,
  negate
};

// An attribute operand: type (ValueType), bits as ColumnAttr's, and for a
// string the pool id (0: the store never held it).
struct ProgValue {
  uint32_t type = 0;
  uint32_t text = 0;
  uint64_t bits = 0;
};

struct ProgNode {
  ProgOp op = ProgOp::push_false;
  uint8_t cmp = 0;  // attr_order: FilterOp's number (lt 3, le 4, gt 5, ge 6, between 9)
  uint32_t name = 0;
  uint32_t a = 0, n = 0;  // operands, or children for all_of / any_of
  // tag_any / tag_all: operand j's posting list is leaf_lists[a + j]
  // (kNoList: the store has none), so a backend may evaluate the node over
  // whole sets of slots (bitmaps) instead of slot by slot.
  uint32_t pad = 0;
  double lo = 0, hi = 0;
};

constexpr uint32_t kNoList = 0xffffffffu;

// A driver part: a posting list of the columns, the program's own slots
// (u32[a, a+n), ascending), or every slot.
struct DriverPart {
  enum Kind : uint32_t { posting = 0, own = 1, all = 2 };
  uint32_t kind = all;
  uint32_t list = 0;  // posting: its number in the columns
  uint32_t a = 0, n = 0;
  uint64_t size = 0;  // slots it holds
};

// The programs of a search's groups end to end; query q runs group_of[q].
struct FilterPrograms {
  std::vector<ProgNode> nodes;
  std::vector<uint32_t> node_at;  // [groups + 1]
  std::vector<uint32_t> u32;
  std::vector<uint32_t> leaf_lists;  // parallel to u32 (kNoList where not a tag operand)
  std::vector<uint64_t> u64;
  std::vector<ProgValue> values;
  std::vector<DriverPart> parts;
  std::vector<uint32_t> part_at;   // [groups + 1]
  std::vector<uint32_t> group_of;  // [nq]
  uint64_t groups() const { return node_at.empty() ? 0 : node_at.size() - 1; }
};

}  // namespace mnemo
