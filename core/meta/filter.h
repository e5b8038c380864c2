// A filter expression (mnemo_filter): a tree of AND / OR / NOT over
// predicates on what memories hold, built node by node, and its exact
// evaluation over one store's (or shard's) slots from their postings.
#pragma once

#include <cstdint>
#include <roaring/roaring.hh>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/id_map.h"
#include "fields.h"
#include "namespaces.h"
#include "slot_postings.h"
#include "string_pool.h"

namespace mnemo {

// The operators of mnemo.h (MNEMO_OP_*), same numbers.
enum class FilterOp : int32_t {
  eq = 1,
  ne = 2,
  lt = 3,
  le = 4,
  gt = 5,
  ge = 6,
  in = 7,
  not_in = 8,
  between = 9,
  exists = 10,
  any = 11,
  all = 12,
  ns_eq = 13,
  ns_under = 14
};

enum class NodeKind : uint8_t { ns, tags, attribute, keys, ids, time, importance, all_of, any_of, negate };

struct FilterNode {
  NodeKind kind = NodeKind::all_of;
  FilterOp op = FilterOp::eq;
  std::string name;                // attribute
  std::vector<std::string> strs;   // namespace parts, tags, keys
  std::vector<ValueIn> values;     // attribute operands
  std::vector<uint64_t> ids;       // ids
  double lo = 0, hi = 0;           // time, importance
  std::vector<uint32_t> children;  // all_of, any_of, negate
};

class Filter {
 public:
  // Each returns the new node's number; throws invalid_argument (naming
  // the argument) for a bad operator, operand count, value or child.
  uint32_t add(FilterNode n);
  void set_root(uint32_t node);
  // Throws invalid_argument when the filter has no node.
  uint32_t root() const;
  const std::vector<FilterNode>& nodes() const { return nodes_; }

 private:
  std::vector<FilterNode> nodes_;
  std::vector<uint32_t> depth_;  // evaluation recurses: bounded
  int64_t root_ = -1;
};

// What a filter reads of one store or shard (under its read lock).
struct FilterScope {
  const StringPool* pool = nullptr;
  const NamespaceTable* namespaces = nullptr;
  const SlotPostings* postings = nullptr;
  uint64_t slots = 0;
  const uint64_t* slot_ids = nullptr;  // kNoId: a removed slot
  const double* times = nullptr;
  const float* importance = nullptr;
  const IdMap* slot_of = nullptr;
  const std::unordered_map<std::string, uint64_t>* key_ids = nullptr;  // the whole store's keys
};

// The slots the filter matches; removed slots may be among them (every
// reader skips those).
Roaring evaluate(const Filter& f, const FilterScope& scope);

// The NamespaceTable ids (ascending) a namespace node matches; false, with
// none, when one of its parts was never interned (it matches nothing).
bool namespace_ids(const FilterNode& n, const FilterScope& scope, std::vector<uint32_t>& ids);
// The memory ids (ascending, unique) an ids node names, or that a keys
// node's keys are held by.
std::vector<uint64_t> named_ids(const FilterNode& n, const FilterScope& scope);

}  // namespace mnemo
