// mnemo_resample against the reference plan: clamping, equal neighbouring
// times, unsorted targets, per-row lengths, f32/f64 times, f32/f16/bf16 data.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "reference.h"
#include "support.h"

namespace {

using mt::Buf;
using mt::Matrix;

// A time array in F32 or F64 with the exact double values it holds.
struct Times {
  int32_t dtype;
  Buf<unsigned char> raw;
  std::vector<double> val;
  Times(int32_t dt, size_t n) : dtype(dt), raw(n * 8), val(n, 0.0) {}
  void set(size_t i, double v) {
    ref::store(raw.data(), dtype, i, v);
    val[i] = ref::load(raw.data(), dtype, i);
  }
  const void* data() const { return raw.data(); }
};

struct Case {
  int32_t data_dtype, time_dtype;
  size_t batch, n_src, n_tgt, dim;
  Matrix data;  // [batch * n_src x dim]
  Times src, tgt;
  std::vector<uint64_t> src_len, tgt_len;  // empty = full rows

  Case(int32_t ddt, int32_t tdt, size_t b, size_t s, size_t t, size_t d)
      : data_dtype(ddt),
        time_dtype(tdt),
        batch(b),
        n_src(s),
        n_tgt(t),
        dim(d),
        data(ddt, b * s, d),
        src(tdt, b * s),
        tgt(tdt, b * t) {}
};

// Non-decreasing source times with some equal neighbours; targets mixing
// exact source times, points between them, points outside, in random order.
Case random_case(std::mt19937_64& rng, int32_t ddt, int32_t tdt, size_t batch, size_t n_src, size_t n_tgt, size_t dim) {
  Case c(ddt, tdt, batch, n_src, n_tgt, dim);
  Matrix vals = mt::random_matrix(rng, ddt, batch * n_src, dim);
  for (size_t r = 0; r < batch * n_src; ++r) c.data.copy_row(r, vals, r);
  std::uniform_real_distribution<double> step(0.05, 1.0), u01(0.0, 1.0);
  for (size_t b = 0; b < batch; ++b) {
    double t = -5.0 + 10.0 * u01(rng);
    for (size_t i = 0; i < n_src; ++i) {
      if (i > 0 && u01(rng) > 0.15) t += step(rng);
      c.src.set(b * n_src + i, t);
      t = c.src.val[b * n_src + i];  // keep the stored (rounded) time
    }
    const double first = c.src.val[b * n_src], last = c.src.val[b * n_src + n_src - 1];
    for (size_t j = 0; j < n_tgt; ++j) {
      const double pick = u01(rng);
      double v;
      if (pick < 0.3) {
        v = c.src.val[b * n_src + mt::rand_below(rng, n_src)];  // exactly a source time
      } else if (pick < 0.45) {
        v = pick < 0.38 ? first - 1.0 - u01(rng) : last + 1.0 + u01(rng);  // outside
      } else {
        v = first + (last - first) * u01(rng);
      }
      c.tgt.set(b * n_tgt + j, v);
    }
  }
  return c;
}

mnemo_status run(const Case& c, void* out, const mnemo_resample_options* opts) {
  return mnemo_resample(mt::rt(), c.data.data(), c.data_dtype, c.batch, c.n_src, c.dim, c.src.data(), c.tgt.data(),
                        c.time_dtype, c.n_tgt, opts, out);
}

// Runs the case with lengths (if any) and checks every output element.
void run_and_check(const Case& c) {
  const size_t es = mt::dtype_size(c.data_dtype);
  const size_t n_out = c.batch * c.n_tgt * c.dim;
  Buf<unsigned char> out(n_out * es);
  mt::poison(out.data(), c.data_dtype, n_out);
  Buf<uint64_t> sl(c.batch), tl(c.batch);
  mnemo_resample_options o = mnemo_resample_options_default();
  if (!c.src_len.empty()) {
    std::copy(c.src_len.begin(), c.src_len.end(), sl.data());
    o.src_lengths = sl.data();
  }
  if (!c.tgt_len.empty()) {
    std::copy(c.tgt_len.begin(), c.tgt_len.end(), tl.data());
    o.tgt_lengths = tl.data();
  }
  ASSERT_OK(run(c, out.data(), &o));

  const auto plan = ref::resample_plan(c.src.val, c.tgt.val, c.batch, c.n_src, c.n_tgt, c.src_len, c.tgt_len);
  size_t bad = 0;
  for (size_t b = 0; b < c.batch; ++b) {
    for (size_t j = 0; j < c.n_tgt; ++j) {
      const ref::ResampleTarget& p = plan[b * c.n_tgt + j];
      for (size_t d = 0; d < c.dim; ++d) {
        const size_t oi = (b * c.n_tgt + j) * c.dim + d;
        const unsigned char* got = out.data() + oi * es;
        std::string err;
        if (p.kind == ref::ResampleTarget::kZero) {
          const std::vector<unsigned char> zero(es, 0);
          if (std::memcmp(got, zero.data(), es) != 0) err = "not zero past tgt_lengths";
        } else if (p.kind == ref::ResampleTarget::kSample) {
          // An end sample or an exact source time: the sample itself, bit for bit.
          const size_t si = (b * c.n_src + p.i) * c.dim + d;
          if (std::memcmp(got, c.data.raw.data() + si * es, es) != 0)
            err = "not exactly sample " + std::to_string(p.i) + " (" + std::to_string(c.data.val[si]) + ")";
        } else {
          const double a = c.data.val[(b * c.n_src + p.i) * c.dim + d];
          const double bb = c.data.val[(b * c.n_src + p.i + 1) * c.dim + d];
          const double v = a + p.w * (bb - a);
          const double tol = ref::interp_tol(c.data_dtype, a, bb, v);
          const double g = ref::load(out.data(), c.data_dtype, oi);
          if (!(std::fabs(g - v) <= tol))
            err = "interpolation of samples " + std::to_string(p.i) + ", " + std::to_string(p.i + 1) + " at w " +
                  std::to_string(p.w) + ": reference " + std::to_string(v);
        }
        if (!err.empty() && bad++ < 5)
          ADD_FAILURE() << "row " << b << " target " << j << " (t = " << c.tgt.val[b * c.n_tgt + j] << ") element " << d
                        << ": got " << ref::load(out.data(), c.data_dtype, oi) << ", " << err;
      }
    }
  }
  EXPECT_EQ(bad, 0u) << "elements wrong";
}

using Param = std::tuple<int32_t, int32_t, size_t>;  // data dtype, time dtype, dim

class Resample : public ::testing::TestWithParam<Param> {};

TEST_P(Resample, MatchesReference) {
  const auto [ddt, tdt, dim] = GetParam();
  auto rng = mt::rng_for_test();
  run_and_check(random_case(rng, ddt, tdt, 3, 7, 11, dim));
  run_and_check(random_case(rng, ddt, tdt, 2, 2, 5, dim));
}

INSTANTIATE_TEST_SUITE_P(AllShapes, Resample,
                         ::testing::Combine(::testing::ValuesIn(mt::storage_dtypes()),
                                            ::testing::Values(MNEMO_DTYPE_F32, MNEMO_DTYPE_F64),
                                            ::testing::ValuesIn(mt::awkward_dims())),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return std::string(mt::dtype_name(std::get<0>(p.param))) + "_times" +
                                  mt::dtype_name(std::get<1>(p.param)) + "_d" + std::to_string(std::get<2>(p.param));
                         });

