// mnemo_similarity against the float64 reference.
#include <cmath>
#include <tuple>

#include "reference.h"
#include "support.h"

namespace {

using mt::Buf;
using mt::Matrix;

// Every score of an [nq x n] matrix within the contract's bound. NaN (the
// poison) never passes, so this also proves every element was written.
void expect_scores(int32_t metric, const Matrix& q, const Matrix& t, const float* scores) {
  size_t bad = 0;
  for (size_t i = 0; i < q.rows; ++i) {
    for (size_t j = 0; j < t.rows; ++j) {
      const double r = ref::score(metric, q.row(i), t.row(j), q.dim);
      const double tol = ref::score_tol(metric, q.row(i), t.row(j), q.dim, r);
      const double got = scores[i * t.rows + j];
      if (!(std::fabs(got - r) <= tol) && bad++ < 5)
        ADD_FAILURE() << "score[" << i << ", " << j << "] = " << got << ", reference " << r << " (tolerance " << tol
                      << ")";
    }
  }
  EXPECT_EQ(bad, 0u) << "scores outside the bound";
}

using Param = std::tuple<int32_t, int32_t, size_t>;  // dtype, metric, dim

class SimilarityMatrix : public ::testing::TestWithParam<Param> {};

TEST_P(SimilarityMatrix, MatchesReference) {
  const auto [dtype, metric, dim] = GetParam();
  auto rng = mt::rng_for_test();
  // Dot is bounded absolutely for unit vectors; cosine and L2 take any rows.
  const bool unit = metric == MNEMO_METRIC_DOT;
  for (const size_t nq : {size_t{1}, size_t{3}}) {
    const size_t n = 29;  // below a warp
    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, dim, unit);
    const Matrix t = mt::random_matrix(rng, dtype, n, dim, unit);
    Buf<float> scores(nq * n);
    mt::poison_f32(scores.data(), nq * n);
    ASSERT_OK(mnemo_similarity(mt::rt(), metric, static_cast<const float*>(q.data()), nq, t.data(), dtype, n, dim,
                               scores.data()));
    expect_scores(metric, q, t, scores.data());
  }
}

INSTANTIATE_TEST_SUITE_P(AllShapes, SimilarityMatrix,
                         ::testing::Combine(::testing::ValuesIn(mt::storage_dtypes()),
                                            ::testing::ValuesIn(mt::metrics()),
                                            ::testing::ValuesIn(mt::awkward_dims())),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return mt::case_name(std::get<0>(p.param), std::get<1>(p.param), std::get<2>(p.param));
                         });

// Dot of vectors that are not unit: the bound scales with sum |x_i y_i|.
TEST(Similarity, DotOfNonUnitVectors) {
  auto rng = mt::rng_for_test();
  for (const int32_t dtype : mt::storage_dtypes()) {
    for (const size_t dim : {size_t{5}, size_t{768}}) {
      Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 4, dim);
      Matrix t = mt::random_matrix(rng, dtype, 17, dim);
      // Spread magnitudes over a few orders.
      for (size_t j = 0; j < dim; ++j) {
        q.set(1, j, static_cast<float>(q.row(1)[j] * 40.0));
        t.set(3, j, static_cast<float>(t.row(3)[j] * 0.01));
      }
      Buf<float> scores(4 * 17);
      mt::poison_f32(scores.data(), 4 * 17);
      ASSERT_OK(mnemo_similarity(mt::rt(), MNEMO_METRIC_DOT, static_cast<const float*>(q.data()), 4, t.data(), dtype,
                                 17, dim, scores.data()));
      expect_scores(MNEMO_METRIC_DOT, q, t, scores.data());
    }
  }
}

// Comparing a set with itself: cosine 1, squared L2 0, on the diagonal.
TEST(Similarity, SelfComparison) {
  auto rng = mt::rng_for_test();
  for (const int32_t metric : mt::metrics()) {
    const Matrix x = mt::random_matrix(rng, MNEMO_DTYPE_F32, 9, 127, metric == MNEMO_METRIC_DOT);
    Buf<float> scores(81);
    mt::poison_f32(scores.data(), 81);
    ASSERT_OK(mnemo_similarity(mt::rt(), metric, static_cast<const float*>(x.data()), 9, x.data(), MNEMO_DTYPE_F32, 9,
                               127, scores.data()));
    expect_scores(metric, x, x, scores.data());
  }
}

