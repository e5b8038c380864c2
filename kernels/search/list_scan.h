// The scan of per-query slot lists already on the device, shared by a
// filter's selective plan (lists built on the host, list_search.cu) and
// filter programs evaluated on the device (program_search.cu).
#pragma once

#include <cstdint>

#include "core/backend.h"
#include "device/device_store.h"
#include "device/exec_context.h"
#include "search/search_kernels.h"

namespace mnemo::cuda {

// The store as the scans read it for search `a` (bias, metric, activation).
StoreRef list_store_ref(const DeviceStore& ds, const StoreView& v, const SearchArgs& a);

// A list search's host queries on the device as the scans read them (rows
// of ld, zero padded, and their norms) and room for its nq x k results, in
// ctx's io buffer; finish_list_io copies the results to the caller's host
// buffers and waits for them.
struct ListIo {
  float* q;
  float* qn;
  uint64_t* ids;
  float* scores;
};
ListIo stage_list_io(ExecContext& ctx, cudaStream_t st, const float* queries, uint64_t nq, uint64_t dim, uint64_t ld,
                     uint64_t k);
void finish_list_io(ExecContext& ctx, cudaStream_t st, const ListIo& io, uint64_t nq, uint64_t k, uint64_t* ids,
                    float* scores);

// Query q (row q of q [nq x ld] f32, zero padded, norms qn) reads the rows
// slots[bounds[q].x .. + bounds[q].y) and gets its k best as user ids and
// scores in ids / scores [nq x k] (device, padded with ~0 and NaN).
// longest: the most slots of one list; min(k, longest) must be at most
// kSmallKMax. Candidate lists live in ctx's scratch; queued on st.
void launch_list_scan(ExecContext& ctx, cudaStream_t st, const StoreRef& s, const float* q, const float* qn,
                      uint64_t nq, uint64_t k, const uint32_t* slots, const uint2* bounds, uint32_t longest,
                      int sm_count, uint64_t workspace, uint64_t* ids, float* scores);

}  // namespace mnemo::cuda