TEST(ResampleOptions, Defaults) {
  const mnemo_resample_options o = mnemo_resample_options_default();
  EXPECT_EQ(o.struct_size, sizeof(mnemo_resample_options));
  EXPECT_EQ(o.reserved0, 0u);
  EXPECT_EQ(o.src_lengths, nullptr);
  EXPECT_EQ(o.tgt_lengths, nullptr);
}

// Hand-written expectations for equal neighbouring times, independent of
// the reference plan: i is the largest index with t_i <= t.
TEST(ResampleRules, EqualNeighbouringTimes) {
  auto rng = mt::rng_for_test();
  for (const int32_t tdt : {MNEMO_DTYPE_F32, MNEMO_DTYPE_F64}) {
    Case c(MNEMO_DTYPE_F32, tdt, 3, 4, 6, 3);
    Matrix vals = mt::random_matrix(rng, MNEMO_DTYPE_F32, 12, 3);
    for (size_t r = 0; r < 12; ++r) c.data.copy_row(r, vals, r);
    const double rows[3][4] = {{0, 1, 1, 2}, {0, 0, 1, 2}, {3, 3, 3, 3}};
    const double tg[3][6] = {{1, 0.5, 1.5, 2, -1, 1}, {0, -1, 0.5, 2, 3, 0}, {3, 2, 4, 3, 3, 2.5}};
    for (size_t b = 0; b < 3; ++b) {
      for (size_t i = 0; i < 4; ++i) c.src.set(b * 4 + i, rows[b][i]);
      for (size_t j = 0; j < 6; ++j) c.tgt.set(b * 6 + j, tg[b][j]);
    }
    // Which sample each target must reproduce exactly (-1: interpolated).
    const int expect[3][6] = {{2, -1, -1, 3, 0, 2}, {1, 0, -1, 3, 3, 1}, {3, 0, 3, 3, 3, 0}};
    const auto plan = ref::resample_plan(c.src.val, c.tgt.val, 3, 4, 6, {}, {});
    for (size_t b = 0; b < 3; ++b)
      for (size_t j = 0; j < 6; ++j) {
        const auto& p = plan[b * 6 + j];
        if (expect[b][j] < 0) {
          EXPECT_EQ(p.kind, ref::ResampleTarget::kInterp) << b << "," << j;
        } else {
          EXPECT_EQ(p.kind, ref::ResampleTarget::kSample) << b << "," << j;
          EXPECT_EQ(p.i, static_cast<size_t>(expect[b][j])) << b << "," << j;
        }
      }
    run_and_check(c);
  }
}