// Cosine with a zero-norm vector is 0 (not NaN), on either side.
TEST(Similarity, CosineWithZeroVectorIsZero) {
  auto rng = mt::rng_for_test();
  for (const int32_t dtype : mt::storage_dtypes()) {
    Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 5);
    Matrix t = mt::random_matrix(rng, dtype, 3, 5);
    for (size_t j = 0; j < 5; ++j) {
      q.set(1, j, 0.0f);
      t.set(2, j, 0.0f);
    }
    Buf<float> scores(6);
    mt::poison_f32(scores.data(), 6);
    ASSERT_OK(mnemo_similarity(mt::rt(), MNEMO_METRIC_COSINE, static_cast<const float*>(q.data()), 2, t.data(), dtype,
                               3, 5, scores.data()));
    EXPECT_EQ(scores[2], 0.0f);  // query 0, zero target
    for (size_t j = 0; j < 3; ++j) EXPECT_EQ(scores[3 + j], 0.0f) << j;
    expect_scores(MNEMO_METRIC_COSINE, q, t, scores.data());
  }
}

// nq = 0 or n = 0 does nothing: OK and the output untouched.
TEST(Similarity, EmptyInputsWriteNothing) {
  auto rng = mt::rng_for_test();
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 3);
  const Matrix t = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 3);
  Buf<float> scores(4);
  const auto before = scores.snapshot();
  EXPECT_OK(mnemo_similarity(mt::rt(), MNEMO_METRIC_DOT, static_cast<const float*>(q.data()), 0, t.data(),
                             MNEMO_DTYPE_F32, 2, 3, scores.data()));
  EXPECT_OK(mnemo_similarity(mt::rt(), MNEMO_METRIC_DOT, static_cast<const float*>(q.data()), 2, t.data(),
                             MNEMO_DTYPE_F32, 0, 3, scores.data()));
  EXPECT_TRUE(scores.same_as(before));
}

// One large case: n above 100k targets stored in f16.
TEST(Similarity, LargeTargetSet) {
  auto rng = mt::rng_for_test();
  const size_t nq = 2, n = 100003, dim = 5;
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, dim);
  const Matrix t = mt::random_matrix(rng, MNEMO_DTYPE_F16, n, dim);
  Buf<float> scores(nq * n);
  mt::poison_f32(scores.data(), nq * n);
  ASSERT_OK(mnemo_similarity(mt::rt(), MNEMO_METRIC_COSINE, static_cast<const float*>(q.data()), nq, t.data(),
                             MNEMO_DTYPE_F16, n, dim, scores.data()));
  expect_scores(MNEMO_METRIC_COSINE, q, t, scores.data());
}

// Many queries at once (the batched path) agree with the reference too.
TEST(Similarity, QueryBatch) {
  auto rng = mt::rng_for_test();
  const size_t nq = 67, n = 130, dim = 768;
  for (const int32_t metric : mt::metrics()) {
    const bool unit = metric == MNEMO_METRIC_DOT;
    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, dim, unit);
    const Matrix t = mt::random_matrix(rng, MNEMO_DTYPE_BF16, n, dim, unit);
    Buf<float> scores(nq * n);
    mt::poison_f32(scores.data(), nq * n);
    ASSERT_OK(mnemo_similarity(mt::rt(), metric, static_cast<const float*>(q.data()), nq, t.data(), MNEMO_DTYPE_BF16, n,
                               dim, scores.data()));
    expect_scores(metric, q, t, scores.data());
  }
}

// Near-duplicate pairs in a batch: small squared distances keep their
// relative accuracy.
TEST(Similarity, NearDuplicatesInABatch) {
  auto rng = mt::rng_for_test();
  const size_t nq = 40, n = 60, dim = 768;
  const Matrix t = mt::random_matrix(rng, MNEMO_DTYPE_F32, n, dim);
  Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, dim);
  for (size_t i = 0; i < nq; ++i)
    for (size_t j = 0; j < dim; ++j) q.set(i, j, static_cast<float>(t.row(i)[j] + 1e-3 * mt::rand_nonzero(rng)));
  for (const int32_t metric : mt::metrics()) {
    Buf<float> scores(nq * n);
    mt::poison_f32(scores.data(), nq * n);
    ASSERT_OK(mnemo_similarity(mt::rt(), metric, static_cast<const float*>(q.data()), nq, t.data(), MNEMO_DTYPE_F32, n,
                               dim, scores.data()));
    expect_scores(metric, q, t, scores.data());
  }
}

}  // namespace
