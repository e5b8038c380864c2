// Filling and searching a store in batches, with progress on a terminal.
#pragma once

#include <string>
#include <vector>

#include "common.h"
#include "formats.h"

namespace cli {

// Rows get their row numbers as ids; times and importance ([rows]) and
// fields ([rows], mnemo_memory_fields) optional.
void add_rows(mnemo_store* s, const FloatRows& m, const AVec<double>* times = nullptr,
              const AVec<float>* importance = nullptr, const mnemo_memory_fields* fields = nullptr);
// One finite number per line (a times or importance file).
std::vector<double> read_numbers(const std::string& path);
// ids/scores: [queries.rows x k]; returns the seconds spent in searches.
double search_rows(const mnemo_store* s, const FloatRows& queries, uint64_t k, uint64_t batch, AVec<uint64_t>& ids,
                   AVec<float>& scores, const mnemo_search_options* opts = nullptr);
void check_dim(const mnemo_store* s, const FloatRows& m, const std::string& what);

}  // namespace cli