TEST(ResampleRules, TargetsOutsideTheRangeTakeTheEndSamples) {
  auto rng = mt::rng_for_test();
  for (const int32_t ddt : mt::storage_dtypes()) {
    Case c = random_case(rng, ddt, MNEMO_DTYPE_F64, 2, 5, 8, 5);
    for (size_t b = 0; b < 2; ++b)
      for (size_t j = 0; j < 8; ++j) c.tgt.set(b * 8 + j, j % 2 ? 1e6 + j : -1e6 - j);
    run_and_check(c);
  }
}

TEST(ResampleRules, SingleSourceSampleGivesThatSample) {
  auto rng = mt::rng_for_test();
  for (const int32_t ddt : mt::storage_dtypes()) {
    for (const int32_t tdt : {MNEMO_DTYPE_F32, MNEMO_DTYPE_F64}) {
      Case c = random_case(rng, ddt, tdt, 3, 1, 9, 127);
      run_and_check(c);
    }
  }
}

// Target times in any order: reversing them reverses the output rows.
TEST(ResampleRules, UnsortedTargets) {
  auto rng = mt::rng_for_test();
  Case c = random_case(rng, MNEMO_DTYPE_F32, MNEMO_DTYPE_F32, 1, 9, 16, 5);
  Case r = random_case(rng, MNEMO_DTYPE_F32, MNEMO_DTYPE_F32, 1, 9, 16, 5);
  for (size_t i = 0; i < 9; ++i) {
    r.src.set(i, c.src.val[i]);
    r.data.copy_row(i, c.data, i);
  }
  for (size_t j = 0; j < 16; ++j) r.tgt.set(j, c.tgt.val[15 - j]);
  Buf<float> a(16 * 5), b(16 * 5);
  ASSERT_OK(run(c, a.data(), nullptr));
  ASSERT_OK(run(r, b.data(), nullptr));
  for (size_t j = 0; j < 16; ++j)
    EXPECT_EQ(std::memcmp(a.data() + j * 5, b.data() + (15 - j) * 5, 5 * sizeof(float)), 0) << "target " << j;
  run_and_check(c);
}

