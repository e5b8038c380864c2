// Query batches in FAST mode over short rows (fused_short_topk.cu): a
// tensor-core GEMM with the top-k selection in its epilogue, the queries
// resident in registers. Serves lists of at most 32 candidates over rows of
// at most 256 bytes of f16/bf16 or 512 bytes of f32, on sm_90 and later.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "search/search_kernels.h"

namespace mnemo::cuda {

// Whether the kernel serves lists of kc over a store of `slots` rows of ld
// elements of t on the current device (MNEMO_FUSED_SHORT=0 turns it off).
bool fused_short_usable(uint32_t slots, uint32_t kc, DType t, uint64_t ld);
// Chunks of the store per query tile, and lists per chunk and query (to
// size cand before the launch: chunks * lists_per_chunk lists a query).
unsigned fused_short_chunks(uint32_t slots, uint32_t nq, DType t, uint64_t ld, unsigned sm_count);
uint32_t fused_short_lists_per_chunk(uint32_t nq, DType t);
// As launch_fused_gemm_topk: queries [nq x ld] in the storage dtype (f32
// for f32 storage), for cosine divided by their norms (launch_f32_to_unit,
// so that a key is one FMA from its dot product); terms from
// launch_slot_terms in a buffer with room for one entry past the last slot;
// writes per-chunk lists cand[q][c][kc] (c below the returned count, at most
// chunks * fused_short_lists_per_chunk), each sorted best first with approximate keys. thresholds: [nq]
// device words the chunks share their k-th keys through (zeroed here first).
// sample: fused_short_sample_bytes(nq, chunks, t, ld) of scratch for the
// sampling pass that sets the thresholds first (nullptr: no pass), whose
// blocks fill the device's sm_count SMs once.
unsigned launch_fused_short_topk(const StoreRef& s, const void* queries, const void* terms, uint32_t nq, uint32_t kc,
                                 unsigned chunks, Cand* cand, unsigned* thresholds, float* sample, unsigned sm_count,
                                 cudaStream_t st);
// Bytes of the sampling pass's keys for nq queries and `chunks` chunks.
size_t fused_short_sample_bytes(uint32_t nq, unsigned chunks, DType t, uint64_t ld);

}  // namespace mnemo::cuda
