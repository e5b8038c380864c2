// Query batches over long rows (fused_wide_topk.cu), FAST, and EXACT over
// f32 rows: a tensor-core GEMM with the top-k selection in its epilogue,
// for rows too long for the short-row kernel's queries-in-registers layout.
// Serves lists of at most 32 candidates on sm_90 and later.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "search_kernels.h"

namespace mnemo::cuda {

// Whether the kernel serves lists of kc over `slots` rows of ld elements of
// t with queries at `queries` (device memory, rows of ld elements of t) on
// the current device, in FAST mode or (f32 rows only) EXACT mode
// (MNEMO_FUSED_WIDE=0 turns it off).
bool fused_wide_usable(uint32_t slots, uint32_t kc, DType t, uint64_t ld, const void* queries, bool fast);
// Chunks of the store per query tile (to size cand before the launch).
unsigned fused_wide_chunks(uint32_t slots, uint32_t nq, unsigned sm_count);
// Bytes of the sample buffer a launch over nq queries and `chunks` chunks
// needs.
size_t fused_wide_sample_bytes(uint32_t nq, unsigned chunks);
// As launch_fused_short_topk: queries [nq x ld] in the storage dtype,
// qnorms [nq], terms from launch_slot_terms with room for one entry past
// the last slot; writes per-chunk lists cand[q][c][kc] (c below the
// returned count), each sorted best first with approximate keys;
// thresholds: [nq] words the chunks share their k-th keys through;
// sample: fused_wide_sample_bytes(nq, chunks) of scratch. EXACT (fast =
// false) chooses the candidates by split-TF32 keys (f32 rows).
unsigned launch_fused_wide_topk(const StoreRef& s, const void* queries, const float* qnorms, const void* terms,
                                uint32_t nq, uint32_t kc, unsigned chunks, Cand* cand, unsigned* thresholds,
                                float* sample, bool fast, cudaStream_t st);

}  // namespace mnemo::cuda