// Per-row lengths: only the first src_lengths[b] samples and times are used
// (the rest hold decreasing times that must not matter), targets past
// tgt_lengths[b] are not read (they hold NaN) and their rows become zero.
TEST(ResampleRules, RowLengths) {
  auto rng = mt::rng_for_test();
  for (const int32_t ddt : mt::storage_dtypes()) {
    for (const int32_t tdt : {MNEMO_DTYPE_F32, MNEMO_DTYPE_F64}) {
      const size_t batch = 5, n_src = 8, n_tgt = 7;
      Case c = random_case(rng, ddt, tdt, batch, n_src, n_tgt, 5);
      c.src_len = {8, 1, 3, 5, 2};
      c.tgt_len = {7, 4, 0, 6, 1};
      for (size_t b = 0; b < batch; ++b) {
        for (size_t i = c.src_len[b]; i < n_src; ++i) c.src.set(b * n_src + i, -100.0 * static_cast<double>(i));
        for (size_t j = c.tgt_len[b]; j < n_tgt; ++j)
          c.tgt.set(b * n_tgt + j, std::numeric_limits<double>::quiet_NaN());
        // Some targets beyond the row's last used time.
        if (c.tgt_len[b] > 0) c.tgt.set(b * n_tgt, c.src.val[b * n_src + c.src_len[b] - 1] + 0.5);
      }
      run_and_check(c);
    }
  }
}

TEST(ResampleRules, EmptyBatchOrTargetsWriteNothing) {
  auto rng = mt::rng_for_test();
  Case c = random_case(rng, MNEMO_DTYPE_F32, MNEMO_DTYPE_F32, 2, 3, 4, 5);
  Buf<float> out(2 * 4 * 5);
  const auto before = out.snapshot();
  EXPECT_OK(mnemo_resample(mt::rt(), c.data.data(), c.data_dtype, 0, 3, 5, c.src.data(), c.tgt.data(), c.time_dtype, 4,
                           nullptr, out.data()));
  EXPECT_OK(mnemo_resample(mt::rt(), c.data.data(), c.data_dtype, 2, 3, 5, c.src.data(), c.tgt.data(), c.time_dtype, 0,
                           nullptr, out.data()));
  EXPECT_TRUE(out.same_as(before));
}

// Decreasing source times: NOT_SORTED naming the row, nothing written.
TEST(ResampleRules, DecreasingSourceTimesRefused) {
  auto rng = mt::rng_for_test();
  for (const int32_t tdt : {MNEMO_DTYPE_F32, MNEMO_DTYPE_F64}) {
    Case c = random_case(rng, MNEMO_DTYPE_BF16, tdt, 4, 9, 3, 5);
    // Row 2: sample 6 goes back before sample 5.
    c.src.set(2 * 9 + 6, c.src.val[2 * 9 + 5] - 0.25);
    for (size_t i = 7; i < 9; ++i) c.src.set(2 * 9 + i, c.src.val[2 * 9 + 6] + 0.1 * i);
    Buf<uint16_t> out(4 * 3 * 5);
    const auto before = out.snapshot();
    EXPECT_TRUE(mt::failed_with(run(c, out.data(), nullptr), MNEMO_E_NOT_SORTED));
    const std::string msg = mt::last_error();
    EXPECT_TRUE(mt::names_number(msg, 2)) << "row not named: " << msg;
    EXPECT_TRUE(mt::names_number(msg, 6) || mt::names_number(msg, 5)) << "index not named: " << msg;
    EXPECT_TRUE(out.same_as(before));
  }
}

// One large case: over 100k output elements, bf16 data, f64 times.
TEST(ResampleRules, LargeBatch) {
  auto rng = mt::rng_for_test();
  run_and_check(random_case(rng, MNEMO_DTYPE_BF16, MNEMO_DTYPE_F64, 64, 50, 40, 48));
}

}  // namespace
