// Host-side launchers of the search kernels. All work on one stream and
// device pointers; "keys" are goodness values (similarity + bias, or
// -(distance - bias), or activation keys), NaN for excluded slots.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "device/cuda_util.cuh"
#include "select/warp_list.cuh"

namespace mnemo {
struct Activation;
}  // namespace mnemo

namespace mnemo::cuda {

enum class KeyMetric : int { dot = 0, cosine = 1, l2 = 2 };

// What every kernel needs to know about the resident store.
struct StoreRef {
  const void* vectors;
  DType dtype;
  uint64_t ld;  // padded row length in elements
  uint32_t dim;
  uint32_t slots;
  const uint64_t* ids;
  const float* norms;
  const float* biases;
  const uint64_t* allow;  // bitmap over slots or null
  bool apply_bias;
  KeyMetric metric;
  bool all_live;  // no tombstones or filter to check (similarity matrices)
  // Plain activation ranking (core/activation.h): key = w_rel * relevance +
  // w_rec * recency + w_imp * importance (+ bias). times and importance are
  // read only when act is set, so other searches move no extra bytes.
  const double* times = nullptr;
  const float* importance = nullptr;
  bool act = false;
  // Set when biases holds every slot's memory terms (launch_activation_terms):
  // the scans then read 4 bytes a slot and skip the recency's power.
  bool act_in_bias = false;
  float w_rel = 1.0f, w_rec = 0.0f, w_imp = 0.0f;
  double now = 0.0, inv_half_life = 0.0;
};

// Largest k kept in per-warp shared-memory lists.
constexpr int kSmallKMax = 256;

// The final step of a fused scan, done by its last block to finish: the
// merge of every block's list into each query's k best, written either as
// user ids and scores (out_ids set: rows of k_out columns, padded; L2 keys
// negated) or as sorted candidate lists [nq][k] (lists). ticket and groups
// ([4][k], k <= kSmallKMax: the maxima behind each query's bound) are zeroed
// device words (ExecContext::counters), left zero again. ticket = null: no
// merge, the caller merges cand itself.
struct ScanTail {
  unsigned* ticket = nullptr;
  unsigned* groups = nullptr;
  uint64_t* out_ids = nullptr;
  float* out_scores = nullptr;
  uint64_t k_out = 0;
  bool negate = false;
  Cand* lists = nullptr;
  bool prefetch = false;  // L2 prefetch of each warp's next rows
  // The bulk-copy scan's work counter: a zeroed device word, which the
  // last block (with a ticket) leaves zero again.
  unsigned* next_unit = nullptr;
  // Each query's starting bound (ordered bits of a key at or below its k-th
  // best, 0 = none; launch_scan_sample): rows below it are never offered.
  const unsigned* start = nullptr;
  // Shared-memory lists folded by insertion (the tail before the searched
  // ranks; MNEMO_SCAN_FOLD=1, for measuring).
  bool fold = false;
  // Zeroed device words, one per query of the pass, through which the
  // blocks share a bound while they scan (ordered bits of a full list's
  // worst key; the tensor-core scan), left zero again by the last block.
  unsigned* live_bound = nullptr;
  // Zeroed device words, one per query of the pass: with them each block
  // appends its list's entries to the query's region of the candidates
  // (not k entries at the block's place), and the last block reads only
  // those; it leaves them zero again. Needs a ticket.
  unsigned* fill = nullptr;
};

// A span table of an inverted-file search (ivf_search.cu): per query,
// `stride` entries {x, y}, y the rows through this span (inclusive prefix
// sums of the span lengths, so entry stride - 1 holds the query's total)
// and x the span's first slot minus its first row (modulo 2^32): row v of
// the query lies in the first span whose y exceeds v, at slot v + x.
// Empty spans are entries whose y equals the previous one.
struct ScanSpans {
  const uint2* spans = nullptr;  // [nq][stride]
  uint32_t stride = 0;
  // Tables of their own length per query (a filter's candidate lists):
  // query q's rows are slots[bounds[q].x .. + bounds[q].y) when slots is
  // given, else its spans are spans[bounds[q].x .. + bounds[q].y); null:
  // the stride layout.
  const uint2* bounds = nullptr;
  const uint32_t* slots = nullptr;
};

// Fused one-pass scan + top-k for up to 4 queries per pass: queries [nq x ld]
// f32 (zero padded), qnorms [nq]. Writes per-block lists cand[nq][blocks][k]
// with blocks from scan_blocks(), then the tail's merge when it has a
// ticket. Returns the number of blocks used.
unsigned launch_scan_topk(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t k,
                          Cand* cand, unsigned blocks, const ScanTail& tail, cudaStream_t st);
// The same scan over span tables: grid (blocks, nq), CTA row q scans query
// q's candidate rows (queries + q * ld, qnorms + q). cand holds
// [nq][blocks][k]; the tail (which must have a ticket) takes nq tickets at
// tail.ticket and nq * k group words at tail.groups, zeroed, and writes
// query q's answer at row q of out_ids / out_scores (or lists).
unsigned launch_scan_spans(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t k,
                           Cand* cand, unsigned blocks, const ScanTail& tail, const ScanSpans& sp, cudaStream_t st);
// Blocks the scan would use for this store (to size cand buffers).
unsigned scan_blocks(const StoreRef& s, unsigned sm_count);
// Lanes the scan gives one row of up to 32 16-byte vectors (the short-row
// instances: 4, 8, 16 or 32; several rows a warp below 32), 0 for longer
// rows (a warp a row, scan_topk_kernel's default instances).
// MNEMO_SCAN_SHORT = 0 sends every row to those (for measuring).
int scan_lanes(const StoreRef& s);

// A starting bound for the single-pass scans from a sample: the keys of
// `count` rows spread over the store (keys [nq][count] of scratch), then each
// query's kc-th largest of them into bound[q] (ordered bits; 0 where fewer
// than kc sampled rows are live). The keys are computed as the scan given
// `lanes` computes them (same bits), so no row the scan would rank in the
// top kc falls below the bound. bound needs no zeroing.
void launch_scan_sample(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t kc,
                        uint32_t count, int lanes, float* keys, unsigned* bound, cudaStream_t st);
// Rows to sample for a single-pass scan of kc-entry lists over `queries`
// queries a pass (0: none; the scan then starts without a bound).
// costly_offers: the scan pays for each row it offers (the tensor-core
// scan's re-score), so lists of any length start from a bound.
// MNEMO_SCAN_SAMPLE = 0 turns it off.
uint32_t scan_sample_count(const StoreRef& s, uint32_t kc, uint32_t queries, bool costly_offers = false);

// The single-query scan fed by bulk copies (bulk_scan.cu): whether it
// serves this search on the current device (sm_90 and later, one query, no
// activation, a row length it is built for), its blocks, and its launch
// with the same outputs as launch_scan_topk for one query (and, like it,
// returning the blocks used).
bool bulk_scan_usable(const StoreRef& s, uint32_t nq, uint32_t k);
unsigned bulk_scan_blocks(const StoreRef& s, unsigned sm_count);
unsigned launch_bulk_scan(const StoreRef& s, const float* query, const float* qnorm, uint32_t k, Cand* cand,
                          unsigned blocks, const ScanTail& tail, cudaStream_t st);

// The tensor-core scan (mma_scan.cu): whether it serves this search on the
// current device (f16 or bf16 rows, f32 rows of up to 256 dims, up to four
// queries, lists of up to kSmallKMax; MNEMO_SCAN_MMA = 0 turns it off), its
// blocks (one wave of those an SM holds), and its launch with
// launch_scan_topk's arguments and outputs.
bool mma_scan_usable(const StoreRef& s, uint32_t nq, uint32_t k);
unsigned mma_scan_blocks(const StoreRef& s, uint32_t nq, uint32_t k, unsigned sm_count);
unsigned launch_mma_scan(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t k,
                         Cand* cand, unsigned blocks, const ScanTail& tail, cudaStream_t st);

// Exact keys for every slot (one pass, like the scan) into keys[nq][slots].
void launch_score_rows(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, float* keys,
                       unsigned sm_count, cudaStream_t st);

// Turns GEMM dot products dots[q][j] (j < n, slots first..first+n) into keys
// in place: cosine scaling, L2 by expansion, bias, exclusions.
void launch_finish_keys(const StoreRef& s, const float* qnorms, uint32_t nq, uint32_t first, uint32_t n, float* dots,
                        cudaStream_t st);

// Small-k selection over rows vals[q][0..n) (slot = first + j): final keys,
// or GEMM dot products turned into keys on the fly when raw (then s and
// qnorms are used). blocks_per_row blocks per row each write k candidates to
// cand[q * cand_stride + cand_offset + b * k + j]. thr (optional, [nq],
// start at 0) carries a lower bound on each query's k-th best key across
// calls.
void launch_select_rows(const float* vals, bool raw, const StoreRef& s, const float* qnorms, uint32_t nq, uint32_t n,
                        uint32_t first, uint32_t k, unsigned blocks_per_row, Cand* cand, uint64_t cand_stride,
                        uint64_t cand_offset, uint32_t* thr, cudaStream_t st);

// Query batches in FAST mode with lists of at most kFusedMaxList entries:
// a tensor-core GEMM whose epilogue selects (fused_gemm_topk.cu). queries
// [nq x ld] in the storage dtype (f32 for f32 storage, then TF32), qnorms
// [nq], terms [slots x 8 bytes] from launch_slot_terms (per call: they carry
// the filter, bias and activation terms). Writes per-chunk lists cand[q][c][kc] for c < the returned chunk
// count (at most `chunks`, from fused_gemm_chunks), each sorted best first
// with approximate keys, for launch_merge and the exact re-score.
constexpr int kFusedMaxList = 32;
bool fused_gemm_wanted(uint32_t kc, DType t, uint64_t ld);
unsigned fused_gemm_chunks(uint32_t slots, uint32_t nq, unsigned sm_count);
void launch_slot_terms(const StoreRef& s, void* terms, cudaStream_t st);
unsigned launch_fused_gemm_topk(const StoreRef& s, const void* queries, const float* qnorms, const void* terms,
                                uint32_t nq, uint32_t kc, unsigned chunks, Cand* cand, cudaStream_t st);

// Merges m candidates per query (cand[q * m ...]) into a sorted list of k:
// out[q * k ...] (missing entries: key NaN, slot UINT32_MAX).
void launch_merge(const Cand* cand, uint32_t nq, uint64_t m, uint32_t k, const uint64_t* ids, Cand* out,
                  cudaStream_t st);

// Large-k selection: for each query row keys[q][0..n) the best k entries,
// sorted, into out[q * k ...]. temp: scratch from large_select_temp_bytes.
size_t large_select_temp_bytes(uint32_t nq, uint32_t k);
void launch_large_select(const float* keys, uint32_t nq, uint32_t n, uint32_t k, const uint64_t* ids, Cand* out,
                         void* temp, size_t temp_bytes, cudaStream_t st);

// Sorts nq lists of kc candidates (key descending, id ascending); temp from
// large_select_temp_bytes(nq, kc).
void sort_lists(Cand* lists, uint32_t nq, uint32_t kc, const uint64_t* ids, void* temp, size_t temp_bytes,
                cudaStream_t st);

// Recomputes exact keys for sorted candidate lists cand[q][0..kc) and
// re-sorts them when kc <= kSmallKMax (FAST mode and GEMM-based L2);
// longer lists are re-sorted by the caller with sort_lists.
void launch_rescore(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, Cand* cand, uint32_t kc,
                    cudaStream_t st);

// Writes the first k of each list (of kc) as user ids and scores into rows
// of k_out >= k columns; columns [k, k_out) and empty entries are padding
// (MNEMO_NO_ID, NaN).
void launch_emit(const Cand* lists, uint32_t nq, uint32_t kc, uint32_t k, uint64_t k_out, const uint64_t* ids,
                 KeyMetric metric, uint64_t* out_ids, float* out_scores, cudaStream_t st);

// L2 norms of n rows of dtype t with row length ld.
void launch_stored_norms(const void* rows, DType t, uint64_t n, uint64_t ld, float* norms, cudaStream_t st);

// Length of the per-query candidate lists a search keeps.
uint32_t search_list_length(uint32_t slots, uint64_t k, bool rescore);

struct ExecContext;
// The device part of a search, queued on st: queries q [nq x ld] (zero
// padded) and their norms qn already on the device; writes d_ids / d_scores
// [nq x k_out] where k_out >= min(k, L), L = search_list_length(slots, k,
// false) <= slots, the columns past min(k, L) padded.
// mask (or null): a filter per query (QueryMask, batch/fused_wide.h), for
// FAST batches that take the long-row list kernel (dense_mask_usable).
struct QueryMask;
void device_search(ExecContext& ctx, cudaStream_t st, const StoreRef& s, const float* q, const float* qn, uint64_t nq,
                   uint64_t k, uint64_t k_out, bool fast, uint64_t workspace, int sm_count, uint64_t* d_ids,
                   float* d_scores, const QueryMask* mask = nullptr);
// Whether device_search takes a mask for nq queries of k over s, with its
// queries at the start of an arena region (Arena: 256-byte aligned).
bool dense_mask_usable(const StoreRef& s, uint64_t nq, uint64_t k, bool fast);

// The candidates of an inverted-file search for the paths that key every
// slot (large k, normalised activation): query q's candidates are the slots
// of the lists whose bits are set in row q of list_bits, and the hot tier
// [hot_begin, slots). Built by ivf_device_search (ivf_search.cu).
struct IvfLists {
  const uint64_t* offsets = nullptr;    // [nlist + 1] on the device
  const uint32_t* list_bits = nullptr;  // [nq][words]
  uint32_t words = 0, nlist = 0, hot_begin = 0;
};
// Keys [m][n] of queries q0 .. q0 + m - 1: NaN where the slot is not one of
// the query's candidates.
void launch_ivf_mask(const IvfLists& c, uint32_t q0, uint32_t m, uint32_t n, float* keys, cudaStream_t st);

// Normalised activation search (activation_search.cu), in place of
// device_search when act.normalize is set: relevance keys of every slot per
// query chunk in the workspace, the candidates' ranges, min-max scaled keys,
// selection. With act.ranges_out it writes each query's ranges there (host
// memory, [nq]) and no results. s carries the store, filter, bias flag,
// times and importance (its plain-activation fields unused); outputs as for
// device_search. ivf (or null): an inverted-file search's candidates, the
// ranges (relevance, times, importances, count) then taken per query over
// its own candidates.
void normalized_device_search(ExecContext& ctx, cudaStream_t st, const StoreRef& s, const Activation& act,
                              const float* q, const float* qn, uint64_t nq, uint64_t k, uint64_t k_out,
                              uint64_t workspace, int sm_count, uint64_t* d_ids, float* d_scores,
                              const IvfLists* ivf = nullptr);

// Query index (into result[0], UINT64_MAX kept when none) of the first of nq
// rows [dim] whose largest magnitude does not fit FAST f16 arithmetic (see
// fast_queries_fit).
void launch_find_f16_misfit(const float* q, uint64_t nq, uint64_t dim, unsigned long long* result, cudaStream_t st);

// x[i] = -x[i] for i < n.
void launch_negate(float* x, uint64_t n, cudaStream_t st);

// Query norms (f32) and conversions.
// bad (or null): bad[r] set non-zero where row r holds NaN or infinity.
// extra[slot] = the memory terms of every slot (the bias included where
// s.apply_bias), as slot_meta computes them inline, for a search of s.act.
void launch_activation_terms(const StoreRef& s, float* extra, cudaStream_t st);
void launch_row_norms(const float* q, uint32_t nq, uint64_t ld, float* norms, cudaStream_t st, unsigned* bad = nullptr);
void launch_f32_to(DType t, const float* src, void* dst, uint64_t n, cudaStream_t st);
// As launch_f32_to for `rows` rows of ld (t may be f32 too), each divided by
// its norm first (norms[row]; a zero norm gives a zero row): cosine queries
// of unit length.
void launch_f32_to_unit(DType t, const float* src, void* dst, uint64_t rows, uint64_t ld, const float* norms,
                        cudaStream_t st);
void launch_widen_rows(const void* src, DType t, uint64_t rows, uint64_t ld, float* dst, cudaStream_t st);

}  // namespace mnemo::cuda
