// Highway kernels behind simd_kernels.h, compiled once per SIMD target and
// dispatched at run time. The 16-bit storage types are widened to f32 on
// load (F16C / a shift for bf16) and multiplied against the f32 query in
// f32: the native bf16/f16 dot instructions would round the query to 16
// bits, which EXACT mode does not allow (Highway 1.0.3 offers neither).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/cpu/simd_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
//
#include <hwy/cache_control.h>
#include <hwy/highway.h>
//
#include <hwy/contrib/math/math-inl.h>

#include "core/cpu/simd_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace mnemo::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Below this a sum of squares may have lost terms to underflow (or be a
// zero or constant row): such rows take the caller's f64 path.
constexpr float kMinSafeSquares = 1e-30f;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Loads lanes i.. of a row as f32, for each storage type; widen() takes
// lanes already loaded in the storage type.
struct LoadF32 {
  using T = float;
  static HWY_INLINE VF load(DF df, const T* p) { return hn::LoadU(df, p); }
  static HWY_INLINE VF widen(DF, VF v) { return v; }
};
struct LoadF16 {
  using T = hwy::float16_t;
  static HWY_INLINE VF load(DF df, const T* p) { return hn::PromoteTo(df, hn::LoadU(hn::Rebind<T, DF>(), p)); }
  static HWY_INLINE VF widen(DF df, hn::Vec<hn::Rebind<T, DF>> v) { return hn::PromoteTo(df, v); }
};
struct LoadBF16 {
  using T = hwy::bfloat16_t;
  static HWY_INLINE VF load(DF df, const T* p) { return hn::PromoteTo(df, hn::LoadU(hn::Rebind<T, DF>(), p)); }
  static HWY_INLINE VF widen(DF df, hn::Vec<hn::Rebind<T, DF>> v) { return hn::PromoteTo(df, v); }
};

// The last dim % lanes elements, zero-padded to a full vector.
template <class L>
HWY_INLINE VF load_tail(DF df, const typename L::T* p, size_t rem) {
#if HWY_TARGET <= HWY_AVX3
  // AVX-512 masked loads read nothing past rem and zero the rest: the same
  // vector as the copy below, without a store and a reload of each tail.
  const hn::Rebind<typename L::T, DF> dt;
  return L::widen(df, hn::MaskedLoad(hn::FirstN(dt, rem), dt, p));
#else
  // Elsewhere masked loads of 16-bit lanes read the whole vector: a copy.
  HWY_ALIGN typename L::T buf[hn::MaxLanes(DF())];
  std::memset(buf, 0, sizeof(buf));
  std::memcpy(buf, p, rem * sizeof(typename L::T));
  return L::load(df, buf);
#endif
}
HWY_INLINE VF load_q_tail(DF df, const float* p, size_t rem) { return load_tail<LoadF32>(df, p, rem); }

