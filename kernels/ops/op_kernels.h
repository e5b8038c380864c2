// Host-side launchers of the pair-scoring, resampling and normalisation
// kernels. Every pointer is device memory; work is queued on `st`.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "device/cuda_util.cuh"

namespace mnemo::cuda {

// ---- pair scoring --------------------------------------------------------

struct PairTable {
  const void* rows;  // [n_items x dim] of dtype, rows packed
  DType dtype;
  uint64_t dim;
  Metric metric;
};

// One warp per 32 consecutive pairs, in input order: both rows read from
// global memory. For small pair counts (no sort to pay for).
void launch_pairs_gather(const PairTable& t, const void* src, const void* tgt, bool u64_index, uint64_t n_pairs,
                         float* scores, cudaStream_t st);

// Sorting by source: keys (the source index as u32) and the permutation.
// temp from pairs_sort_temp_bytes; n_pairs < 2^32 and n_items <= 2^32.
size_t pairs_sort_temp_bytes(uint64_t n_pairs, uint64_t n_items);
void launch_pairs_sort(const void* src, bool u64_index, uint64_t n_pairs, uint64_t n_items, uint32_t* keys_tmp,
                       uint32_t* perm_tmp, uint32_t* keys_sorted, uint32_t* perm_sorted, void* temp, size_t temp_bytes,
                       cudaStream_t st);
// Scores pairs in sorted order: each warp keeps its current source row in
// shared memory and scatters scores to input order through perm.
// False when a source row does not fit in shared memory (use the gather).
bool pairs_sorted_fits(uint64_t dim);
void launch_pairs_sorted(const PairTable& t, const uint32_t* sorted_src, const uint32_t* perm, const void* tgt,
                         bool u64_index, uint64_t n_pairs, float* scores, cudaStream_t st);

// ---- resampling ----------------------------------------------------------

struct ResampleRef {
  const void* data;  // [batch x n_src x dim]
  DType dtype;
  uint64_t batch, n_src, dim, n_tgt;
  const void* src_times;  // [batch x n_src], f32 or f64
  const void* tgt_times;  // [batch x n_tgt]
  bool f64_times;
  const uint64_t* src_lengths;  // [batch] or null
  const uint64_t* tgt_lengths;  // [batch] or null
  void* out;                    // [batch x n_tgt x dim]
};
void launch_resample(const ResampleRef& r, cudaStream_t st);

// ---- row normalisation ---------------------------------------------------

struct RowsRef {
  const void* in;
  void* out;  // may equal in
  DType dtype;
  uint64_t rows, dim;
  const float* gamma;  // LayerNorm only; each may be null
  const float* beta;
  float eps;
};
void launch_normalize_rows(const RowsRef& r, cudaStream_t st);
void launch_layer_norm(const RowsRef& r, cudaStream_t st);

// ---- content checks over device memory (the _device entry points) -------
// Each writes the first offending position (or UINT64_MAX) to *result, a
// device word the caller initialised to UINT64_MAX.

void launch_find_non_finite(const void* data, DType t, uint64_t n, unsigned long long* result, cudaStream_t st);
void launch_find_out_of_range(const void* index, bool u64, uint64_t n, uint64_t limit, unsigned long long* result,
                              cudaStream_t st);
// Resampling rows: result[0] the first row whose lengths are out of range,
// result[1] the first (row * n_src + i) where valid source times decrease,
// result[2] the first non-finite position in the valid source times,
// result[3] in the valid target times (row * n_tgt + i), result[4] in the
// valid data (flat element index). Lengths are checked first: the others
// are only meaningful when result[0] stays UINT64_MAX.
void launch_check_resample(const ResampleRef& r, bool finite, unsigned long long* result, cudaStream_t st);

// The verdict of a search's queries checked on the device: bad[q] (nq
// words, non-zero for a query holding NaN or infinity, from
// launch_row_norms) turns row q of the results ([nq x k]) into padding
// (MNEMO_NO_ID, NaN), and *status (an int32, or null) becomes
// MNEMO_E_NON_FINITE when any query was bad, else MNEMO_OK.
void launch_poison_bad_rows(const unsigned* bad, uint64_t nq, uint64_t k, uint64_t* ids, float* scores, int32_t* status,
                            cudaStream_t st);

}  // namespace mnemo::cuda
