// Independent float64 reference of every mnemo operation. Nothing here calls
// mnemo: encodings, scores, top-k, resampling and normalisation are written
// from the header's contract alone.
#pragma once

#include <mnemo.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ref {

// ---- storage formats ---------------------------------------------------------

// float -> IEEE binary16, rounded to nearest even (overflow goes to infinity).
uint16_t f16_from_f32(float x);
double f16_value(uint16_t h);
// float -> bfloat16 (upper half of a binary32), rounded to nearest even.
uint16_t bf16_from_f32(float x);
double bf16_value(uint16_t h);

size_t dtype_size(int32_t dtype);
// Element i of an array of `dtype` (F32, F64, F16, BF16) as a double.
double load(const void* base, int32_t dtype, size_t i);
// Writes v rounded to nearest even into element i of an array of `dtype`.
void store(void* base, int32_t dtype, size_t i, double v);
// Bound on |round_to_dtype(v) - v| (half an ulp, subnormals included).
double rounding_tol(int32_t dtype, double v);

// ---- similarity ----------------------------------------------------------------

bool higher_is_better(int32_t metric);
// Cosine (0 when either norm is 0), dot or squared L2 of two rows in float64.
double score(int32_t metric, const double* x, const double* y, size_t dim);
// The contract's bound for that score: cosine 1e-5 absolute; dot 1e-5 scaled
// by max(1, sum |x_i y_i|) (which is 1e-5 for unit vectors); squared L2 1e-5
// relative with an absolute floor of 1e-7 (|x|^2 + |y|^2) for near-zero
// distances.
double score_tol(int32_t metric, const double* x, const double* y, size_t dim, double ref_score);

// ---- top-k -------------------------------------------------------------------------

struct Candidate {
  uint64_t id;
  double score;  // as ranked: bias already applied where asked
  double tol;    // allowed error of the returned score
};

// Best first (highest similarity, lowest distance), equal scores by the
// smaller id, NaN scores dropped.
std::vector<Candidate> rank(int32_t metric, std::vector<Candidate> cands);

// The reference answer for one query: k ids and scores, padded with
// MNEMO_NO_ID and NaN when fewer than k candidates exist.
void topk(int32_t metric, const std::vector<Candidate>& cands, size_t k, std::vector<uint64_t>* ids,
          std::vector<double>* scores);

// ---- resampling ----------------------------------------------------------------------

// What one target (row b, target j) must produce.
struct ResampleTarget {
  enum Kind { kZero, kSample, kInterp } kind;
  size_t i;  // kSample: the sample; kInterp: the left sample (i + 1 is right)
  double w;  // kInterp: weight of the right sample, in (0, 1)
};

// Per the header: per row, i is the largest index with src_times[i] <= t;
// before the first time -> sample 0, at or after the last -> the last sample;
// w = (t - t_i) / (t_{i+1} - t_i). Targets at or past tgt_lengths[b] -> zero.
// Times are given as doubles (f32 times are exact in double). Lengths may be
// empty (every row full).
std::vector<ResampleTarget> resample_plan(const std::vector<double>& src_times, const std::vector<double>& tgt_times,
                                          size_t batch, size_t n_src, size_t n_tgt,
                                          const std::vector<uint64_t>& src_len, const std::vector<uint64_t>& tgt_len);

// Bound on |out - (a + w (b - a))| for fma(w, b - a, a) in f32 with w from
// rounded arithmetic, then rounded to `dtype`.
double interp_tol(int32_t dtype, double a, double b, double value);

// ---- normalisation ---------------------------------------------------------------------

// x / ||x||_2 per row; a zero row stays zero.
std::vector<double> normalize_rows(const std::vector<double>& in, size_t rows, size_t dim);

// LayerNorm with biased variance; gamma/beta may be null (ones / zeros).
// A row whose var + eps is 0 becomes beta. `tol` receives a per-element
// bound for f32 statistics, plus the output rounding of `dtype`.
std::vector<double> layer_norm(const std::vector<double>& in, size_t rows, size_t dim, const float* gamma,
                               const float* beta, double eps, int32_t dtype, std::vector<double>* tol);

}  // namespace ref
