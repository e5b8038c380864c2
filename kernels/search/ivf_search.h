// Search over an inverted-file index on the GPU (ivf_search.cu): the coarse
// step (the queries against the centroids, top nprobe) by the ordinary
// device search, then a small kernel that turns each query's lists into a
// span table, then the fused scan over the spans (one query per CTA row).
// Large k and normalised activation key every slot instead, the slots
// outside the query's lists and hot tier masked out. Everything is queued
// on the call's stream: no host synchronisation.
#pragma once

#include <cstdint>

#include "search/search_kernels.h"

namespace mnemo {
struct Activation;
}  // namespace mnemo

namespace mnemo::cuda {

struct ExecContext;

// The device side of an IvfProbe, with the call's buffers (from its io
// region, so they outlive the scratch phases of the coarse step).
struct IvfDevice {
  StoreRef centroids;                 // nlist slots, f32, rows of the store's ld
  const uint64_t* offsets = nullptr;  // [nlist + 1] on the device
  uint32_t nlist = 0, nprobe = 0, hot_begin = 0;
  // A bound on any query's candidate rows: nprobe times the largest list
  // plus the hot tier (at most the slots), from the host's offsets.
  uint32_t max_rows = 0;
  uint64_t* coarse_ids = nullptr;  // [nq][nprobe]: list numbers
  float* coarse_scores = nullptr;  // [nq][nprobe]
  uint2* spans = nullptr;          // [nq][nprobe + 1] when ivf_scans
  uint32_t* list_bits = nullptr;   // [nq][ivf_words(nlist)] when not
};

// Per-query list length of the span scan.
inline uint32_t ivf_list_length(uint32_t max_rows, uint64_t k) {
  return static_cast<uint32_t>(k < (max_rows > 1 ? max_rows : 1) ? k : (max_rows > 1 ? max_rows : 1));
}
// Whether the span scan serves the search (else every slot is keyed and
// masked): lists of at most kSmallKMax, no normalised activation.
inline bool ivf_scans(uint32_t max_rows, uint64_t k, bool normalized) {
  return !normalized && ivf_list_length(max_rows, k) <= static_cast<uint32_t>(kSmallKMax);
}
inline uint32_t ivf_words(uint32_t nlist) { return (nlist + 31) / 32; }

// The search of nq queries q [nq x ld] (norms qn) over the store s through
// the index: outputs as device_search's (d_ids / d_scores [nq x k_out],
// padded). normalized (or null): the normalised activation of the call.
void ivf_device_search(ExecContext& ctx, cudaStream_t st, const StoreRef& s, const IvfDevice& ivf,
                       const Activation* normalized, const float* q, const float* qn, uint64_t nq, uint64_t k,
                       uint64_t k_out, uint64_t workspace, int sm_count, uint64_t* d_ids, float* d_scores);

}  // namespace mnemo::cuda