HWY_INLINE float sum4(DF df, VF a0, VF a1, VF a2, VF a3) {
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

// How far ahead of its reads score_rows_t asks for rows (bytes), whether
// it asks row by row instead, and the hint of a stream's asks
// (MNEMO_CPU_PF_AHEAD, MNEMO_CPU_PF_ROWS=1, MNEMO_CPU_PF_HINT with the codes
// of prefetch_hint: for measuring).
inline size_t env_size(const char* name, size_t fallback) {
  const char* e = std::getenv(name);
  return e && std::atoll(e) >= 0 ? static_cast<size_t>(std::atoll(e)) : fallback;
}
inline size_t prefetch_ahead() {
  static const size_t v = env_size("MNEMO_CPU_PF_AHEAD", 2048);
  return v;
}
inline bool prefetch_by_rows() {
  static const bool v = env_size("MNEMO_CPU_PF_ROWS", 0) == 1;
  return v;
}

// Rows r < n are consecutive from `rows`, or with `slots`, rows slots[r] of
// the array at `rows` (a gather: each row alone, asked for kGatherAhead
// rows early, as far as slots[listed - 1]).
constexpr size_t kGatherAhead = 4;
// The gather asks for its rows into L2 only (prefetcht2): asked into L1
// (prefetcht0), a 10% namespace scope interleaved over 1M x 192 f32 took
// 2.24-2.69x the time of a store of just its rows on the 2-core machine
// (two threads, process pairs), against 1.81-1.91x (why is a guess: asked
// into L1, the rows hold its few miss buffers). Knobs for measuring: rows ahead
// (MNEMO_CPU_GATHER_AHEAD) and the hint (MNEMO_CPU_GATHER_HINT: 0 T0, 1 T1,
// 2 T2, 3 NTA, 4 none).
inline size_t gather_ahead() {
  static const size_t v = env_size("MNEMO_CPU_GATHER_AHEAD", kGatherAhead);
  return v;
}
inline int gather_hint() {
  static const int v = static_cast<int>(env_size("MNEMO_CPU_GATHER_HINT", 2));
  return v;
}
// Prefetch hints: 0 T0, 1 T1, 2 T2, 3 NTA, kNoAsk none.
constexpr int kNoAsk = 4;
inline int stream_hint() {
  static const int v = static_cast<int>(env_size("MNEMO_CPU_PF_HINT", kNoAsk));
  return v;
}
inline void prefetch_hint(const unsigned char* p, int hint) {
  switch (hint) {
    case 0: __builtin_prefetch(p, 0, 3); break;
    case 1: __builtin_prefetch(p, 0, 2); break;
    case 2: __builtin_prefetch(p, 0, 1); break;
    case 3: __builtin_prefetch(p, 0, 0); break;
    default: break;
  }
}

// Scores of M queries against one row; element i goes to accumulator
// (i / lanes) % 4 whatever M is, so a query's score does not depend on the
// others it is batched with.
// pf > 0: each step also asks (with `hint`) for the cache lines pf bytes
// past the ones it reads (past the row's end into the next rows, which
// follow it).
template <class L, size_t M, bool kL2>
HWY_INLINE void score_one_row(DF df, const float* const* q, const typename L::T* x, size_t dim, float* out,
                              size_t pf = 0, int hint = 0) {
  const size_t N = hn::Lanes(df);
  VF acc[M][4];
  for (size_t j = 0; j < M; ++j)
    for (size_t a = 0; a < 4; ++a) acc[j][a] = hn::Zero(df);
  auto step = [&](size_t a, VF xv, auto qload) {
    for (size_t j = 0; j < M; ++j) {
      const VF qv = qload(j);
      if (kL2) {
        const VF d = hn::Sub(qv, xv);
        acc[j][a] = hn::MulAdd(d, d, acc[j][a]);
      } else {
        acc[j][a] = hn::MulAdd(qv, xv, acc[j][a]);
      }
    }
  };
  size_t i = 0;
  for (; i + 4 * N <= dim; i += 4 * N) {
    if (pf) {
      const auto* p = reinterpret_cast<const unsigned char*>(x + i) + pf;
      for (size_t b = 0; b < 4 * N * sizeof(typename L::T); b += 64) prefetch_hint(p + b, hint);
    }
    for (size_t a = 0; a < 4; ++a) {
      const size_t o = i + a * N;
      step(a, L::load(df, x + o), [&](size_t j) { return hn::LoadU(df, q[j] + o); });
    }
  }
  size_t a = 0;
  for (; i + N <= dim; i += N, ++a) {
    if (pf) prefetch_hint(reinterpret_cast<const unsigned char*>(x + i) + pf, hint);
    step(a, L::load(df, x + i), [&](size_t j) { return hn::LoadU(df, q[j] + i); });
  }
  if (i < dim) {
    if (pf) prefetch_hint(reinterpret_cast<const unsigned char*>(x + i) + pf, hint);
    const size_t rem = dim - i;
    step(a, load_tail<L>(df, x + i, rem), [&](size_t j) { return load_q_tail(df, q[j] + i, rem); });
  }
  for (size_t j = 0; j < M; ++j) out[j] = sum4(df, acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
}

template <class L, size_t M, bool kL2>
void score_rows_t(const float* const* q, const void* rows, size_t dim, size_t n, size_t ld, float* out,
                  const uint32_t* slots = nullptr, size_t listed = 0) {
  const DF df;
  const auto* x = static_cast<const typename L::T*>(rows);
  auto at = [&](size_t r) { return x + (slots ? slots[r] : r) * dim; };
  float s[M];
  // Consecutive rows at least a vector wide are a stream, and by default
  // nothing asks for them ahead of the reads: the hardware prefetcher alone
  // was the fastest. On the 2-core machine, one query, the settings in turn
  // in one process (40 cells, 17-3072 x f32/f16/bf16, 64 MB-1 GB): no asks
  // took 0.78-1.09x the time of asking for the lines 2 KiB past each step's
  // reads (prefetcht0, the earlier default; 768 x f16 over 256 MB 7.69
  // against 9.49 ms; the one cell above 1.02x measured 0.98x again), and
  // asks into L2 (prefetcht2) 0.72-1.32x, slower on rows of 64-200. Rows
  // narrower than a vector ask for a whole row ahead before each row; a
  // gather asks for its rows ahead with its own hint; a lone row asks for
  // nothing past it.
  const size_t row_bytes = dim * sizeof(typename L::T);
  const bool stream = !slots && n > 1 && dim >= hn::Lanes(df) && !prefetch_by_rows();
  const int hint = slots ? gather_hint() : stream ? stream_hint() : 0;
  const size_t pf = stream && hint != kNoAsk ? prefetch_ahead() : 0;
  const size_t ahead = slots ? gather_ahead() : row_bytes >= 2048 ? 1 : (2048 + row_bytes - 1) / row_bytes;
  const size_t known = slots ? listed : n;
  for (size_t r = 0; r < n; ++r) {
    if (!stream && r + ahead < known) {
      const auto* p = reinterpret_cast<const unsigned char*>(at(r + ahead));
      for (size_t o = 0; o < row_bytes; o += 64) prefetch_hint(p + o, hint);
    }
    score_one_row<L, M, kL2>(df, q, at(r), dim, s, pf, hint);
    for (size_t j = 0; j < M; ++j) out[j * ld + r] = s[j];
  }
}

template <class L, bool kL2>
void score_rows_l(const float* queries, size_t m, const void* rows, size_t dim, size_t n, float* out,
                  const uint32_t* slots = nullptr, size_t listed = 0) {
  // Two queries per pass keep 8 accumulators in registers on 16-register
  // targets; AVX-512 has room for four.
  constexpr size_t kGroup = HWY_MAX_BYTES >= 64 ? 4 : 2;
  for (size_t j0 = 0; j0 < m;) {
    const float* q[4];
    const size_t g = m - j0 >= kGroup ? kGroup : (m - j0 >= 2 ? 2 : 1);
    for (size_t j = 0; j < g; ++j) q[j] = queries + (j0 + j) * dim;
    float* o = out + j0 * n;
    if (g == 4)
      score_rows_t<L, 4, kL2>(q, rows, dim, n, n, o, slots, listed);
    else if (g == 2)
      score_rows_t<L, 2, kL2>(q, rows, dim, n, n, o, slots, listed);
    else
      score_rows_t<L, 1, kL2>(q, rows, dim, n, n, o, slots, listed);
    j0 += g;
  }
}

void ScoreRows(const float* queries, uint64_t m, const void* rows, DType t, uint64_t dim, uint64_t n, bool l2,
               float* out) {
  switch (t) {
    case DType::f16:
      return l2 ? score_rows_l<LoadF16, true>(queries, m, rows, dim, n, out)
                : score_rows_l<LoadF16, false>(queries, m, rows, dim, n, out);
    case DType::bf16:
      return l2 ? score_rows_l<LoadBF16, true>(queries, m, rows, dim, n, out)
                : score_rows_l<LoadBF16, false>(queries, m, rows, dim, n, out);
    default:
      return l2 ? score_rows_l<LoadF32, true>(queries, m, rows, dim, n, out)
                : score_rows_l<LoadF32, false>(queries, m, rows, dim, n, out);
  }
}

void ScoreSlots(const float* queries, uint64_t m, const void* rows, DType t, uint64_t dim, const uint32_t* slots,
                uint64_t n, uint64_t listed, bool l2, float* out) {
  switch (t) {
    case DType::f16:
      return l2 ? score_rows_l<LoadF16, true>(queries, m, rows, dim, n, out, slots, listed)
                : score_rows_l<LoadF16, false>(queries, m, rows, dim, n, out, slots, listed);
    case DType::bf16:
      return l2 ? score_rows_l<LoadBF16, true>(queries, m, rows, dim, n, out, slots, listed)
                : score_rows_l<LoadBF16, false>(queries, m, rows, dim, n, out, slots, listed);
    default:
      return l2 ? score_rows_l<LoadF32, true>(queries, m, rows, dim, n, out, slots, listed)
                : score_rows_l<LoadF32, false>(queries, m, rows, dim, n, out, slots, listed);
  }
}

// One row against m queries given by pointers, four (or two) at a time.
template <class L, bool kL2>
void score_row_ptrs_l(const float* const* q, size_t m, const void* row, size_t dim, float* out) {
  constexpr size_t kGroup = HWY_MAX_BYTES >= 64 ? 4 : 2;
  for (size_t j0 = 0; j0 < m;) {
    const size_t g = m - j0 >= kGroup ? kGroup : (m - j0 >= 2 ? 2 : 1);
    if (g == 4)
      score_rows_t<L, 4, kL2>(q + j0, row, dim, 1, 1, out + j0);
    else if (g == 2)
      score_rows_t<L, 2, kL2>(q + j0, row, dim, 1, 1, out + j0);
    else
      score_rows_t<L, 1, kL2>(q + j0, row, dim, 1, 1, out + j0);
    j0 += g;
  }
}

void ScoreRowPtrs(const float* const* queries, uint64_t m, const void* row, DType t, uint64_t dim, bool l2,
                  float* out) {
  switch (t) {
    case DType::f16:
      return l2 ? score_row_ptrs_l<LoadF16, true>(queries, m, row, dim, out)
                : score_row_ptrs_l<LoadF16, false>(queries, m, row, dim, out);
    case DType::bf16:
      return l2 ? score_row_ptrs_l<LoadBF16, true>(queries, m, row, dim, out)
                : score_row_ptrs_l<LoadBF16, false>(queries, m, row, dim, out);
    default:
      return l2 ? score_row_ptrs_l<LoadF32, true>(queries, m, row, dim, out)
                : score_row_ptrs_l<LoadF32, false>(queries, m, row, dim, out);
  }
}

// dot(a, b) and |b|^2, or |a - b|^2, or |a|^2 over two storage rows.
enum class PairKind { dot_bnorm, l2, sumsq };

template <class L, PairKind K>
void pair_t(const void* pa, const void* pb, size_t dim, float* r0, float* r1) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const auto* a = static_cast<const typename L::T*>(pa);
  const auto* b = static_cast<const typename L::T*>(pb);
  VF s[4], t[4];
  for (size_t k = 0; k < 4; ++k) s[k] = t[k] = hn::Zero(df);
  auto step = [&](size_t k, VF av, VF bv) {
    if (K == PairKind::dot_bnorm) {
      s[k] = hn::MulAdd(av, bv, s[k]);
      t[k] = hn::MulAdd(bv, bv, t[k]);
    } else if (K == PairKind::l2) {
      const VF d = hn::Sub(av, bv);
      s[k] = hn::MulAdd(d, d, s[k]);
    } else {
      s[k] = hn::MulAdd(av, av, s[k]);
    }
  };
  size_t i = 0;
  for (; i + 4 * N <= dim; i += 4 * N)
    for (size_t k = 0; k < 4; ++k) {
      const size_t o = i + k * N;
      step(k, L::load(df, a + o), K == PairKind::sumsq ? hn::Zero(df) : L::load(df, b + o));
    }
  size_t k = 0;
  for (; i + N <= dim; i += N, ++k)
    step(k, L::load(df, a + i), K == PairKind::sumsq ? hn::Zero(df) : L::load(df, b + i));
  if (i < dim) {
    const size_t rem = dim - i;
    step(k, load_tail<L>(df, a + i, rem), K == PairKind::sumsq ? hn::Zero(df) : load_tail<L>(df, b + i, rem));
  }
  *r0 = sum4(df, s[0], s[1], s[2], s[3]);
  if (K == PairKind::dot_bnorm) *r1 = sum4(df, t[0], t[1], t[2], t[3]);
}

template <PairKind K>
void pair_d(const void* a, const void* b, DType t, size_t dim, float* r0, float* r1) {
  switch (t) {
    case DType::f16: return pair_t<LoadF16, K>(a, b, dim, r0, r1);
    case DType::bf16: return pair_t<LoadBF16, K>(a, b, dim, r0, r1);
    default: return pair_t<LoadF32, K>(a, b, dim, r0, r1);
  }
}

void PairDot(const void* a, const void* b, DType t, uint64_t dim, float* dot, float* b_sumsq) {
  pair_d<PairKind::dot_bnorm>(a, b, t, dim, dot, b_sumsq);
}
float PairL2sq(const void* a, const void* b, DType t, uint64_t dim) {
  float r = 0.0f;
  pair_d<PairKind::l2>(a, b, t, dim, &r, nullptr);
  return r;
}
float SumSq(const void* a, DType t, uint64_t dim) {
  float r = 0.0f;
  pair_d<PairKind::sumsq>(a, a, t, dim, &r, nullptr);
  return r;
}

template <class L>
void widen_t(const void* in, size_t n, float* out) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const auto* p = static_cast<const typename L::T*>(in);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(L::load(df, p + i), df, out + i);
  if (i < n) {
    HWY_ALIGN float buf[hn::MaxLanes(DF())];
    hn::Store(load_tail<L>(df, p + i, n - i), df, buf);
    std::memcpy(out + i, buf, (n - i) * sizeof(float));
  }
}

