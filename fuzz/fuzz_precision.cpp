// Precision divergence: random shapes, storage dtypes, metrics and values
// drawn to hurt (huge and tiny magnitudes, subnormals, cancellation, f16 and
// bf16 edge values, near-ties), through similarity, store search and pair
// scoring on every backend that loads, each against the float64 reference
// over the stored (rounded) values, and CPU against GPU on the same input;
// and resampling with times and samples drawn the same way, against the
// header's interpolation rule.
//
// Store search also runs with activation ranking, plain and min-max
// normalised, over last-access times spanning decades, seconds, equal and
// future ones and half-lives from a second to infinity, against the float64
// reference of the same formula.
//
// What is checked is the numerical contract of mnemo.h:
//   cosine |err| <= 1e-5; dot |err| <= 1e-5 * |x| * |y| (1e-5 for unit
//   vectors); squared L2 |err| <= 1e-5 * ref + 2^-126 (relative, down to the
//   f32 normal range); FAST similarity and pair scores (before re-scoring)
//   2e-3 on the same scales; search scores always to the EXACT bounds;
// for rows whose L2 norm lies in the contract's range [2^-50, 2^50] (or is
// zero). Outside that range only what the header promises everywhere is
// checked: no crash, a defined status, no NaN in search results.
#include <cmath>
#include <limits>
#include <string>

#include "fuzz_support.h"
#include "reference.h"
#include "resample_oracle.h"
#include "topk_oracle.h"

