// mnemo_normalize_rows and mnemo_layer_norm against the float64 reference.
#include <cmath>
#include <tuple>

#include "reference.h"
#include "support.h"

namespace {

using mt::Buf;
using mt::Matrix;

// Every element of `out` (rows x dim of dtype) within tol[i] of want[i].
void expect_rows(const void* out, int32_t dtype, const std::vector<double>& want, const std::vector<double>& tol,
                 const char* what) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = ref::load(out, dtype, i);
    if (!(std::fabs(g - want[i]) <= tol[i]) && bad++ < 5)
      ADD_FAILURE() << what << " element " << i << ": " << g << ", reference " << want[i] << " (tolerance " << tol[i]
                    << ")";
  }
  EXPECT_EQ(bad, 0u) << what;
}

std::vector<double> normalize_tol(int32_t dtype, const std::vector<double>& want) {
  std::vector<double> tol(want.size());
  for (size_t i = 0; i < want.size(); ++i)
    tol[i] = 1e-5 * std::fabs(want[i]) + 1e-9 + ref::rounding_tol(dtype, want[i]);
  return tol;
}

// Rows with one zero row in the middle (it must stay zero).
Matrix rows_with_zero_row(std::mt19937_64& rng, int32_t dtype, size_t rows, size_t dim) {
  Matrix m = mt::random_matrix(rng, dtype, rows, dim);
  // Spread row scales so normalisation is not a no-op.
  for (size_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < dim; ++j) m.set(r, j, static_cast<float>(m.row(r)[j] * (0.01 + 7.0 * r)));
  if (rows > 3)
    for (size_t j = 0; j < dim; ++j) m.set(3, j, 0.0f);
  return m;
}

using Param = std::tuple<int32_t, size_t>;  // dtype, dim

class NormalizeRows : public ::testing::TestWithParam<Param> {};

TEST_P(NormalizeRows, MatchesReference) {
  const auto [dtype, dim] = GetParam();
  auto rng = mt::rng_for_test();
  for (const size_t rows : {size_t{1}, size_t{7}, size_t{33}}) {
    const Matrix in = rows_with_zero_row(rng, dtype, rows, dim);
    const std::vector<double> want = ref::normalize_rows(in.val, rows, dim);
    const std::vector<double> tol = normalize_tol(dtype, want);
    Buf<unsigned char> out(rows * dim * mt::dtype_size(dtype));
    mt::poison(out.data(), dtype, rows * dim);
    ASSERT_OK(mnemo_normalize_rows(mt::rt(), in.data(), out.data(), dtype, rows, dim));
    expect_rows(out.data(), dtype, want, tol, "out of place");
    if (rows > 3) {
      // The zero row is +0 everywhere, not NaN.
      for (size_t j = 0; j < dim; ++j) ASSERT_EQ(ref::load(out.data(), dtype, 3 * dim + j), 0.0) << j;
    }
    // In place gives the same rows.
    Matrix inplace = rows_with_zero_row(rng, dtype, rows, dim);
    for (size_t r = 0; r < rows; ++r) inplace.copy_row(r, in, r);
    ASSERT_OK(mnemo_normalize_rows(mt::rt(), inplace.data(), inplace.data(), dtype, rows, dim));
    expect_rows(inplace.data(), dtype, want, tol, "in place");
  }
}

INSTANTIATE_TEST_SUITE_P(AllShapes, NormalizeRows,
                         ::testing::Combine(::testing::ValuesIn(mt::storage_dtypes()),
                                            ::testing::ValuesIn(mt::awkward_dims())),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return std::string(mt::dtype_name(std::get<0>(p.param))) + "_d" +
                                  std::to_string(std::get<1>(p.param));
                         });

class LayerNorm : public ::testing::TestWithParam<Param> {};