void Widen(const void* in, DType t, uint64_t n, float* out) {
  switch (t) {
    case DType::f16: return widen_t<LoadF16>(in, n, out);
    case DType::bf16: return widen_t<LoadBF16>(in, n, out);
    default: return widen_t<LoadF32>(in, n, out);
  }
}

// Sum of x - c (or of (x - c)^2 when kSq) over a f32 row, four accumulators;
// with kShift the terms are (x - s) - c.
template <bool kSq, bool kShift = false>
HWY_INLINE float row_sum(DF df, const float* x, size_t dim, float c, float s = 0.0f) {
  const size_t N = hn::Lanes(df);
  const VF vc = hn::Set(df, c), vs = hn::Set(df, s);
  VF acc[4];
  for (size_t k = 0; k < 4; ++k) acc[k] = hn::Zero(df);
  auto step = [&](size_t k, VF v) {
    const VF d = hn::Sub(kShift ? hn::Sub(v, vs) : v, vc);
    acc[k] = kSq ? hn::MulAdd(d, d, acc[k]) : hn::Add(acc[k], d);
  };
  size_t i = 0;
  for (; i + 4 * N <= dim; i += 4 * N)
    for (size_t k = 0; k < 4; ++k) step(k, hn::LoadU(df, x + i + k * N));
  size_t k = 0;
  for (; i + N <= dim; i += N, ++k) step(k, hn::LoadU(df, x + i));
  float tail = 0.0f;
  for (; i < dim; ++i) {
    const float d = (kShift ? x[i] - s : x[i]) - c;
    tail += kSq ? d * d : d;
  }
  return sum4(df, acc[0], acc[1], acc[2], acc[3]) + tail;
}

