// mnemo_score_pairs with random tables and index pairs (repeated, src = tgt,
// out of range, u32 and u64) and bad arguments: the status is one the
// arguments allow, an out-of-range index names its pair, a failure writes
// nothing, and each score matches the float64 reference in input order.
#include <cmath>

#include "fuzz_support.h"
#include "reference.h"

namespace {

constexpr uint64_t kHuge = uint64_t{1} << 62;

bool names_number(const std::string& text, uint64_t v) {
  const std::string n = std::to_string(v);
  for (size_t pos = text.find(n); pos != std::string::npos; pos = text.find(n, pos + 1)) {
    const bool left = pos == 0 || !std::isdigit(static_cast<unsigned char>(text[pos - 1]));
    const size_t end = pos + n.size();
    const bool right = end == text.size() || !std::isdigit(static_cast<unsigned char>(text[end]));
    if (left && right) return true;
  }
  return false;
}

float pick_value(FuzzedDataProvider& fdp) {
  const int r = fdp.ConsumeIntegralInRange<int>(0, 39);
  if (r < 20) return fdp.ConsumeFloatingPointInRange<float>(-2.0f, 2.0f);
  if (r < 30) return static_cast<float>(fdp.ConsumeIntegralInRange<int>(-16, 16)) / 4.0f;
  if (r < 39) return fz::hurt_float(fdp);
  return fz::maybe_non_finite(fdp, 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  mnemo_runtime* rt = fz::cpu_runtime(true);
  uint32_t mask = 0;
  auto err = [&mask](mnemo_status s) { mask |= 1u << s; };
  const int32_t metric = fz::pick_metric(fdp, 5);
  if (metric < MNEMO_METRIC_COSINE || metric > MNEMO_METRIC_L2SQ) err(MNEMO_E_INVALID_ARGUMENT);
  const int32_t tdt = fz::pick_dtype(fdp, {MNEMO_DTYPE_F32, MNEMO_DTYPE_F16, MNEMO_DTYPE_BF16}, 5);
  const int32_t idt = fz::pick_dtype(fdp, {MNEMO_DTYPE_U32, MNEMO_DTYPE_U64}, 5);
  const bool tdt_ok = tdt >= MNEMO_DTYPE_F32 && tdt <= MNEMO_DTYPE_BF16;
  const bool idt_ok = idt == MNEMO_DTYPE_U32 || idt == MNEMO_DTYPE_U64;
  if (!tdt_ok || !idt_ok) err(MNEMO_E_DTYPE);
  uint64_t n_items = fdp.ConsumeIntegralInRange<uint64_t>(0, 8);
  uint64_t dim = fdp.ConsumeIntegralInRange<uint64_t>(0, 9);
  uint64_t n_pairs = fdp.ConsumeIntegralInRange<uint64_t>(0, 12);
  if (dim == 0) err(MNEMO_E_INVALID_ARGUMENT);
  const int huge = fdp.ConsumeIntegralInRange<int>(0, 29);
  if (huge == 0) n_pairs = kHuge;
  if (huge == 1) n_items = kHuge;
  const bool huge_pairs = n_pairs == kHuge, huge_items = n_items == kHuge;
  if (huge_pairs || (huge_items && dim > 0)) err(MNEMO_E_OVERFLOW);
  const uint64_t N = huge_items ? 1 : n_items, P = huge_pairs ? 1 : n_pairs, D = std::max<uint64_t>(dim, 1);
  const size_t es = tdt_ok ? fz::dtype_bytes(tdt) : 4, is = idt_ok ? fz::dtype_bytes(idt) : 8;

  fz::Buf table(N * D * es), src(P * is), tgt(P * is), scores(P * 4);
  bool nonfin = false;
  for (uint64_t i = 0; i < N * D; ++i) {
    fz::put_elem(table.data(), tdt_ok ? tdt : MNEMO_DTYPE_F32, i, pick_value(fdp));
    if (tdt_ok && !std::isfinite(fz::get_elem(table.data(), tdt, i))) nonfin = true;
  }
  std::vector<uint64_t> sv(P), tv(P);
  uint64_t first_bad_src = MNEMO_NO_ID, first_bad_tgt = MNEMO_NO_ID;
  for (uint64_t p = 0; p < P; ++p) {
    for (int side = 0; side < 2; ++side) {
      uint64_t v;
      const int r = fdp.ConsumeIntegralInRange<int>(0, 19);
      if (r < 18 && N > 0)
        v = fdp.ConsumeIntegralInRange<uint64_t>(0, N - 1);
      else if (r == 18)
        v = N + fdp.ConsumeIntegralInRange<uint64_t>(0, 2);
      else
        v = idt == MNEMO_DTYPE_U32 ? 0xFFFFFFFFull - fdp.ConsumeIntegralInRange<uint64_t>(0, 2)
                                   : MNEMO_NO_ID - fdp.ConsumeIntegralInRange<uint64_t>(0, 2);
      if (idt == MNEMO_DTYPE_U32) {
        v &= 0xFFFFFFFFull;
        const uint32_t w = static_cast<uint32_t>(v);
        std::memcpy((side ? tgt : src).data() + 4 * p, &w, 4);
      } else {
        std::memcpy((side ? tgt : src).data() + 8 * p, &v, 8);
      }
      (side ? tv : sv)[p] = v;
      if (v >= n_items) {
        uint64_t& f = side ? first_bad_tgt : first_bad_src;
        if (f == MNEMO_NO_ID) f = p;
      }
    }
  }
  const bool any_bad = first_bad_src != MNEMO_NO_ID || first_bad_tgt != MNEMO_NO_ID;
  const bool work = !huge_pairs && !(huge_items && dim > 0) && n_pairs > 0;
  if (work && idt_ok && any_bad) err(MNEMO_E_OUT_OF_RANGE);
  if (work && tdt_ok && nonfin) err(MNEMO_E_NON_FINITE);
  const fz::PtrMode pt = fz::pick_mode(fdp, 4), ps = fz::pick_mode(fdp, 4), pg = fz::pick_mode(fdp, 4),
                    po = fz::pick_mode(fdp, 4);
  for (fz::PtrMode m : {pt, ps, pg, po}) {
    if (m == fz::PtrMode::null) err(MNEMO_E_NULL_POINTER);
    if (m == fz::PtrMode::misaligned) err(MNEMO_E_MISALIGNED);
  }
  // scores written over the src indices: overlapping buffers.
  const bool overlap = fdp.ConsumeIntegralInRange<int>(0, 19) == 0;
  float* out = overlap ? fz::view<float>(src, po) : fz::view<float>(scores, po);
  if (overlap && work && ps != fz::PtrMode::null && po != fz::PtrMode::null) err(MNEMO_E_INVALID_ARGUMENT);
  const bool null_rt = fdp.ConsumeIntegralInRange<int>(0, 49) == 0;
  if (null_rt) mask = 1u << MNEMO_E_NULL_POINTER;

  const auto scores0 = scores.snapshot(), src0 = src.snapshot();
  const mnemo_status s =
      mnemo_score_pairs(null_rt ? nullptr : rt, metric, fz::view<unsigned char>(table, pt), tdt, n_items, dim,
                        fz::view<unsigned char>(src, ps), fz::view<unsigned char>(tgt, pg), idt, n_pairs, out);
  FZ_CHECK(fz::defined_status(s), "undefined status " + std::to_string(s));
  if (s != MNEMO_OK) {
    FZ_CHECK((mask >> s) & 1u, "mnemo_score_pairs -> " + fz::status_text(s) + ", allowed mask " + std::to_string(mask));
    FZ_CHECK(scores.same_as(scores0) && src.same_as(src0), "a failed score_pairs wrote its output");
    if (s == MNEMO_E_OUT_OF_RANGE) {
      const std::string msg = mnemo_last_error();
      FZ_CHECK((first_bad_src != MNEMO_NO_ID && names_number(msg, first_bad_src)) ||
                   (first_bad_tgt != MNEMO_NO_ID && names_number(msg, first_bad_tgt)),
               "the message does not name the first bad pair: " + msg);
    }
    return 0;
  }
  FZ_CHECK(mask == 0, "mnemo_score_pairs succeeded, expected mask " + std::to_string(mask));
  for (uint64_t p = 0; p < n_pairs; ++p) {
    std::vector<double> x(dim), y(dim);
    bool tame = true;
    for (uint64_t j = 0; j < dim; ++j) {
      x[j] = fz::get_elem(table.data(), tdt, sv[p] * dim + j);
      y[j] = fz::get_elem(table.data(), tdt, tv[p] * dim + j);
      tame = tame && std::fabs(x[j]) <= 1e15 && std::fabs(y[j]) <= 1e15 && (x[j] == 0 || std::fabs(x[j]) >= 1e-15) &&
             (y[j] == 0 || std::fabs(y[j]) >= 1e-15);
    }
    const double want = ref::score(metric, x.data(), y.data(), dim);
    const double tol = ref::score_tol(metric, x.data(), y.data(), dim, want);
    const float got = scores.as<float>()[p];
    // Extreme magnitudes are fuzz_precision's subject. Here: no NaN while
    // both rows are inside the contract's range (norm zero or in
    // [2^-50, 2^50]); beyond it mnemo.h lets f32 accumulation overflow.
    auto in_range = [dim](const std::vector<double>& v) {
      double ss = 0;
      for (uint64_t j = 0; j < dim; ++j) ss += v[j] * v[j];
      const double n = std::sqrt(ss);
      return n == 0 || (n >= std::ldexp(1.0, -50) && n <= std::ldexp(1.0, 50));
    };
    if (in_range(x) && in_range(y)) FZ_CHECK(!std::isnan(got), "pair " + std::to_string(p) + ": NaN score");
    if (tame)
      FZ_CHECK(std::fabs(got - want) <= tol,
               "pair " + std::to_string(p) + ": score " + std::to_string(got) + ", reference " + std::to_string(want));
  }
  FZ_CHECK(std::memcmp(scores.data() + n_pairs * 4, scores0.data() + n_pairs * 4, scores0.size() - n_pairs * 4) == 0,
           "score_pairs wrote past its output");
  return 0;
}
