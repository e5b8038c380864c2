// What a backend that evaluates filters itself reads (filter_program.h),
// built from one store's records and postings: its field columns, and each
// group's program and driver, compiled by the rules FilterTest applies on
// the host (filter_test.cpp), so both give the same matches.
#pragma once

#include <memory>
#include <vector>

#include "core/filter_program.h"
#include "core/tensor.h"
#include "filter.h"

namespace mnemo {

// The posting lists' numbers and extents in the columns a backend holds.
struct ColumnDirectory {
  uint64_t version = 0;  // 0: none built
  SlotPostings::ListNumbers numbers;
  std::vector<uint64_t> list_at;
};

// The columns of a store's live slots (slot_ids kNoId: removed) and their
// directory.
FieldColumns build_columns(const std::vector<std::unique_ptr<Record>>& recs, const uint64_t* slot_ids, uint64_t slots,
                           const SlotPostings& postings, ColumnDirectory& dir);

// Appends one group's program (the conjunction of `where` and `each`,
// either of which may be null) and driver. False, with `out` unchanged,
// when the program would need more than kProgramStack of stack or
// children: such filters are evaluated on the host.
bool append_program(const Filter* where, const Filter* each, const FilterScope& scope, const ColumnDirectory& dir,
                    FilterPrograms& out);

}  // namespace mnemo
