// The CPU exact scan on every path it takes (one query streamed over the
// store's slots split among threads or over whole query groups, batches
// through sgemm, small and large stores), against the float64 reference:
// every dtype and metric, widths from 1 to 4096, k around the list sizes and
// beyond the store, dead slots, filters and bias. Outputs are poisoned
// before each call, and a batch's rows must equal the same queries searched
// one at a time, bit for bit.
#include <cmath>
#include <set>
#include <tuple>

#include "store_model.h"
#include "topk_check.h"

namespace {

using mt::Buf;
using mt::Matrix;
using mt::Results;
using mt::StoreModel;

// Slots past the GEMM path's minimum store (2048), so batches take it.
constexpr size_t kRows = 2600;

// Searches with outputs poisoned first: ids 0xAB.., scores a NaN pattern.
Results search(const mnemo_store* s, const Matrix& q, size_t k, const mnemo_search_options& o) {
  Results r;
  r.nq = q.rows;
  r.k = k;
  r.ids = Buf<uint64_t>(q.rows * k);
  r.scores = Buf<float>(q.rows * k);
  mt::poison_f32(r.scores.data(), q.rows * k);
  EXPECT_OK(mnemo_store_search(s, static_cast<const float*>(q.data()), q.rows, k, &o, r.ids.data(), r.scores.data()));
  return r;
}

// Row i of a batch equals the single search of that query, bit for bit.
bool same_row(const Results& batch, size_t i, const Results& one) {
  return std::memcmp(batch.row_ids(i), one.row_ids(0), batch.k * sizeof(uint64_t)) == 0 &&
         std::memcmp(batch.row_scores(i), one.row_scores(0), batch.k * sizeof(float)) == 0;
}

// A store of n rows with random biases and a few removed rows (dead slots).
struct Fixture {
  Fixture(std::mt19937_64& rng, int32_t dtype, int32_t metric, size_t dim, size_t n)
      : store(mt::make_store(dim, dtype, metric)), model(dim, dtype, metric) {
    if (!store) return;
    ids = mt::distinct_ids(rng, n);
    const Matrix m = mt::random_matrix(rng, dtype, n, dim, metric == MNEMO_METRIC_DOT);
    EXPECT_OK(mt::store_add(store.get(), ids, m));
    model.add(ids, m);
    std::vector<float> biases(n);
    for (size_t i = 0; i < n; ++i) {
      biases[i] = mt::rand_nonzero(rng) * (metric == MNEMO_METRIC_L2SQ ? 2.0f : 0.25f);
      model.set_bias(ids[i], biases[i]);
    }
    EXPECT_OK(mt::store_set_bias(store.get(), ids, biases));
    std::vector<uint64_t> gone;
    for (size_t i = 0; i < n; i += 37) gone.push_back(ids[i]);
    EXPECT_OK(mt::store_remove(store.get(), gone, nullptr));
    model.remove(gone);
  }
  mt::StorePtr store;
  StoreModel model;
  std::vector<uint64_t> ids;
};

// Every k of the brief around list sizes, and beyond the store.
std::vector<size_t> ks(size_t n) { return {1, 31, 32, 33, 100, 1000, 1024, 2048, n + 7}; }

using Param = std::tuple<int32_t, int32_t, size_t>;  // dtype, metric, dim

class CpuScan : public ::testing::TestWithParam<Param> {};

TEST_P(CpuScan, EveryPathMatchesReference) {
  const auto [dtype, metric, dim] = GetParam();
  auto rng = mt::rng_for_test();
  Fixture f(rng, dtype, metric, dim, kRows);
  ASSERT_TRUE(f.store);
  // Seven queries: a batch takes the GEMM path; each alone is streamed.
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 7, dim, metric == MNEMO_METRIC_DOT);
  std::vector<Matrix> single;
  for (size_t i = 0; i < q.rows; ++i) {
    single.emplace_back(MNEMO_DTYPE_F32, 1, dim);
    single.back().copy_row(0, q, i);
  }
  // Roughly 60% of the ids allowed.
  std::vector<uint64_t> allowed;
  for (const uint64_t id : f.ids)
    if (mt::rand_below(rng, 5) < 3) allowed.push_back(id);
  Buf<uint64_t> allow_buf(allowed.size());
  std::copy(allowed.begin(), allowed.end(), allow_buf.data());
  std::set<uint64_t> allow;
  for (const uint64_t id : allowed)
    if (f.model.has(id)) allow.insert(id);

  for (const bool filtered : {false, true}) {
    mnemo_search_options o = mnemo_search_options_default();
    o.apply_bias = filtered ? 1 : 0;  // bias with the filter, plain without
    if (filtered) {
      o.filter_kind = MNEMO_FILTER_IDS;
      o.filter_ids = allow_buf.data();
      o.filter_count = allowed.size();
    }
    std::vector<std::vector<ref::Candidate>> cands;
    for (size_t i = 0; i < q.rows; ++i)
      cands.push_back(f.model.candidates(q.row(i), filtered, filtered ? &allow : nullptr));
    for (const size_t k : ks(kRows)) {
      const Results batch = search(f.store.get(), q, k, o);
      for (size_t i = 0; i < q.rows; ++i) {
        EXPECT_TRUE(mt::check_topk(metric, cands[i], k, batch.row_ids(i), batch.row_scores(i)))
            << "batch query " << i << ", k " << k << (filtered ? ", filter and bias" : "");
        if (i >= 3) continue;  // three of them one at a time
        const Results one = search(f.store.get(), single[i], k, o);
        EXPECT_TRUE(mt::check_topk(metric, cands[i], k, one.row_ids(0), one.row_scores(0)))
            << "single query " << i << ", k " << k << (filtered ? ", filter and bias" : "");
        EXPECT_TRUE(same_row(batch, i, one)) << "query " << i << ", k " << k << ": batch and single differ";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, CpuScan,
                         ::testing::Combine(::testing::ValuesIn(mt::storage_dtypes()),
                                            ::testing::ValuesIn(mt::metrics()),
                                            ::testing::Values(size_t{1}, size_t{3}, size_t{17}, size_t{33}, size_t{64},
                                                              size_t{100}, size_t{1000}, size_t{4096})),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return mt::case_name(std::get<0>(p.param), std::get<1>(p.param), std::get<2>(p.param));
                         });

// A store past the slot split (16384 slots): one query's scan runs in
// chunks over both threads, and lists fill and refill across chunks.
TEST(CpuScanLarge, ChunkedSingleQueryMatchesReference) {
  auto rng = mt::rng_for_test();
  for (const int32_t metric : mt::metrics()) {
    for (const size_t dim : {size_t{3}, size_t{64}}) {
      const int32_t dtype = dim == 3 ? MNEMO_DTYPE_BF16 : MNEMO_DTYPE_F16;
      const size_t n = 20000;
      Fixture f(rng, dtype, metric, dim, n);
      ASSERT_TRUE(f.store);
      const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 1, dim, metric == MNEMO_METRIC_DOT);
      for (const bool bias : {false, true}) {
        mnemo_search_options o = mnemo_search_options_default();
        o.apply_bias = bias ? 1 : 0;
        const auto cands = f.model.candidates(q.row(0), bias);
        for (const size_t k : {size_t{1}, size_t{33}, size_t{1000}, size_t{2048}, n + 1}) {
          const Results r = search(f.store.get(), q, k, o);
          EXPECT_TRUE(mt::check_topk(metric, cands, k, r.row_ids(0), r.row_scores(0)))
              << mt::metric_name(metric) << " dim " << dim << " k " << k << (bias ? " bias" : "");
        }
      }
    }
  }
}

}  // namespace
