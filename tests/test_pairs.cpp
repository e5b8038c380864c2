// mnemo_score_pairs against the float64 reference.
#include <cmath>
#include <tuple>

#include "reference.h"
#include "support.h"

namespace {

using mt::Buf;
using mt::Matrix;

// Index arrays of either index dtype built from 64-bit values.
struct Indices {
  int32_t dtype;
  Buf<unsigned char> src, tgt;
  Indices(int32_t dt, const std::vector<uint64_t>& s, const std::vector<uint64_t>& t)
      : dtype(dt), src(s.size() * 8), tgt(t.size() * 8) {
    for (size_t p = 0; p < s.size(); ++p) {
      if (dt == MNEMO_DTYPE_U32) {
        const uint32_t a = static_cast<uint32_t>(s[p]), b = static_cast<uint32_t>(t[p]);
        std::memcpy(src.data() + 4 * p, &a, 4);
        std::memcpy(tgt.data() + 4 * p, &b, 4);
      } else {
        std::memcpy(src.data() + 8 * p, &s[p], 8);
        std::memcpy(tgt.data() + 8 * p, &t[p], 8);
      }
    }
  }
};

void expect_pair_scores(int32_t metric, const Matrix& table, const std::vector<uint64_t>& s,
                        const std::vector<uint64_t>& t, const float* scores) {
  size_t bad = 0;
  for (size_t p = 0; p < s.size(); ++p) {
    const double* x = table.row(s[p]);
    const double* y = table.row(t[p]);
    const double r = ref::score(metric, x, y, table.dim);
    const double tol = ref::score_tol(metric, x, y, table.dim, r);
    if (!(std::fabs(scores[p] - r) <= tol) && bad++ < 5)
      ADD_FAILURE() << "pair " << p << " (" << s[p] << ", " << t[p] << "): " << scores[p] << ", reference " << r
                    << " (tolerance " << tol << ")";
  }
  EXPECT_EQ(bad, 0u);
}

// Random pairs, plus repeated pairs, src == tgt and both ends of the table.
void make_pairs(std::mt19937_64& rng, size_t n_items, size_t n_pairs, std::vector<uint64_t>* s,
                std::vector<uint64_t>* t) {
  s->resize(n_pairs);
  t->resize(n_pairs);
  for (size_t p = 0; p < n_pairs; ++p) {
    (*s)[p] = mt::rand_below(rng, n_items);
    (*t)[p] = mt::rand_below(rng, n_items);
  }
  if (n_pairs >= 8) {
    (*s)[5] = (*s)[3];
    (*t)[5] = (*t)[3];
    (*t)[7] = (*s)[7];
    (*s)[0] = 0;
    (*t)[0] = n_items - 1;
    (*s)[1] = n_items - 1;
    (*t)[1] = n_items - 1;
  }
}

using Param = std::tuple<int32_t, int32_t, size_t>;  // dtype, metric, dim

class PairScores : public ::testing::TestWithParam<Param> {};

TEST_P(PairScores, MatchReference) {
  const auto [dtype, metric, dim] = GetParam();
  auto rng = mt::rng_for_test();
  const size_t n_items = 37;
  const Matrix table = mt::random_matrix(rng, dtype, n_items, dim, metric == MNEMO_METRIC_DOT);
  for (const int32_t idx : {MNEMO_DTYPE_U32, MNEMO_DTYPE_U64}) {
    for (const size_t n_pairs : {size_t{1}, size_t{50}}) {
      std::vector<uint64_t> s, t;
      make_pairs(rng, n_items, n_pairs, &s, &t);
      const Indices ix(idx, s, t);
      Buf<float> scores(n_pairs);
      mt::poison_f32(scores.data(), n_pairs);
      ASSERT_OK(mnemo_score_pairs(mt::rt(), metric, table.data(), dtype, n_items, dim, ix.src.data(), ix.tgt.data(),
                                  idx, n_pairs, scores.data()));
      expect_pair_scores(metric, table, s, t, scores.data());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllShapes, PairScores,
                         ::testing::Combine(::testing::ValuesIn(mt::storage_dtypes()),
                                            ::testing::ValuesIn(mt::metrics()),
                                            ::testing::ValuesIn(mt::awkward_dims())),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return mt::case_name(std::get<0>(p.param), std::get<1>(p.param), std::get<2>(p.param));
                         });

// An index >= n_items is refused, the message names the pair position, and
// nothing is written, for either array and either index dtype.
TEST(Pairs, OutOfRangeNamesPairPosition) {
  auto rng = mt::rng_for_test();
  const size_t n_items = 20, dim = 5, n_pairs = 50, bad_pos = 37;
  const Matrix table = mt::random_matrix(rng, MNEMO_DTYPE_F32, n_items, dim);
  for (const int32_t idx : {MNEMO_DTYPE_U32, MNEMO_DTYPE_U64}) {
    for (const bool in_src : {true, false}) {
      for (const uint64_t bad : {uint64_t{20}, uint64_t{1000}, uint64_t{0xFFFFFFFFu}}) {
        std::vector<uint64_t> s, t;
        make_pairs(rng, n_items, n_pairs, &s, &t);
        (in_src ? s : t)[bad_pos] = bad;
        const Indices ix(idx, s, t);
        Buf<float> scores(n_pairs);
        const auto before = scores.snapshot();
        EXPECT_TRUE(
            mt::failed_with(mnemo_score_pairs(mt::rt(), MNEMO_METRIC_COSINE, table.data(), MNEMO_DTYPE_F32, n_items,
                                              dim, ix.src.data(), ix.tgt.data(), idx, n_pairs, scores.data()),
                            MNEMO_E_OUT_OF_RANGE))
            << mt::dtype_name(idx) << (in_src ? " src " : " tgt ") << bad;
        EXPECT_TRUE(mt::names_number(mt::last_error(), bad_pos))
            << "message does not name pair " << bad_pos << ": " << mt::last_error();
        EXPECT_TRUE(scores.same_as(before));
      }
    }
  }
  // A 64-bit index beyond 32 bits is out of range too (not truncated).
  std::vector<uint64_t> s(n_pairs, 1), t(n_pairs, 2);
  s[bad_pos] = (uint64_t{1} << 32) + 3;
  const Indices ix(MNEMO_DTYPE_U64, s, t);
  Buf<float> scores(n_pairs);
  const auto before = scores.snapshot();
  EXPECT_TRUE(mt::failed_with(mnemo_score_pairs(mt::rt(), MNEMO_METRIC_DOT, table.data(), MNEMO_DTYPE_F32, n_items, dim,
                                                ix.src.data(), ix.tgt.data(), MNEMO_DTYPE_U64, n_pairs, scores.data()),
                              MNEMO_E_OUT_OF_RANGE));
  EXPECT_TRUE(scores.same_as(before));
}

// An empty table makes any index out of range.
TEST(Pairs, EmptyTableRefusesPairs) {
  auto rng = mt::rng_for_test();
  const Matrix table = mt::random_matrix(rng, MNEMO_DTYPE_F32, 1, 3);
  const Indices ix(MNEMO_DTYPE_U32, {0}, {0});
  Buf<float> scores(1);
  const auto before = scores.snapshot();
  EXPECT_TRUE(mt::failed_with(mnemo_score_pairs(mt::rt(), MNEMO_METRIC_DOT, table.data(), MNEMO_DTYPE_F32, 0, 3,
                                                ix.src.data(), ix.tgt.data(), MNEMO_DTYPE_U32, 1, scores.data()),
                              MNEMO_E_OUT_OF_RANGE));
  EXPECT_TRUE(scores.same_as(before));
}

TEST(Pairs, NoPairsWritesNothing) {
  auto rng = mt::rng_for_test();
  const Matrix table = mt::random_matrix(rng, MNEMO_DTYPE_F16, 4, 3);
  const Indices ix(MNEMO_DTYPE_U64, {0, 1}, {2, 3});
  Buf<float> scores(2);
  const auto before = scores.snapshot();
  EXPECT_OK(mnemo_score_pairs(mt::rt(), MNEMO_METRIC_L2SQ, table.data(), MNEMO_DTYPE_F16, 4, 3, ix.src.data(),
                              ix.tgt.data(), MNEMO_DTYPE_U64, 0, scores.data()));
  EXPECT_TRUE(scores.same_as(before));
}

// Every pair is the same: all scores are equal, in input order.
TEST(Pairs, RepeatedPairsScoreIdentically) {
  auto rng = mt::rng_for_test();
  const Matrix table = mt::random_matrix(rng, MNEMO_DTYPE_BF16, 9, 768);
  const std::vector<uint64_t> s(64, 4), t(64, 7);
  const Indices ix(MNEMO_DTYPE_U32, s, t);
  Buf<float> scores(64);
  mt::poison_f32(scores.data(), 64);
  ASSERT_OK(mnemo_score_pairs(mt::rt(), MNEMO_METRIC_COSINE, table.data(), MNEMO_DTYPE_BF16, 9, 768, ix.src.data(),
                              ix.tgt.data(), MNEMO_DTYPE_U32, 64, scores.data()));
  expect_pair_scores(MNEMO_METRIC_COSINE, table, s, t, scores.data());
  for (size_t p = 1; p < 64; ++p) EXPECT_EQ(scores[p], scores[0]) << p;
}

// One large case: more than 100k pairs.
TEST(Pairs, LargePairCount) {
  auto rng = mt::rng_for_test();
  const size_t n_items = 1000, dim = 16, n_pairs = 150000;
  const Matrix table = mt::random_matrix(rng, MNEMO_DTYPE_F16, n_items, dim, true);
  std::vector<uint64_t> s, t;
  make_pairs(rng, n_items, n_pairs, &s, &t);
  const Indices ix(MNEMO_DTYPE_U64, s, t);
  Buf<float> scores(n_pairs);
  mt::poison_f32(scores.data(), n_pairs);
  ASSERT_OK(mnemo_score_pairs(mt::rt(), MNEMO_METRIC_DOT, table.data(), MNEMO_DTYPE_F16, n_items, dim, ix.src.data(),
                              ix.tgt.data(), MNEMO_DTYPE_U64, n_pairs, scores.data()));
  expect_pair_scores(MNEMO_METRIC_DOT, table, s, t, scores.data());
}

}  // namespace
