// Row kernels of the CPU backend, compiled for every SIMD target Highway
// supports and chosen at run time (simd_kernels.cpp). All accumulate in f32
// with four vector accumulators per sum (so 4 x lanes partial sums, then a
// tree), which keeps the error of a D <= 4096 dot product of unit vectors
// far inside the contract's 1e-5.
#pragma once

#include <cstdint>

#include "../dtype.h"

namespace mnemo::cpu::simd {

// The most queries one streaming pass scores against each row.
constexpr uint64_t kMaxQueries = 4;

// out[j * n + r] = dot(queries[j], row r) (or the squared L2 distance when
// l2 is set), for m <= kMaxQueries f32 queries and n consecutive rows of
// storage type t. A query's score of a row is the same whatever m is.
void score_rows(const float* queries, uint64_t m, const void* rows, DType t, uint64_t dim, uint64_t n, bool l2,
                float* out);

// score_rows of the rows slots[0..n) of the array at `rows` (row i at rows +
// i * dim elements), out[j * n + r] for slots[r]: the same value score_rows
// gives each row. Rows are asked for a few ahead, from slots[0..listed)
// (listed >= n; the rest of a caller's list): a list's rows are scattered,
// so the hardware prefetcher does not see them coming.
void score_slots(const float* queries, uint64_t m, const void* rows, DType t, uint64_t dim, const uint32_t* slots,
                 uint64_t n, uint64_t listed, bool l2, float* out);

// out[j] = the score of one row against queries[j], j < m (any m): the same
// value score_rows gives that query and row.
void score_row_ptrs(const float* const* queries, uint64_t m, const void* row, DType t, uint64_t dim, bool l2,
                    float* out);

// Both operands of storage type t: dot(a, b) and |b|^2 in one pass.
void pair_dot(const void* a, const void* b, DType t, uint64_t dim, float* dot, float* b_sumsq);
// |a - b|^2.
float pair_l2sq(const void* a, const void* b, DType t, uint64_t dim);
// |a|^2.
float sumsq(const void* a, DType t, uint64_t dim);

// n elements of storage type t widened to f32.
void widen(const void* in, DType t, uint64_t n, float* out);

// Outputs at least this large are written with non-temporal stores: they
// cannot stay in cache anyway, and streaming skips reading each line first.
constexpr uint64_t kStreamMinBytes = uint64_t{64} << 20;

// f32 rows: out = in / |in| (zero rows stay zero); LayerNorm with optional
// gamma/beta. in may equal out (then stream must be false).
// Normalisation and LayerNorm of one f32 row; false (nothing written) when
// the row's sum of squares leaves the f32 range, for the caller's f64 path.
bool normalize_f32(const float* in, float* out, uint64_t dim, bool stream);
bool layer_norm_f32(const float* in, float* out, uint64_t dim, const float* gamma, const float* beta, float eps,
                    bool stream);

// Orders this thread's non-temporal stores before whatever it does next:
// each thread that wrote with stream = true calls it after its last row.
void stream_fence();

// out[d] = fma(w, b[d] - a[d], a[d]) over f32 rows.
void lerp_f32(const float* a, const float* b, float w, float* out, uint64_t dim, bool stream);

// Index of the first element of n whose exponent bits are all set (NaN or
// infinity) in data of type t (f32, f16, bf16, f64), or n when none is.
uint64_t first_non_finite(const void* data, DType t, uint64_t n);

// Activation terms of n consecutive slots (activation.h):
// out[i] = w_imp * imp[i] + (w_rec * rec_i + bias[i]), rec_i =
// 2^(-(now - times[i]) * inv_hl), 1 for times[i] >= now; bias may be null.
void activation_extras(const double* times, const float* imp, const float* bias, uint64_t n, double now, double inv_hl,
                       float w_rec, float w_imp, float* out);

// The Highway target the kernels run on now (e.g. "AVX3").
const char* target_name();

}  // namespace mnemo::cpu::simd
