// Query batches over long rows (fused_wide_topk.cu), FAST, and EXACT over
// f32 rows: a tensor-core GEMM with the top-k selection in its epilogue,
// for rows too long for the short-row kernel's queries-in-registers layout.
// Serves lists of at most 32 candidates on sm_90 and later.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "search/search_kernels.h"

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
// mask (or null): each query's own filter (QueryMask), its column q of
// the launch's nq.
unsigned launch_fused_wide_topk(const StoreRef& s, const void* queries, const float* qnorms, const void* terms,
                                uint32_t nq, uint32_t kc, unsigned chunks, Cand* cand, unsigned* thresholds,
                                float* sample, bool fast, cudaStream_t st, const QueryMask* mask = nullptr);

// A filter per query as bits over the slots: slot x passes query q's
// filter when bit x % 32 of words[(x / 32) * stride + q] is set (a word
// row per 32 slots, the queries side by side, so a tile's words for its
// queries lie together).
struct QueryMask {
  const uint32_t* words = nullptr;
  uint64_t stride = 0;
};

// Long lists (kc > 32) over batches: the same kernel writes every key at or
// above a bound from the sampling pass (at least kc rows reach it) to out as
// keys and slots [nq][cap], counting them in count [nq] (which keeps growing
// past cap: then launch_fused_wide_dense writes all of that query's keys to
// a dense row, for an exact selection over the whole row). The kernel reads
// the store once per tile of kWideTileQueries queries.
constexpr uint32_t kWideTileQueries = 112;
// Overflowed queries keep their dense rows in rounds (compact_select.h):
// the round from dense_lo holds those of overflow_rank dense_lo, ... in
// dense [dense_rows][slots].
struct WideCandidates {
  float* keys = nullptr;
  uint32_t* slots = nullptr;
  uint32_t* count = nullptr;
  uint32_t cap = 0;
  float* dense = nullptr;
  uint32_t dense_lo = 0, dense_rows = 0;
};
bool fused_wide_emit_usable(uint32_t slots, uint32_t nq, uint32_t kc, DType t, uint64_t ld, const void* queries,
                            bool fast);
// Candidates per query that out must hold (launches with `chunks` chunks).
uint32_t fused_wide_emit_cap(uint32_t slots, uint32_t kc, unsigned chunks);
// thresholds [nq] words and sample as for launch_fused_wide_topk; out.dense
// unused.
void launch_fused_wide_emit(const StoreRef& s, const void* queries, const float* qnorms, const void* terms, uint32_t nq,
                            uint32_t kc, unsigned chunks, unsigned* thresholds, float* sample,
                            const WideCandidates& out, bool fast, cudaStream_t st);
// The dense pass of one round (out.dense, dense_lo, dense_rows set), after
// launch_fused_wide_emit with the same arguments.
void launch_fused_wide_dense(const StoreRef& s, const void* queries, const float* qnorms, const void* terms,
                             uint32_t nq, uint32_t kc, unsigned chunks, unsigned* thresholds, const WideCandidates& out,
                             bool fast, cudaStream_t st);

}  // namespace mnemo::cuda
