// A filter compiled against one store's tables, to test single memories
// (the post-filter of broad filters: the best results of an unfiltered
// search are tested one by one) and to estimate from the postings' sizes
// how many memories a filter matches before evaluating it (the planner).
#pragma once

#include <cstdint>
#include <unordered_set>
#include <vector>

#include "filter.h"

namespace mnemo {

class FilterTest {
 public:
  FilterTest(const Filter& f, const FilterScope& scope);
  // Whether the memory at `slot` (live) passes: `rec` its record or null.
  bool passes(uint64_t slot, const Record* rec) const { return test(root_, slot, rec); }

 private:
  struct Node {
    NodeKind kind;
    FilterOp op;
    uint32_t name = 0;                    // attribute name (0: never interned, nothing has it)
    std::vector<uint32_t> ids;            // tags or namespaces (pool / table ids; 0: unknown)
    bool unknown = false;                 // a string the store never held (ANY skips it, ALL fails)
    std::vector<ValueIn> values;          // attribute operands, strings kept as text
    std::vector<uint32_t> text;           // their pool ids (0: never interned)
    std::unordered_set<uint64_t> id_set;  // ids or keys' ids
    double lo = 0, hi = 0;
    std::vector<uint32_t> children;
  };
  bool test(uint32_t n, uint64_t slot, const Record* rec) const;
  bool attribute(const Node& n, const Record* rec) const;

  FilterScope s_;  // a copy: the scope given may be a temporary
  std::vector<Node> nodes_;
  uint32_t root_;
};

// An upper bound on the slots the filter matches, from the postings'
// sizes (never more than the slots).
uint64_t estimate_matches(const Filter& f, const FilterScope& scope);

}  // namespace mnemo
