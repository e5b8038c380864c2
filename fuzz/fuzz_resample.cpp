// mnemo_resample with random times (repeated, out of range, unsorted, S = 1,
// non-finite), valid lengths and bad arguments: the status is one the
// arguments allow, a failure writes nothing, and a success follows the
// header's interpolation rule on every element.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "fuzz_support.h"
#include "reference.h"
#include "resample_oracle.h"

namespace {

constexpr uint64_t kHuge = uint64_t{1} << 62;

struct Expect {
  uint32_t mask = 0;
  void err(mnemo_status s) { mask |= 1u << s; }
};

double pick_time(FuzzedDataProvider& fdp, const std::vector<double>& seen, int32_t tdt) {
  const int r = fdp.ConsumeIntegralInRange<int>(0, 9);
  if (r < 3 && !seen.empty()) return seen[fdp.ConsumeIntegralInRange<size_t>(0, seen.size() - 1)];  // repeat
  if (r < 7) return static_cast<double>(fdp.ConsumeIntegralInRange<int>(-20, 20)) / 4.0;
  if (r < 9) {
    const double v = fz::hurt_float(fdp);
    // f64 times beyond f32 range; clamped, as a huge v times 1e280 passes
    // DBL_MAX and this branch draws finite times.
    const double big = std::numeric_limits<double>::max();
    return tdt == MNEMO_DTYPE_F64 && fdp.ConsumeBool() ? std::clamp(v * 1e280, -big, big) : v;
  }
  return fz::maybe_non_finite(fdp, 3);
}

float pick_sample(FuzzedDataProvider& fdp) {
  const int r = fdp.ConsumeIntegralInRange<int>(0, 19);
  if (r < 12) return fdp.ConsumeFloatingPointInRange<float>(-4.0f, 4.0f);
  if (r < 19) return fz::hurt_float(fdp);
  return fz::maybe_non_finite(fdp, 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  mnemo_runtime* rt = fz::cpu_runtime(true);
  Expect e;
  const bool null_rt = fdp.ConsumeIntegralInRange<int>(0, 49) == 0;
  const int32_t ddt = fz::pick_dtype(fdp, {MNEMO_DTYPE_F32, MNEMO_DTYPE_F16, MNEMO_DTYPE_BF16}, 5);
  const int32_t tdt = fz::pick_dtype(fdp, {MNEMO_DTYPE_F32, MNEMO_DTYPE_F64}, 5);
  const bool ddt_ok = ddt >= MNEMO_DTYPE_F32 && ddt <= MNEMO_DTYPE_BF16;
  const bool tdt_ok = tdt == MNEMO_DTYPE_F32 || tdt == MNEMO_DTYPE_F64;
  if (!ddt_ok || !tdt_ok) e.err(MNEMO_E_DTYPE);
  const int shape_kind = fdp.ConsumeIntegralInRange<int>(0, 19);
  uint64_t batch = fdp.ConsumeIntegralInRange<uint64_t>(0, 4);
  uint64_t n_src = fdp.ConsumeIntegralInRange<uint64_t>(0, 7);
  uint64_t dim = fdp.ConsumeIntegralInRange<uint64_t>(0, 5);
  uint64_t n_tgt = fdp.ConsumeIntegralInRange<uint64_t>(0, 7);
  // Sizes whose products overflow: checked before any element is read.
  bool huge = false;
  if (shape_kind == 0) {
    huge = true;
    (fdp.ConsumeBool() ? batch : fdp.ConsumeBool() ? n_tgt : dim) = kHuge;
  }
  if (n_src == 0 || dim == 0) e.err(MNEMO_E_INVALID_ARGUMENT);
  const size_t esz = ddt_ok ? fz::dtype_bytes(ddt) : 4, tsz = tdt_ok ? fz::dtype_bytes(tdt) : 8;
  const uint64_t B = huge ? 1 : batch, NT = huge ? 1 : n_tgt, D = huge ? 1 : dim, NS = std::max<uint64_t>(n_src, 1);
  const uint64_t Dd = std::max<uint64_t>(D, 1);
  // Overflow is about the true byte counts: a huge size times a zero one is
  // no overflow (and no work).
  using Wide = unsigned __int128;
  const Wide lim = static_cast<Wide>(std::numeric_limits<std::ptrdiff_t>::max());
  const bool overflow = Wide{batch} * n_src * dim * esz > lim || Wide{batch} * n_tgt * dim * esz > lim ||
                        Wide{batch} * n_src * tsz > lim || Wide{batch} * n_tgt * tsz > lim || Wide{batch} * 8 > lim;
  if (overflow) e.err(MNEMO_E_OVERFLOW);

  // Options: valid lengths per row, sometimes out of range.
  const int ok_kind = fdp.ConsumeIntegralInRange<int>(0, 9);
  mnemo_resample_options o = mnemo_resample_options_default();
  const mnemo_resample_options* op = ok_kind == 0 ? nullptr : &o;
  fz::Buf src_len(B * 8), tgt_len(B * 8);
  std::vector<uint64_t> sl, tl;
  bool bad_len = false;
  if (op) {
    if (ok_kind == 1) {
      o.struct_size = fdp.ConsumeIntegralInRange<uint32_t>(0, sizeof o - 1);
      e.err(MNEMO_E_INVALID_ARGUMENT);
    }
    if (fdp.ConsumeBool()) {
      for (uint64_t b = 0; b < B; ++b) {
        const uint64_t v = fdp.ConsumeIntegralInRange<int>(0, 9) ? fdp.ConsumeIntegralInRange<uint64_t>(1, NS)
                                                                 : fdp.ConsumeIntegralInRange<uint64_t>(0, NS + 2);
        src_len.as<uint64_t>()[b] = v;
        sl.push_back(v);
      }
      const fz::PtrMode pm = fz::pick_mode(fdp, 5);
      o.src_lengths = pm == fz::PtrMode::null ? nullptr : fz::view<uint64_t>(src_len, pm);
      if (pm == fz::PtrMode::null) sl.clear();
      if (pm == fz::PtrMode::misaligned) {
        e.err(MNEMO_E_MISALIGNED);
        sl.clear();
        bad_len = true;
      }
    }
    if (fdp.ConsumeBool()) {
      for (uint64_t b = 0; b < B; ++b) {
        const uint64_t v = fdp.ConsumeIntegralInRange<int>(0, 9) ? fdp.ConsumeIntegralInRange<uint64_t>(0, NT)
                                                                 : fdp.ConsumeIntegralInRange<uint64_t>(0, NT + 2);
        tgt_len.as<uint64_t>()[b] = v;
        tl.push_back(v);
      }
      const fz::PtrMode pm = fz::pick_mode(fdp, 5);
      o.tgt_lengths = pm == fz::PtrMode::null ? nullptr : fz::view<uint64_t>(tgt_len, pm);
      if (pm == fz::PtrMode::null) tl.clear();
      if (pm == fz::PtrMode::misaligned) {
        e.err(MNEMO_E_MISALIGNED);
        tl.clear();
        bad_len = true;
      }
    }
  }

  // Times and samples. Source times sorted unless the input says otherwise.
  fz::Buf st(B * NS * tsz), tt(B * NT * tsz), dat(B * NS * Dd * esz), out(B * NT * Dd * esz);
  std::vector<double> stv(B * NS), ttv(B * NT);
  const bool sorted = fdp.ConsumeIntegralInRange<int>(0, 7) != 0;
  for (uint64_t b = 0; b < B; ++b) {
    std::vector<double> row;
    for (uint64_t i = 0; i < NS; ++i) row.push_back(pick_time(fdp, row, tdt));
    if (sorted) std::sort(row.begin(), row.end());  // NaN may still leave it unsorted
    for (uint64_t i = 0; i < NS; ++i) {
      double t = row[i];
      if (tdt != MNEMO_DTYPE_F64) t = static_cast<float>(t);  // beyond f32 range -> inf: non-finite input
      fz::put_elem(st.data(), tdt_ok ? tdt : MNEMO_DTYPE_F64, b * NS + i, static_cast<float>(t));
      if (tdt == MNEMO_DTYPE_F64) std::memcpy(st.data() + (b * NS + i) * 8, &t, 8);
      stv[b * NS + i] = t;
    }
    for (uint64_t j = 0; j < NT; ++j) {
      double t = pick_time(fdp, row, tdt);
      if (tdt != MNEMO_DTYPE_F64) t = static_cast<float>(t);
      fz::put_elem(tt.data(), tdt_ok ? tdt : MNEMO_DTYPE_F64, b * NT + j, static_cast<float>(t));
      if (tdt == MNEMO_DTYPE_F64) std::memcpy(tt.data() + (b * NT + j) * 8, &t, 8);
      ttv[b * NT + j] = t;
    }
  }
  for (uint64_t i = 0; i < B * NS * Dd; ++i)
    fz::put_elem(dat.data(), ddt_ok ? ddt : MNEMO_DTYPE_F32, i, pick_sample(fdp));

  // Per-row validity, over the valid parts only; rows are only looked at
  // when there is work (batch and n_tgt above zero).
  const bool nothing = !overflow && (batch == 0 || n_tgt == 0);
  if (!huge && !bad_len && !nothing && n_src > 0) {
    for (uint64_t b = 0; b < B; ++b) {
      const uint64_t S = sl.empty() ? n_src : sl[b];
      const uint64_t T = tl.empty() ? n_tgt : tl[b];
      if (S == 0 || S > n_src || T > n_tgt) {
        e.err(MNEMO_E_INVALID_ARGUMENT);
        continue;
      }
      for (uint64_t i = 0; i < S; ++i)
        if (!std::isfinite(stv[b * NS + i])) e.err(MNEMO_E_NON_FINITE);
      for (uint64_t j = 0; j < T; ++j)
        if (!std::isfinite(ttv[b * NT + j])) e.err(MNEMO_E_NON_FINITE);
      for (uint64_t i = 1; i < S; ++i)
        if (!(stv[b * NS + i - 1] <= stv[b * NS + i])) e.err(MNEMO_E_NOT_SORTED);
      if (ddt_ok && dim > 0)
        for (uint64_t i = 0; i < S * dim; ++i)
          if (!std::isfinite(fz::get_elem(dat.data(), ddt, b * NS * dim + i))) e.err(MNEMO_E_NON_FINITE);
    }
  }
  // Pointers: NULL, misaligned, or out overlapping an input.
  const fz::PtrMode pd = fz::pick_mode(fdp, 4), ps = fz::pick_mode(fdp, 4), pt = fz::pick_mode(fdp, 4),
                    po = fz::pick_mode(fdp, 4);
  for (fz::PtrMode m : {pd, ps, pt, po}) {
    if (m == fz::PtrMode::null) e.err(MNEMO_E_NULL_POINTER);
    if (m == fz::PtrMode::misaligned) e.err(MNEMO_E_MISALIGNED);
  }
  const bool overlap = fdp.ConsumeIntegralInRange<int>(0, 19) == 0;
  void* out_ptr = overlap ? static_cast<void*>(fz::view<unsigned char>(dat, po)) : fz::view<unsigned char>(out, po);
  if (overlap && !nothing && !overflow && pd != fz::PtrMode::null && po != fz::PtrMode::null)
    e.err(MNEMO_E_INVALID_ARGUMENT);
  if (null_rt) e.mask = 1u << MNEMO_E_NULL_POINTER;

  const std::vector<unsigned char> out0 = out.snapshot(), dat0 = dat.snapshot();
  const mnemo_status s =
      mnemo_resample(null_rt ? nullptr : rt, fz::view<unsigned char>(dat, pd), ddt, batch, n_src, dim,
                     fz::view<unsigned char>(st, ps), fz::view<unsigned char>(tt, pt), tdt, n_tgt, op, out_ptr);
  FZ_CHECK(fz::defined_status(s), "undefined status " + std::to_string(s));
  if (s != MNEMO_OK) {
    FZ_CHECK((e.mask >> s) & 1u,
             "mnemo_resample -> " + fz::status_text(s) + ", allowed mask " + std::to_string(e.mask));
    FZ_CHECK(out.same_as(out0) && dat.same_as(dat0), "a failed resample wrote its output");
    return 0;
  }
  FZ_CHECK(e.mask == 0, "mnemo_resample succeeded, expected mask " + std::to_string(e.mask));
  if (nothing) {
    FZ_CHECK(out.same_as(out0), "an empty resample wrote its output");
    return 0;
  }
  FZ_CHECK(dat.same_as(dat0), "resample changed its input");
  const std::string why = fz::check_resample(stv, ttv, dat.data(), out.data(), ddt, batch, n_src, dim, n_tgt, sl, tl);
  FZ_CHECK(why.empty(), why);
  // The slack past the output is never written.
  FZ_CHECK(std::memcmp(out.data() + batch * n_tgt * dim * esz, out0.data() + batch * n_tgt * dim * esz,
                       out0.size() - batch * n_tgt * dim * esz) == 0,
           "resample wrote past its output");
  return 0;
}