namespace {

constexpr double kNormLo = 0x1p-50, kNormHi = 0x1p50;

// ---- inputs --------------------------------------------------------------------

int pick_exponent(FuzzedDataProvider& fdp) {
  const int r = fdp.ConsumeIntegralInRange<int>(0, 9);
  if (r < 5) return 0;
  if (r < 7) return fdp.ConsumeIntegralInRange<int>(-20, 20);
  static const int edges[] = {-149, -140, -126, -100, -64, -52, -50, -48, 48, 50, 52, 64, 100, 126, 127};
  return edges[fdp.ConsumeIntegralInRange<size_t>(0, sizeof edges / sizeof edges[0] - 1)];
}

// One row of `dim` floats; `base` (may be empty) lets rows be near-copies of
// one another (near-ties, cancellation).
std::vector<float> gen_row(FuzzedDataProvider& fdp, size_t dim, const std::vector<float>& base) {
  std::vector<float> r(dim, 0.0f);
  const int pattern = fdp.ConsumeIntegralInRange<int>(0, base.empty() ? 3 : 7);
  const float scale = std::ldexp(1.0f, pick_exponent(fdp));
  switch (pattern) {
    case 0:
      for (auto& v : r) v = fdp.ConsumeFloatingPointInRange<float>(-1.0f, 1.0f) * scale;
      break;
    case 1:
      for (auto& v : r) v = fz::hurt_float(fdp);
      break;
    case 2: {  // sparse: a few values, the rest zero
      const int n = fdp.ConsumeIntegralInRange<int>(0, 3);
      for (int i = 0; i < n; ++i) r[fdp.ConsumeIntegralInRange<size_t>(0, dim - 1)] = fz::hurt_float(fdp);
      break;
    }
    case 3: {  // one value everywhere
      const float c = fdp.ConsumeFloatingPointInRange<float>(-1.0f, 1.0f) * scale;
      for (auto& v : r) v = c;
      break;
    }
    case 4:  // base nudged by a few ulps: near-ties
      for (size_t i = 0; i < dim; ++i) {
        float v = base[i];
        const int steps = fdp.ConsumeIntegralInRange<int>(-2, 2);
        for (int s = 0; s < std::abs(steps); ++s)
          v = std::nextafter(v, steps > 0 ? std::numeric_limits<float>::max() : -std::numeric_limits<float>::max());
        r[i] = v;
      }
      break;
    case 5:  // base with signs flipped: cancellation in the dot product
      for (size_t i = 0; i < dim; ++i) r[i] = fdp.ConsumeBool() ? -base[i] : base[i];
      break;
    case 6:  // base plus a tiny difference: cancellation in squared L2
      for (size_t i = 0; i < dim; ++i)
        r[i] = base[i] + fdp.ConsumeFloatingPointInRange<float>(-1.0f, 1.0f) * std::ldexp(std::fabs(base[i]), -16);
      break;
    default:  // base scaled: the same direction at another magnitude
      for (size_t i = 0; i < dim; ++i) r[i] = base[i] * scale;
      break;
  }
  for (auto& v : r)
    if (!std::isfinite(v)) v = std::copysign(std::numeric_limits<float>::max(), v);
  return r;
}

size_t pick_dim(FuzzedDataProvider& fdp) {
  static const size_t dims[] = {1,  2,  3,  4,   5,   7,   8,   15,  16,  17,  31,   32,   33,   63,
                                64, 65, 96, 127, 128, 129, 255, 384, 512, 768, 1024, 1536, 2048, 4096};
  if (fdp.ConsumeIntegralInRange<int>(0, 3)) return fdp.ConsumeIntegralInRange<size_t>(1, 40);
  return dims[fdp.ConsumeIntegralInRange<size_t>(0, sizeof dims / sizeof dims[0] - 1)];
}

// A matrix stored in `dtype`, with the float64 values actually stored.
struct Mat {
  int32_t dtype;
  size_t rows, dim;
  fz::Buf raw;
  std::vector<double> val;
  std::vector<double> norm;  // float64 L2 norm of each stored row
  bool finite = true;
  Mat(int32_t dt, size_t r, size_t d) : dtype(dt), rows(r), dim(d), raw(r * d * fz::dtype_bytes(dt)), val(r * d) {}
  void set_row(size_t i, const std::vector<float>& v) {
    for (size_t j = 0; j < dim; ++j) {
      fz::put_elem(raw.data(), dtype, i * dim + j, v[j]);
      val[i * dim + j] = fz::get_elem(raw.data(), dtype, i * dim + j);
      finite = finite && std::isfinite(val[i * dim + j]);
    }
  }
  void finish() {
    norm.assign(rows, 0.0);
    for (size_t i = 0; i < rows; ++i) {
      long double s = 0;
      for (size_t j = 0; j < dim; ++j) s += static_cast<long double>(val[i * dim + j]) * val[i * dim + j];
      norm[i] = static_cast<double>(std::sqrt(s));
    }
  }
  const double* row(size_t i) const { return val.data() + i * dim; }
  bool in_range(size_t i) const { return norm[i] == 0.0 || (norm[i] >= kNormLo && norm[i] <= kNormHi); }
};

// ---- the bound -----------------------------------------------------------------

struct Bound {
  double ref, tol;
};

// Reference score and bound for rows x, y with norms nx, ny; `relax` is the
// FAST bound before re-scoring (2e-3) or 1e-5.
Bound bound(int32_t metric, const double* x, const double* y, size_t dim, double nx, double ny, double relax) {
  const double s = ref::score(metric, x, y, dim);
  switch (metric) {
    case MNEMO_METRIC_COSINE: return {s, relax};
    case MNEMO_METRIC_DOT: return {s, relax * nx * ny + 0x1p-149};
    default: return {s, relax == 1e-5 ? 1e-5 * s + 0x1p-126 : relax * (nx * nx + ny * ny) + 0x1p-126};
  }
}

std::string describe(const char* what, const fz::Backend& b, int32_t metric, int32_t dtype, size_t dim) {
  return std::string(what) + " on " + b.name + " (metric " + std::to_string(metric) + ", dtype " +
         std::to_string(dtype) + ", dim " + std::to_string(dim) + ")";
}

// ---- operations ------------------------------------------------------------------

// Similarity scores of every backend; returns them for the CPU/GPU comparison.
void run_similarity(FuzzedDataProvider& fdp, const Mat& q, const Mat& t, int32_t metric) {
  const size_t nq = q.rows, n = t.rows, dim = q.dim;
  std::vector<std::vector<float>> results;
  for (const fz::Backend& b : fz::backends()) {
    fz::Buf scores(nq * n * 4, 0xFF);  // NaN bytes: an unwritten score shows
    const mnemo_status st = mnemo_similarity(b.rt, metric, reinterpret_cast<const float*>(q.raw.data()), nq,
                                             t.raw.data(), t.dtype, n, dim, scores.as<float>());
    const std::string ctx = describe("similarity", b, metric, t.dtype, dim);
    if (!q.finite || !t.finite) {
      FZ_CHECK(st == MNEMO_E_NON_FINITE, ctx + ": non-finite input gave " + fz::status_text(st));
      return;
    }
    FZ_CHECK(st == MNEMO_OK, ctx + ": " + fz::status_text(st));
    const double relax = b.fast ? 2e-3 : 1e-5;
    for (size_t i = 0; i < nq; ++i)
      for (size_t j = 0; j < n; ++j) {
        if (!q.in_range(i) || !t.in_range(j)) continue;
        const Bound bd = bound(metric, q.row(i), t.row(j), dim, q.norm[i], t.norm[j], relax);
        const float got = scores.as<float>()[i * n + j];
        FZ_CHECK(std::fabs(got - bd.ref) <= bd.tol, ctx + ": query " + std::to_string(i) + " target " +
                                                        std::to_string(j) + " score " + std::to_string(got) +
                                                        ", reference " + std::to_string(bd.ref) + " (bound " +
                                                        std::to_string(bd.tol) + ")");
      }
    results.emplace_back(scores.as<float>(), scores.as<float>() + nq * n);
  }
  // CPU against each GPU run on the same input: within both bounds.
  for (size_t r = 1; r < results.size(); ++r)
    for (size_t i = 0; i < nq; ++i)
      for (size_t j = 0; j < n; ++j) {
        if (!q.in_range(i) || !t.in_range(j)) continue;
        const Bound bd =
            bound(metric, q.row(i), t.row(j), dim, q.norm[i], t.norm[j], fz::backends()[r].fast ? 2e-3 : 1e-5);
        const double cpu = results[0][i * n + j], gpu = results[r][i * n + j];
        FZ_CHECK(std::fabs(cpu - gpu) <= 2 * bd.tol, std::string("similarity: cpu ") + std::to_string(cpu) + " vs " +
                                                         fz::backends()[r].name + " " + std::to_string(gpu));
      }
  (void)fdp;
}

// Activation options and per-memory metadata of a search: the mode drawn
// before the rows (an input that runs out still gets it), the rest after the
// plain search's inputs.
struct Activation {
  int mode = 0;  // 0 off, 1 plain, 2 normalised
  mnemo_search_options opts{};
  fz::Buf times, importance;
};

Activation gen_activation(FuzzedDataProvider& fdp, size_t n, int mode) {
  Activation a;
  a.mode = mode;
  if (a.mode == 0) return a;
  constexpr double kNow = 1.7e9;
  a.opts = mnemo_search_options_default();
  a.opts.activation = 1;
  a.opts.normalize = a.mode == 2 ? 1 : 0;
  // Weights under which every term may move the ranking.
  auto weight = [&fdp](float scale) {
    return fdp.ConsumeIntegralInRange<int>(0, 3) ? fdp.ConsumeFloatingPointInRange<float>(-scale, scale)
                                                 : static_cast<float>(fdp.ConsumeIntegralInRange<int>(-4, 4)) / 2.0f;
  };
  a.opts.w_relevance = fdp.ConsumeIntegralInRange<int>(0, 3) ? 1.0f : weight(4.0f);
  a.opts.w_recency = weight(2.0f);
  a.opts.w_importance = weight(a.mode == 2 ? 2.0f : 0.2f);
  static const double half_lives[] = {1.0,    60.0,   3600.0, 86400.0,
                                      3.15e7, 1e-300, 1e300,  std::numeric_limits<double>::infinity()};
  a.opts.half_life = half_lives[fdp.ConsumeIntegralInRange<size_t>(0, 7)];
  a.opts.now = kNow + (fdp.ConsumeBool() ? 0.0 : fdp.ConsumeFloatingPointInRange<double>(-1e6, 1e6));
  a.times = fz::Buf(n * 8);
  a.importance = fz::Buf(n * 4);
  for (size_t i = 0; i < n; ++i) {
    // Decades, hours and seconds back, the same time as another, or ahead.
    double t;
    switch (fdp.ConsumeIntegralInRange<int>(0, 5)) {
      case 0: t = kNow - 3e9 * fdp.ConsumeProbability<double>(); break;
      case 1: t = kNow - 4e4 * fdp.ConsumeProbability<double>(); break;
      case 2: t = std::floor(kNow - 60.0 * fdp.ConsumeProbability<double>()); break;
      case 3: t = i > 0 ? a.times.as<double>()[fdp.ConsumeIntegralInRange<size_t>(0, i - 1)] : kNow; break;
      case 4: t = kNow + 600.0 * fdp.ConsumeProbability<double>(); break;
      default: t = a.opts.now - std::ldexp(1.0, fdp.ConsumeIntegralInRange<int>(-20, 30)); break;
    }
    a.times.as<double>()[i] = t;
    a.importance.as<float>()[i] = fdp.ConsumeIntegralInRange<int>(0, 3)
                                      ? fdp.ConsumeFloatingPointInRange<float>(0.0f, 10.0f)
                                      : static_cast<float>(fdp.ConsumeIntegralInRange<int>(0, 4));
  }
  return a;
}

// Activation rows against the float64 reference of the same formula where
// every row lies in the contract's range; else what holds everywhere.
void check_activation(Activation& act, const Mat& q, const Mat& t, int32_t metric, uint64_t k, const float* biases,
                      const fz::Backend& b, bool all_in_range, fz::Buf& ids, fz::Buf& scores, const std::string& ctx) {
  const size_t nq = q.rows, n = t.rows, dim = q.dim;
  const mnemo_search_options& o = act.opts;
  const std::string what = ctx + (o.normalize ? ", normalised activation" : ", activation");
  const bool hi = ref::higher_is_better(metric);
  for (size_t i = 0; i < nq; ++i) {
    const uint64_t* row_ids = ids.as<uint64_t>() + i * k;
    const float* row_sc = scores.as<float>() + i * k;
    if (!all_in_range) {
      uint64_t j = 0;
      std::vector<bool> seen(n, false);
      for (; j < k && row_ids[j] != MNEMO_NO_ID; ++j) {
        const uint64_t id = row_ids[j];
        FZ_CHECK(id % 3 == 1 && id / 3 < n && !seen[id / 3], what + ": bad or repeated id " + std::to_string(id));
        seen[id / 3] = true;
        FZ_CHECK(!std::isnan(row_sc[j]), what + ": NaN score returned");
      }
      for (; j < k; ++j) FZ_CHECK(row_ids[j] == MNEMO_NO_ID && std::isnan(row_sc[j]), what + ": bad padding");
      continue;
    }
    std::vector<fz::ActTerm> terms;
    double select = 0;
    for (size_t j = 0; j < n; ++j) {
      const Bound bd = bound(metric, q.row(i), t.row(j), dim, q.norm[i], t.norm[j], 1e-5);
      if (b.fast) select = std::max(select, bound(metric, q.row(i), t.row(j), dim, q.norm[i], t.norm[j], 2e-3).tol);
      terms.push_back({j * 3 + 1, hi ? bd.ref : -bd.ref, bd.tol, act.times.as<double>()[j],
                       act.importance.as<float>()[j], o.apply_bias ? biases[j] : 0.0});
    }
    fz::ActParams p;
    p.w_rel = o.w_relevance, p.w_rec = o.w_recency, p.w_imp = o.w_importance;
    p.half_life = o.half_life, p.now = o.now, p.normalize = o.normalize == 1;
    // FAST candidate finding errs by the relevance weight times its bound;
    // after normalisation by up to the whole relevance term.
    select = o.normalize ? (b.fast ? std::fabs(p.w_rel) : 0.0) : std::fabs(p.w_rel) * select;
    const std::string why = fz::check_topk(metric, fz::activation_candidates(terms, p, hi), k, row_ids, row_sc, select);
    FZ_CHECK(why.empty(), what + ", query " + std::to_string(i) + ", k " + std::to_string(k) + ": " + why);
  }
}

void run_search(FuzzedDataProvider& fdp, const Mat& q, const Mat& t, int32_t metric, int act_mode) {
  const size_t nq = q.rows, n = t.rows, dim = q.dim;
  const uint64_t k = fdp.ConsumeIntegralInRange<uint64_t>(1, n + 2);
  const bool apply_bias = fdp.ConsumeBool();
  fz::Buf ids(n * 8), biases(n * 4);
  for (size_t i = 0; i < n; ++i) {
    ids.as<uint64_t>()[i] = i * 3 + 1;
    biases.as<float>()[i] = static_cast<float>(fdp.ConsumeIntegralInRange<int>(-8, 8)) / 4.0f;
  }
  Activation act = gen_activation(fdp, n, act_mode);
  act.opts.apply_bias = apply_bias ? 1 : 0;
  bool all_in_range = true;
  for (size_t i = 0; i < n; ++i) all_in_range = all_in_range && t.in_range(i);
  for (size_t i = 0; i < nq; ++i) all_in_range = all_in_range && q.in_range(i);
  for (const fz::Backend& b : fz::backends()) {
    const std::string ctx = describe("search", b, metric, t.dtype, dim);
    mnemo_store* s = nullptr;
    mnemo_status st = mnemo_store_create(b.rt, dim, t.dtype, metric, &s);
    FZ_CHECK(st == MNEMO_OK, ctx + ": create " + fz::status_text(st));
    st = mnemo_store_add(s, ids.as<uint64_t>(), t.raw.data(), t.dtype, n);
    if (!t.finite) {
      FZ_CHECK(st == MNEMO_E_NON_FINITE, ctx + ": add of non-finite rows gave " + fz::status_text(st));
      mnemo_store_destroy(s);
      return;
    }
    FZ_CHECK(st == MNEMO_OK, ctx + ": add " + fz::status_text(st));
    st = mnemo_store_set_bias(s, ids.as<uint64_t>(), biases.as<float>(), n);
    FZ_CHECK(st == MNEMO_OK, ctx + ": set_bias " + fz::status_text(st));
    mnemo_search_options o = mnemo_search_options_default();
    o.apply_bias = apply_bias ? 1 : 0;
    fz::Buf out_ids(nq * k * 8), out_sc(nq * k * 4);
    st = mnemo_store_search(s, reinterpret_cast<const float*>(q.raw.data()), nq, k, &o, out_ids.as<uint64_t>(),
                            out_sc.as<float>());
    fz::Buf act_ids(nq * k * 8), act_sc(nq * k * 4);
    if (act.mode != 0 && q.finite) {
      FZ_CHECK(mnemo_store_set_times(s, ids.as<uint64_t>(), act.times.as<double>(), n) == MNEMO_OK,
               ctx + ": set_times");
      FZ_CHECK(mnemo_store_set_importance(s, ids.as<uint64_t>(), act.importance.as<float>(), n) == MNEMO_OK,
               ctx + ": set_importance");
      const mnemo_status sa = mnemo_store_search(s, reinterpret_cast<const float*>(q.raw.data()), nq, k, &act.opts,
                                                 act_ids.as<uint64_t>(), act_sc.as<float>());
      FZ_CHECK(sa == MNEMO_OK, ctx + ": activation search " + fz::status_text(sa));
    }
    mnemo_store_destroy(s);
    if (!q.finite) {
      FZ_CHECK(st == MNEMO_E_NON_FINITE, ctx + ": non-finite query gave " + fz::status_text(st));
      return;
    }
    FZ_CHECK(st == MNEMO_OK, ctx + ": " + fz::status_text(st));
    const bool hi = ref::higher_is_better(metric);
    for (size_t i = 0; i < nq; ++i) {
      const uint64_t* row_ids = out_ids.as<uint64_t>() + i * k;
      const float* row_sc = out_sc.as<float>() + i * k;
      if (!all_in_range) {
        // Outside the range: valid distinct ids, never a NaN score, padding last.
        uint64_t j = 0;
        std::vector<bool> seen(n, false);
        for (; j < k && row_ids[j] != MNEMO_NO_ID; ++j) {
          const uint64_t id = row_ids[j];
          FZ_CHECK(id % 3 == 1 && id / 3 < n && !seen[id / 3], ctx + ": bad or repeated id " + std::to_string(id));
          seen[id / 3] = true;
          FZ_CHECK(!std::isnan(row_sc[j]), ctx + ": NaN score returned");
        }
        for (; j < k; ++j) FZ_CHECK(row_ids[j] == MNEMO_NO_ID && std::isnan(row_sc[j]), ctx + ": bad padding");
        continue;
      }
      std::vector<ref::Candidate> cands;
      double select = 0;
      for (size_t j = 0; j < n; ++j) {
        Bound bd = bound(metric, q.row(i), t.row(j), dim, q.norm[i], t.norm[j], 1e-5);
        if (b.fast) select = std::max(select, bound(metric, q.row(i), t.row(j), dim, q.norm[i], t.norm[j], 2e-3).tol);
        double sc = bd.ref;
        if (apply_bias) {
          const double bias = biases.as<float>()[j];
          sc = hi ? sc + bias : sc - bias;
          bd.tol += std::ldexp(std::fabs(bd.ref) + std::fabs(bias), -22);
        }
        cands.push_back({j * 3 + 1, sc, bd.tol});
      }
      const std::string why = fz::check_topk(metric, cands, k, row_ids, row_sc, select);
      FZ_CHECK(why.empty(), ctx + ", query " + std::to_string(i) + ", k " + std::to_string(k) + ": " + why);
    }
    if (act.mode != 0)
      check_activation(act, q, t, metric, k, biases.as<float>(), b, all_in_range, act_ids, act_sc, ctx);
  }
}

void run_pairs(FuzzedDataProvider& fdp, const Mat& t, int32_t metric) {
  const size_t n = t.rows, dim = t.dim;
  const size_t np = fdp.ConsumeIntegralInRange<size_t>(1, 24);
  fz::Buf src(np * 4), tgt(np * 4);
  for (size_t p = 0; p < np; ++p) {
    src.as<uint32_t>()[p] = fdp.ConsumeIntegralInRange<uint32_t>(0, static_cast<uint32_t>(n - 1));
    tgt.as<uint32_t>()[p] = fdp.ConsumeIntegralInRange<uint32_t>(0, static_cast<uint32_t>(n - 1));
  }
  std::vector<std::vector<float>> results;
  for (const fz::Backend& b : fz::backends()) {
    const std::string ctx = describe("pairs", b, metric, t.dtype, dim);
    fz::Buf scores(np * 4, 0xFF);
    const mnemo_status st = mnemo_score_pairs(b.rt, metric, t.raw.data(), t.dtype, n, dim, src.data(), tgt.data(),
                                              MNEMO_DTYPE_U32, np, scores.as<float>());
    if (!t.finite) {
      FZ_CHECK(st == MNEMO_E_NON_FINITE, ctx + ": non-finite table gave " + fz::status_text(st));
      return;
    }
    FZ_CHECK(st == MNEMO_OK, ctx + ": " + fz::status_text(st));
    const double relax = b.fast ? 2e-3 : 1e-5;
    for (size_t p = 0; p < np; ++p) {
      const uint32_t i = src.as<uint32_t>()[p], j = tgt.as<uint32_t>()[p];
      if (!t.in_range(i) || !t.in_range(j)) continue;
      const Bound bd = bound(metric, t.row(i), t.row(j), dim, t.norm[i], t.norm[j], relax);
      const float got = scores.as<float>()[p];
      FZ_CHECK(std::fabs(got - bd.ref) <= bd.tol, ctx + ": pair " + std::to_string(p) + " score " +
                                                      std::to_string(got) + ", reference " + std::to_string(bd.ref) +
                                                      " (bound " + std::to_string(bd.tol) + ")");
    }
    results.emplace_back(scores.as<float>(), scores.as<float>() + np);
  }
  for (size_t r = 1; r < results.size(); ++r)
    for (size_t p = 0; p < np; ++p) {
      const uint32_t i = src.as<uint32_t>()[p], j = tgt.as<uint32_t>()[p];
      if (!t.in_range(i) || !t.in_range(j)) continue;
      const Bound bd =
          bound(metric, t.row(i), t.row(j), dim, t.norm[i], t.norm[j], fz::backends()[r].fast ? 2e-3 : 1e-5);
      FZ_CHECK(std::fabs(results[0][p] - results[r][p]) <= 2 * bd.tol,
               std::string("pairs: cpu ") + std::to_string(results[0][p]) + " vs " + fz::backends()[r].name + " " +
                   std::to_string(results[r][p]));
    }
}

// Resampling: sorted source times with repeats, tiny and huge gaps and
// offsets; targets on, between and beyond them; samples drawn to hurt.
void run_resample(FuzzedDataProvider& fdp, int32_t ddt) {
  const int32_t tdt = fdp.ConsumeBool() ? MNEMO_DTYPE_F32 : MNEMO_DTYPE_F64;
  const bool big = fdp.ConsumeIntegralInRange<int>(0, 15) == 0;
  const uint64_t batch = fdp.ConsumeIntegralInRange<uint64_t>(1, big ? 64 : 4);
  const uint64_t n_src = fdp.ConsumeIntegralInRange<uint64_t>(1, big ? 300 : 12);
  const uint64_t n_tgt = fdp.ConsumeIntegralInRange<uint64_t>(1, big ? 300 : 12);
  const uint64_t dim =
      fdp.ConsumeIntegralInRange<int>(0, 3) ? fdp.ConsumeIntegralInRange<uint64_t>(1, 9) : pick_dim(fdp);
  if (batch * (n_src + n_tgt) * dim > (1u << 22)) return;
  const size_t esz = fz::dtype_bytes(ddt), tsz = fz::dtype_bytes(tdt);
  fz::Buf st(batch * n_src * tsz), tt(batch * n_tgt * tsz), dat(batch * n_src * dim * esz);
  std::vector<double> stv(batch * n_src), ttv(batch * n_tgt);
  auto put_time = [&](fz::Buf& buf, std::vector<double>& v, size_t i, double t) {
    if (tdt == MNEMO_DTYPE_F32) {
      float f = static_cast<float>(t);
      if (!std::isfinite(f)) f = std::copysign(std::numeric_limits<float>::max(), f);
      std::memcpy(buf.data() + 4 * i, &f, 4);
      v[i] = f;
    } else {
      std::memcpy(buf.data() + 8 * i, &t, 8);
      v[i] = t;
    }
  };
  const double top = tdt == MNEMO_DTYPE_F32 ? std::numeric_limits<float>::max() : std::numeric_limits<double>::max();
  for (uint64_t b = 0; b < batch; ++b) {
    // Starts low in the range often, so that a big gap crosses zero and the
    // difference of two times overflows the time dtype.
    const int start = fdp.ConsumeIntegralInRange<int>(0, 2);
    double t = start == 0 ? fz::hurt_float(fdp) : start == 1 ? -top * fdp.ConsumeProbability<double>() : -0.75 * top;
    std::vector<double> row;
    for (uint64_t i = 0; i < n_src; ++i) {
      if (i > 0) {
        const int g = fdp.ConsumeIntegralInRange<int>(0, 6);
        // The scale drawn before the fraction, in statements of their own:
        // the operands of * are unsequenced, and the replay's compiler could
        // read the input in another order than the fuzzer's (clang) did.
        auto scaled_fraction = [&fdp] {
          const double scale = std::ldexp(1.0, pick_exponent(fdp));
          return scale * fdp.ConsumeProbability<double>();
        };
        const double gap = g == 0   ? 0.0
                           : g == 1 ? scaled_fraction()
                           : g == 2 ? top * (2 * fdp.ConsumeProbability<double>())
                                    : fdp.ConsumeProbability<double>();
        t = std::min(g == 6 ? t + 0.75 * top + 0.75 * top : t + gap, top);
        if (std::isnan(t)) t = top;
      }
      put_time(st, stv, b * n_src + i, t);
      t = stv[b * n_src + i];  // the value as stored: rounding keeps the row sorted
      row.push_back(t);
    }
    for (uint64_t j = 0; j < n_tgt; ++j) {
      const int k = fdp.ConsumeIntegralInRange<int>(0, 4);
      const size_t i = fdp.ConsumeIntegralInRange<size_t>(0, n_src - 1);
      double x;
      if (k == 0)
        x = row[i];
      else if (k == 1 && i + 1 < n_src) {
        const double p = fdp.ConsumeProbability<double>();
        x = row[i] * (1 - p) + row[i + 1] * p;  // no difference: it may overflow
      } else if (k == 2)
        x = fz::hurt_float(fdp);
      else if (k == 3)
        x = (fdp.ConsumeBool() ? -1 : 1) * top * fdp.ConsumeProbability<double>();
      else
        x = std::nextafter(row[i], fdp.ConsumeBool() ? top : -top);
      if (!std::isfinite(x)) x = row[i];
      put_time(tt, ttv, b * n_tgt + j, x);
    }
  }
  for (uint64_t i = 0; i < batch * n_src * dim; ++i) {
    fz::put_elem(dat.data(), ddt, i, fz::hurt_float(fdp));
    if (!std::isfinite(fz::get_elem(dat.data(), ddt, i))) fz::put_elem(dat.data(), ddt, i, 0.0f);
  }
  fz::Buf src_len(batch * 8), tgt_len(batch * 8);
  std::vector<uint64_t> sl, tl;
  mnemo_resample_options o = mnemo_resample_options_default();
  if (fdp.ConsumeBool()) {
    for (uint64_t b = 0; b < batch; ++b) sl.push_back(fdp.ConsumeIntegralInRange<uint64_t>(1, n_src));
    std::memcpy(src_len.data(), sl.data(), batch * 8);
    o.src_lengths = src_len.as<uint64_t>();
  }
  if (fdp.ConsumeBool()) {
    for (uint64_t b = 0; b < batch; ++b) tl.push_back(fdp.ConsumeIntegralInRange<uint64_t>(0, n_tgt));
    std::memcpy(tgt_len.data(), tl.data(), batch * 8);
    o.tgt_lengths = tgt_len.as<uint64_t>();
  }
  for (const fz::Backend& be : fz::backends()) {
    const std::string ctx = std::string("resample on ") + be.name + " (data dtype " + std::to_string(ddt) +
                            ", time dtype " + std::to_string(tdt) + ", dim " + std::to_string(dim) + "): ";
    fz::Buf out(batch * n_tgt * dim * esz, 0xFF);
    const mnemo_status s =
        mnemo_resample(be.rt, dat.data(), ddt, batch, n_src, dim, st.data(), tt.data(), tdt, n_tgt, &o, out.data());
    FZ_CHECK(s == MNEMO_OK, ctx + fz::status_text(s));
    const std::string why = fz::check_resample(stv, ttv, dat.data(), out.data(), ddt, batch, n_src, dim, n_tgt, sl, tl);
    FZ_CHECK(why.empty(), ctx + why);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  const int op = fdp.ConsumeIntegralInRange<int>(0, 3);
  const int32_t metric = fdp.ConsumeIntegralInRange<int32_t>(MNEMO_METRIC_COSINE, MNEMO_METRIC_L2SQ);
  const int32_t dtype = fdp.ConsumeIntegralInRange<int32_t>(MNEMO_DTYPE_F32, MNEMO_DTYPE_BF16);
  if (op == 3) {
    run_resample(fdp, dtype);
    return 0;
  }
  // Search: plain only, or also with activation ranking (plain, normalised).
  const int act_mode = op == 1 ? fdp.ConsumeIntegralInRange<int>(0, 2) : 0;
  const size_t dim = pick_dim(fdp);
  // Mostly small shapes; sometimes enough rows and queries for the batched
  // paths of a GPU backend.
  const bool big = fdp.ConsumeIntegralInRange<int>(0, 15) == 0 && dim <= 256;
  const size_t n = big ? fdp.ConsumeIntegralInRange<size_t>(100, 700) : fdp.ConsumeIntegralInRange<size_t>(1, 24);
  const size_t nq = big ? fdp.ConsumeIntegralInRange<size_t>(1, 48) : fdp.ConsumeIntegralInRange<size_t>(1, 4);
  Mat t(dtype, n, dim), q(MNEMO_DTYPE_F32, nq, dim);
  const std::vector<float> base = gen_row(fdp, dim, {});
  for (size_t i = 0; i < n; ++i) t.set_row(i, fdp.ConsumeIntegralInRange<int>(0, 3) ? gen_row(fdp, dim, base) : base);
  for (size_t i = 0; i < nq; ++i) q.set_row(i, gen_row(fdp, dim, base));
  t.finish();
  q.finish();
  switch (op) {
    case 0: run_similarity(fdp, q, t, metric); break;
    case 1: run_search(fdp, q, t, metric, act_mode); break;
    default: run_pairs(fdp, t, metric); break;
  }
  return 0;
}