// Writes out[0..dim): vf(i) gives lanes i..i+N, sf(i) one element. With
// `stream` the vectors go out as non-temporal stores (a large output then
// skips reading each line before writing it); a scalar head first brings out
// to vector alignment. The caller fences once its rows are done
// (simd::stream_fence), not every row.
template <class VFn, class SFn>
HWY_INLINE void write_row(DF df, float* out, size_t dim, bool stream, VFn vf, SFn sf) {
  const size_t N = hn::Lanes(df);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(out), vb = N * sizeof(float);
  size_t i = 0;
  if (stream && addr % sizeof(float) == 0) {
    const size_t head = ((vb - addr % vb) % vb) / sizeof(float);
    for (; i < head && i < dim; ++i) out[i] = sf(i);
    for (; i + N <= dim; i += N) hn::Stream(vf(i), df, out + i);
  } else {
    for (; i + N <= dim; i += N) hn::StoreU(vf(i), df, out + i);
  }
  for (; i < dim; ++i) out[i] = sf(i);
}

bool NormalizeF32(const float* in, float* out, uint64_t dim, bool stream) {
  const DF df;
  const float ss = row_sum<true>(df, in, dim, 0.0f);
  // A sum of squares that overflows or underflows f32 (finite rows of huge
  // or tiny values): the caller takes its f64 path for this row.
  if (!(ss >= kMinSafeSquares && ss <= std::numeric_limits<float>::max())) return false;
  const float inv = ss > 0.0f ? 1.0f / std::sqrt(ss) : 0.0f;
  const VF vi = hn::Set(df, inv);
  write_row(
      df, out, dim, stream, [&](size_t i) { return hn::Mul(hn::LoadU(df, in + i), vi); },
      [&](size_t i) { return in[i] * inv; });
  return true;
}