TEST_P(LayerNorm, MatchesReference) {
  const auto [dtype, dim] = GetParam();
  auto rng = mt::rng_for_test();
  const size_t rows = 6;
  Buf<float> gamma(dim), beta(dim);
  for (size_t j = 0; j < dim; ++j) {
    gamma[j] = 0.5f + std::fabs(mt::rand_nonzero(rng));
    beta[j] = mt::rand_nonzero(rng);
  }
  // Every gamma/beta combination, NULL meaning ones / zeros.
  for (int mask = 0; mask < 4; ++mask) {
    const float* g = (mask & 1) ? gamma.data() : nullptr;
    const float* b = (mask & 2) ? beta.data() : nullptr;
    for (const float eps : {1e-5f, 0.0f}) {
      SCOPED_TRACE(std::string("gamma ") + (g ? "set" : "NULL") + ", beta " + (b ? "set" : "NULL") + ", eps " +
                   std::to_string(eps));
      Matrix in = mt::random_matrix(rng, dtype, rows, dim);
      // An offset row: statistics must not lose its variance.
      for (size_t j = 0; j < dim; ++j) in.set(1, j, static_cast<float>(in.row(1)[j] + 3.0));
      // A narrow row far from 0: its mean is 1e5 times its spread, beyond
      // what a mean rounded to f32 can centre to the bound.
      for (size_t j = 0; j < dim; ++j) in.set(2, j, static_cast<float>(1000.0 + 1e-2 * in.row(2)[j]));
      std::vector<double> tol;
      const std::vector<double> want = ref::layer_norm(in.val, rows, dim, g, b, eps, dtype, &tol);
      Buf<unsigned char> out(rows * dim * mt::dtype_size(dtype));
      mt::poison(out.data(), dtype, rows * dim);
      if (dim == 1 && eps == 0.0f) {
        // A single element has zero variance: with eps 0 the row becomes beta.
        const size_t es = mt::dtype_size(dtype);
        unsigned char e[4] = {0, 0, 0, 0};
        ref::store(e, dtype, 0, b ? b[0] : 0.0f);
        ASSERT_OK(mnemo_layer_norm(mt::rt(), in.data(), out.data(), dtype, rows, dim, g, b, eps));
        for (size_t r = 0; r < rows; ++r) EXPECT_EQ(std::memcmp(out.data() + r * es, e, es), 0) << "row " << r;
        continue;
      }
      ASSERT_OK(mnemo_layer_norm(mt::rt(), in.data(), out.data(), dtype, rows, dim, g, b, eps));
      expect_rows(out.data(), dtype, want, tol, "out of place");
      ASSERT_OK(mnemo_layer_norm(mt::rt(), in.data(), in.data(), dtype, rows, dim, g, b, eps));
      expect_rows(in.data(), dtype, want, tol, "in place");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllShapes, LayerNorm,
                         ::testing::Combine(::testing::ValuesIn(mt::storage_dtypes()),
                                            ::testing::ValuesIn(mt::awkward_dims())),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return std::string(mt::dtype_name(std::get<0>(p.param))) + "_d" +
                                  std::to_string(std::get<1>(p.param));
                         });

// A constant row with eps = 0 has var + eps = 0: the row becomes beta
// exactly, whatever rounding the mean of the row suffers.
TEST(LayerNormRules, ConstantRowWithZeroEpsBecomesBeta) {
  auto rng = mt::rng_for_test();
  for (const int32_t dtype : mt::storage_dtypes()) {
    for (const size_t dim : {size_t{3}, size_t{5}, size_t{127}, size_t{768}}) {
      const size_t rows = 4;
      Matrix in(dtype, rows, dim);
      for (size_t r = 0; r < rows; ++r) {
        const float c = r == 0 ? 0.1f : mt::rand_nonzero(rng) * 100.0f;
        for (size_t j = 0; j < dim; ++j) in.set(r, j, c);
      }
      Buf<float> gamma(dim), beta(dim);
      for (size_t j = 0; j < dim; ++j) {
        gamma[j] = mt::rand_nonzero(rng) * 2.0f;
        beta[j] = mt::rand_nonzero(rng);
      }
      Buf<unsigned char> out(rows * dim * mt::dtype_size(dtype));
      mt::poison(out.data(), dtype, rows * dim);
      ASSERT_OK(mnemo_layer_norm(mt::rt(), in.data(), out.data(), dtype, rows, dim, gamma.data(), beta.data(), 0.0f));
      size_t bad = 0;
      for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < dim; ++j) {
          Buf<unsigned char> e(8);
          ref::store(e.data(), dtype, 0, beta[j]);
          const double want = ref::load(e.data(), dtype, 0);
          const double got = ref::load(out.data(), dtype, r * dim + j);
          if (got != want && bad++ < 5)
            ADD_FAILURE() << mt::dtype_name(dtype) << " d" << dim << " row " << r << " [" << j << "] (value "
                          << in.row(r)[0] << "): " << got << ", expected beta " << want;
        }
      EXPECT_EQ(bad, 0u);
      // With NULL beta the row becomes zero.
      mt::poison(out.data(), dtype, rows * dim);
      ASSERT_OK(mnemo_layer_norm(mt::rt(), in.data(), out.data(), dtype, rows, dim, gamma.data(), nullptr, 0.0f));
      for (size_t i = 0; i < rows * dim; ++i)
        ASSERT_EQ(ref::load(out.data(), dtype, i), 0.0) << mt::dtype_name(dtype) << " " << i;
    }
  }
}

// Overlap that is not exactly in place is refused and nothing is written.
TEST(NormRules, PartialOverlapRefused) {
  auto rng = mt::rng_for_test();
  const size_t rows = 4, dim = 8;
  for (const int32_t dtype : mt::storage_dtypes()) {
    const size_t es = mt::dtype_size(dtype);
    Buf<unsigned char> buf((rows * dim + 16) * es);
    for (size_t i = 0; i < rows * dim + 16; ++i) ref::store(buf.data(), dtype, i, mt::rand_nonzero(rng));
    // Offsets of 16 bytes keep both pointers aligned.
    unsigned char* a = buf.data();
    unsigned char* b = buf.data() + 16;
    const auto before = buf.snapshot();
    for (const auto& io : {std::make_pair(a, b), std::make_pair(b, a)}) {
      EXPECT_TRUE(mt::failed_with(mnemo_normalize_rows(mt::rt(), io.first, io.second, dtype, rows, dim),
                                  MNEMO_E_INVALID_ARGUMENT));
      EXPECT_TRUE(
          mt::failed_with(mnemo_layer_norm(mt::rt(), io.first, io.second, dtype, rows, dim, nullptr, nullptr, 1e-5f),
                          MNEMO_E_INVALID_ARGUMENT));
      EXPECT_TRUE(buf.same_as(before));
    }
  }
}

