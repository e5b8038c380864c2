// The dense plan of filtered batches on the GPU (filter_dense.cu): queries
// whose filters are set algebra over tag posting lists (tag_any / tag_all
// under AND, OR and NOT) and match a large share of the store are searched
// together, in one pass of the long-row batch kernel over every row, each
// row's key masked by the query's own filter. The masks come from the tag
// lists as bitmaps (each distinct list once), combined word by word, so no
// slot is tested one query at a time. Reading each row once for up to 112
// queries replaces gathering a large share of the rows for each query.
#pragma once

#include <cstdint>
#include <vector>

#include "core/filter_program.h"
#include "device/exec_context.h"
#include "search/search_kernels.h"

namespace mnemo::cuda {

// Whether group g's program is set algebra over tag lists (push_true /
// push_false, tag_any, tag_all, all_of, any_of, negate).
bool dense_program(const FilterPrograms& F, uint32_t g);

// The field columns' posting lists on the device (the programs' tag lists).
struct DenseColumns {
  const uint64_t* list_at = nullptr;
  const uint32_t* lists = nullptr;
};

// Searches queries `which` (ascending indices into the call's nq queries q
// [nq x s.ld] with norms qn, on the device) with their groups' programs,
// writing their rows of ids / scores [nq x k] (device). The caller has
// checked dense_mask_usable for them. Work waits for earlier work on st
// (the context's buffers are reused). Returns the dense pass's queries.
void dense_filter_search(ExecContext& ctx, cudaStream_t st, const StoreRef& s, const FilterPrograms& F,
                         const DenseColumns& cols, const std::vector<uint32_t>& which, const float* q, const float* qn,
                         uint64_t k, uint64_t workspace, int sm_count, uint64_t* ids, float* scores);

}  // namespace mnemo::cuda