bool LayerNormF32(const float* in, float* out, uint64_t dim, const float* gamma, const float* beta, float eps,
                  bool stream) {
  const DF df;
  // Centred about the first element s: x - s is exact for elements within a
  // factor 2 of s, so the centred values lose nothing to the size of the
  // mean, only to the row's spread (a row of 1000 + 1e-3 u keeps its
  // variance). A constant row centres to exact zeros: variance 0, output beta.
  const float s = in[0];
  const float ms = row_sum<false>(df, in, dim, s) / static_cast<float>(dim);  // mean - s
  // Centred second pass: no cancellation between E[x^2] and mean^2.
  const float sq = row_sum<true, true>(df, in, dim, ms, s);
  // Statistics out of f32 range (see NormalizeF32): the f64 path.
  if (!std::isfinite(ms) || !(sq >= kMinSafeSquares && sq <= std::numeric_limits<float>::max())) return false;
  const float var = sq / static_cast<float>(dim);
  const float denom = var + eps;
  const float rstd = denom > 0.0f ? 1.0f / std::sqrt(denom) : 0.0f;
  const VF vs = hn::Set(df, s), vm = hn::Set(df, ms), vr = hn::Set(df, rstd);
  write_row(
      df, out, dim, stream,
      [&](size_t i) {
        VF z = hn::Mul(hn::Sub(hn::Sub(hn::LoadU(df, in + i), vs), vm), vr);
        if (gamma) z = hn::Mul(z, hn::LoadU(df, gamma + i));
        if (beta) z = hn::Add(z, hn::LoadU(df, beta + i));
        return z;
      },
      [&](size_t i) {
        float z = ((in[i] - s) - ms) * rstd;
        if (gamma) z *= gamma[i];
        if (beta) z += beta[i];
        return z;
      });
  return true;
}

