// Filling and searching a store in batches, with progress on a terminal.
#pragma once

#include "common.h"
#include "formats.h"

namespace cli {

// Adds every row with id = row number.
void add_rows(mnemo_store* s, const FloatRows& m);
// ids/scores: [queries.rows x k]; returns the seconds spent in searches.
double search_rows(const mnemo_store* s, const FloatRows& queries, uint64_t k, uint64_t batch, AVec<uint64_t>& ids,
                   AVec<float>& scores);
void check_dim(const mnemo_store* s, const FloatRows& m, const std::string& what);

}  // namespace cli