TEST(NormRules, NoRowsWritesNothing) {
  auto rng = mt::rng_for_test();
  const Matrix in = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 5);
  Buf<float> out(10);
  const auto before = out.snapshot();
  EXPECT_OK(mnemo_normalize_rows(mt::rt(), in.data(), out.data(), MNEMO_DTYPE_F32, 0, 5));
  EXPECT_OK(mnemo_layer_norm(mt::rt(), in.data(), out.data(), MNEMO_DTYPE_F32, 0, 5, nullptr, nullptr, 1e-5f));
  EXPECT_TRUE(out.same_as(before));
}

// One large case each: more than 100k rows.
TEST(NormRules, LargeRowCount) {
  auto rng = mt::rng_for_test();
  const size_t rows = 120000, dim = 3;
  {
    const Matrix in = mt::random_matrix(rng, MNEMO_DTYPE_F32, rows, dim);
    const std::vector<double> want = ref::normalize_rows(in.val, rows, dim);
    Buf<float> out(rows * dim);
    mt::poison_f32(out.data(), rows * dim);
    ASSERT_OK(mnemo_normalize_rows(mt::rt(), in.data(), out.data(), MNEMO_DTYPE_F32, rows, dim));
    expect_rows(out.data(), MNEMO_DTYPE_F32, want, normalize_tol(MNEMO_DTYPE_F32, want), "normalize");
  }
  {
    const Matrix in = mt::random_matrix(rng, MNEMO_DTYPE_F16, rows, 5);
    Buf<float> gamma(5), beta(5);
    for (size_t j = 0; j < 5; ++j) {
      gamma[j] = mt::rand_nonzero(rng);
      beta[j] = mt::rand_nonzero(rng);
    }
    std::vector<double> tol;
    const std::vector<double> want =
        ref::layer_norm(in.val, rows, 5, gamma.data(), beta.data(), 1e-5, MNEMO_DTYPE_F16, &tol);
    Buf<uint16_t> out(rows * 5);
    mt::poison(out.data(), MNEMO_DTYPE_F16, rows * 5);
    ASSERT_OK(
        mnemo_layer_norm(mt::rt(), in.data(), out.data(), MNEMO_DTYPE_F16, rows, 5, gamma.data(), beta.data(), 1e-5f));
    expect_rows(out.data(), MNEMO_DTYPE_F16, want, tol, "layer norm");
  }
}

// Finite rows whose sums of squares overflow or underflow f32 (values near
// 1e37 or 1e-25), next to ordinary rows: every backend keeps the contract.
TEST(NormRules, ExtremeMagnitudes) {
  auto rng = mt::rng_for_test();
  for (const int32_t dtype : {MNEMO_DTYPE_F32, MNEMO_DTYPE_BF16}) {
    for (const size_t dim : {size_t{3}, size_t{64}, size_t{771}}) {
      const size_t rows = 6;
      Matrix in = mt::random_matrix(rng, dtype, rows, dim);
      const float scale[rows] = {1.0f, 3e37f, 1e-25f, 1.0f, 2e19f, 1e-20f};
      for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < dim; ++j) in.set(r, j, mt::rand_nonzero(rng) * scale[r]);
      const size_t es = mt::dtype_size(dtype);
      {
        const std::vector<double> want = ref::normalize_rows(in.val, rows, dim);
        Buf<unsigned char> out(rows * dim * es);
        mt::poison(out.data(), dtype, rows * dim);
        ASSERT_OK(mnemo_normalize_rows(mt::rt(), in.data(), out.data(), dtype, rows, dim));
        expect_rows(out.data(), dtype, want, normalize_tol(dtype, want), "normalize");
      }
      Buf<float> gamma(dim), beta(dim);
      for (size_t j = 0; j < dim; ++j) gamma[j] = mt::rand_nonzero(rng), beta[j] = mt::rand_nonzero(rng);
      for (const float eps : {1e-5f, 0.0f}) {
        std::vector<double> tol;
        const std::vector<double> want =
            ref::layer_norm(in.val, rows, dim, gamma.data(), beta.data(), eps, dtype, &tol);
        Buf<unsigned char> out(rows * dim * es);
        mt::poison(out.data(), dtype, rows * dim);
        ASSERT_OK(mnemo_layer_norm(mt::rt(), in.data(), out.data(), dtype, rows, dim, gamma.data(), beta.data(), eps));
        expect_rows(out.data(), dtype, want, tol, "layer norm");
      }
    }
  }
}

}  // namespace