void LerpF32(const float* a, const float* b, float w, float* out, uint64_t dim, bool stream) {
  const DF df;
  const VF vw = hn::Set(df, w);
  write_row(
      df, out, dim, stream,
      [&](size_t i) {
        const VF va = hn::LoadU(df, a + i);
        return hn::MulAdd(vw, hn::Sub(hn::LoadU(df, b + i), va), va);
      },
      [&](size_t i) { return std::fma(w, b[i] - a[i], a[i]); });
}

// Blocks of whole vectors are tested without branches (the OR of the lane
// masks); only a block that holds a non-finite value is searched for it.
template <class U>
uint64_t first_exp_all_ones(const U* p, uint64_t n, U exp_mask) {
  const hn::ScalableTag<U> du;
  const size_t N = hn::Lanes(du);
  const auto vm = hn::Set(du, exp_mask);
  const uint64_t block = 16 * N;
  uint64_t i = 0;
  for (; i + block <= n; i += block) {
    auto hit = hn::Zero(du);
    for (uint64_t j = 0; j < block; j += N) {
      const auto e = hn::And(hn::LoadU(du, p + i + j), vm);
      hit = hn::Or(hit, hn::VecFromMask(du, hn::Eq(e, vm)));
    }
    if (!hn::AllFalse(du, hn::MaskFromVec(hit)))
      for (uint64_t j = i; j < i + block; ++j)
        if ((p[j] & exp_mask) == exp_mask) return j;
  }
  for (; i < n; ++i)
    if ((p[i] & exp_mask) == exp_mask) return i;
  return n;
}

uint64_t FirstNonFinite(const void* data, DType t, uint64_t n) {
  switch (t) {
    case DType::f16: return first_exp_all_ones<uint16_t>(static_cast<const uint16_t*>(data), n, 0x7c00u);
    case DType::bf16: return first_exp_all_ones<uint16_t>(static_cast<const uint16_t*>(data), n, 0x7f80u);
    case DType::f64: return first_exp_all_ones<uint64_t>(static_cast<const uint64_t*>(data), n, 0x7ff0000000000000ull);
    default: return first_exp_all_ones<uint32_t>(static_cast<const uint32_t*>(data), n, 0x7f800000u);
  }
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

// Activation terms of n consecutive slots: w_imp * imp + (w_rec * rec +
// bias) with rec = 2^(-(now - t) * inv_hl) (1 for t >= now). The age is
// taken in f64, the power as e^(x ln 2) in f32 (Highway's Exp, 1 ulp).
void ActivationExtras(const double* times, const float* imp, const float* bias, uint64_t n, double now, double inv_hl,
                      float w_rec, float w_imp, float* out) {
  const DF df;
  const size_t L = hn::Lanes(df);
  HWY_ALIGN float x[hn::MaxLanes(DF())];
  HWY_ALIGN float b[hn::MaxLanes(DF())];
  HWY_ALIGN float im[hn::MaxLanes(DF())];
  const VF ln2 = hn::Set(df, 0.693147180559945309f), wr = hn::Set(df, w_rec), wi = hn::Set(df, w_imp);
  for (uint64_t i = 0; i < n; i += L) {
    const size_t m = static_cast<size_t>(std::min<uint64_t>(L, n - i));
    for (size_t j = 0; j < L; ++j) {
      const double age = j < m ? now - times[i + j] : 0.0;
      // inv_hl = 0 (infinite half-life): no decay even for an infinite age.
      x[j] = age > 0.0 && inv_hl != 0.0 ? static_cast<float>(-age * inv_hl) : 0.0f;
      b[j] = j < m && bias ? bias[i + j] : 0.0f;
      im[j] = j < m ? imp[i + j] : 0.0f;
    }
    const VF rec = hn::Exp(df, hn::Mul(hn::Load(df, x), ln2));
    const VF e = hn::MulAdd(wi, hn::Load(df, im), hn::MulAdd(wr, rec, hn::Load(df, b)));
    if (m == L) {
      hn::StoreU(e, df, out + i);
    } else {
      hn::Store(e, df, x);
      std::memcpy(out + i, x, m * sizeof(float));
    }
  }
}

}  // namespace mnemo::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mnemo::cpu::simd {

HWY_EXPORT(ScoreRows);
HWY_EXPORT(ScoreRowPtrs);
HWY_EXPORT(ScoreSlots);
HWY_EXPORT(ActivationExtras);
HWY_EXPORT(PairDot);
HWY_EXPORT(PairL2sq);
HWY_EXPORT(SumSq);
HWY_EXPORT(Widen);
HWY_EXPORT(NormalizeF32);
HWY_EXPORT(LayerNormF32);
HWY_EXPORT(LerpF32);
HWY_EXPORT(FirstNonFinite);
HWY_EXPORT(TargetNameImpl);

void score_rows(const float* queries, uint64_t m, const void* rows, DType t, uint64_t dim, uint64_t n, bool l2,
                float* out) {
  HWY_DYNAMIC_DISPATCH(ScoreRows)(queries, m, rows, t, dim, n, l2, out);
}
void score_slots(const float* queries, uint64_t m, const void* rows, DType t, uint64_t dim, const uint32_t* slots,
                 uint64_t n, uint64_t listed, bool l2, float* out) {
  HWY_DYNAMIC_DISPATCH(ScoreSlots)(queries, m, rows, t, dim, slots, n, listed, l2, out);
}
void score_row_ptrs(const float* const* queries, uint64_t m, const void* row, DType t, uint64_t dim, bool l2,
                    float* out) {
  HWY_DYNAMIC_DISPATCH(ScoreRowPtrs)(queries, m, row, t, dim, l2, out);
}
void pair_dot(const void* a, const void* b, DType t, uint64_t dim, float* dot, float* b_sumsq) {
  HWY_DYNAMIC_DISPATCH(PairDot)(a, b, t, dim, dot, b_sumsq);
}
float pair_l2sq(const void* a, const void* b, DType t, uint64_t dim) {
  return HWY_DYNAMIC_DISPATCH(PairL2sq)(a, b, t, dim);
}
float sumsq(const void* a, DType t, uint64_t dim) { return HWY_DYNAMIC_DISPATCH(SumSq)(a, t, dim); }
void widen(const void* in, DType t, uint64_t n, float* out) { HWY_DYNAMIC_DISPATCH(Widen)(in, t, n, out); }
bool normalize_f32(const float* in, float* out, uint64_t dim, bool stream) {
  return HWY_DYNAMIC_DISPATCH(NormalizeF32)(in, out, dim, stream);
}
bool layer_norm_f32(const float* in, float* out, uint64_t dim, const float* gamma, const float* beta, float eps,
                    bool stream) {
  return HWY_DYNAMIC_DISPATCH(LayerNormF32)(in, out, dim, gamma, beta, eps, stream);
}
void lerp_f32(const float* a, const float* b, float w, float* out, uint64_t dim, bool stream) {
  HWY_DYNAMIC_DISPATCH(LerpF32)(a, b, w, out, dim, stream);
}
uint64_t first_non_finite(const void* data, DType t, uint64_t n) {
  return HWY_DYNAMIC_DISPATCH(FirstNonFinite)(data, t, n);
}
void stream_fence() { hwy::FlushStream(); }
void activation_extras(const double* times, const float* imp, const float* bias, uint64_t n, double now, double inv_hl,
                       float w_rec, float w_imp, float* out) {
  HWY_DYNAMIC_DISPATCH(ActivationExtras)(times, imp, bias, n, now, inv_hl, w_rec, w_imp, out);
}

const char* target_name() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

}  // namespace mnemo::cpu::simd
#endif
