// Large writes reach the device through pinned staging in chunks (two
// buffers in turn, kernels/device/device_store.cu): every row of two adds
// that span several chunks, and of an upsert of a span in the middle, must
// land in its own slot. Each sampled row, used as a query, must find itself
// first with a cosine of 1 (rows at the chunk boundaries, the last partial
// chunk and random ones), on f32 rows whose length is padded on the device
// (dim 197), f16 and bf16. Skips, saying why, where no CUDA backend can be
// created.
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "../support.h"

namespace {

using mt::Buf;

struct Case {
  int32_t dtype;
  uint64_t dim, n;
};

// Bytes per row as the host store keeps them.
uint64_t row_bytes(const Case& c) { return c.dim * (c.dtype == MNEMO_DTYPE_F32 ? 4 : 2); }

// The rows that must find themselves: chunk edges, the end, random ones.
std::vector<uint64_t> sample_rows(std::mt19937_64& rng, const Case& c, uint64_t lo, uint64_t hi) {
  const uint64_t per = (uint64_t{32} << 20) / row_bytes(c);  // rows of one staging chunk
  std::set<uint64_t> s{lo, hi - 1};
  for (uint64_t e = lo + per; e < hi; e += per) s.insert({e - 1, e});
  for (int i = 0; i < 40; ++i) s.insert(lo + rng() % (hi - lo));
  return {s.begin(), s.end()};
}

void expect_found(mnemo_store* st, const Buf<float>& v, const Buf<uint64_t>& ids, uint64_t dim,
                  const std::vector<uint64_t>& rows, const std::string& what) {
  Buf<float> q(dim), score(1);
  Buf<uint64_t> id(1);
  for (uint64_t r : rows) {
    std::memcpy(q.data(), &v[r * dim], dim * 4);
    id[0] = ~uint64_t{0} - 1;
    mt::poison_f32(score.data(), 1);
    ASSERT_OK(mnemo_store_search(st, q.data(), 1, 1, nullptr, id.data(), score.data()));
    ASSERT_EQ(id[0], ids[r]) << what << ": row " << r;
    EXPECT_NEAR(score[0], 1.0f, 2e-3f) << what << ": row " << r;
  }
}

class GpuUpload : public ::testing::TestWithParam<Case> {};

TEST_P(GpuUpload, StagedRowsLandInTheirSlots) {
  const Case c = GetParam();
  std::string why;
  auto rt = mt::cuda_runtime_or_why(&why);
  if (!rt) GTEST_SKIP() << "no CUDA backend on this machine: " << why;
  // At least two chunks and a partial one, so both buffers are reused.
  ASSERT_GT(c.n * row_bytes(c), uint64_t{80} << 20);
  auto rng = mt::rng_for_test();
  auto st = mt::make_store(c.dim, c.dtype, MNEMO_METRIC_COSINE, rt.get());
  Buf<uint64_t> ids(c.n);
  std::set<uint64_t> seen;
  for (size_t i = 0; i < c.n; ++i) {
    do ids[i] = rng() % (100 * c.n);
    while (!seen.insert(ids[i]).second);
  }
  Buf<float> v(c.n * c.dim);
  for (size_t i = 0; i < v.size(); ++i) v[i] = mt::rand_nonzero(rng);
  // Two adds of new ids: the second's chunks start past the slots the first
  // filled.
  const uint64_t part = c.n / 3;
  Buf<uint64_t> tail_ids(c.n - part);
  Buf<float> tail_rows((c.n - part) * c.dim);
  std::memcpy(tail_ids.data(), &ids[part], tail_ids.size() * 8);
  std::memcpy(tail_rows.data(), &v[part * c.dim], tail_rows.size() * 4);
  ASSERT_OK(mnemo_store_add(st.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, part));
  expect_found(st.get(), v, ids, c.dim, sample_rows(rng, c, 0, part), "first add");
  ASSERT_OK(mnemo_store_add(st.get(), tail_ids.data(), tail_rows.data(), MNEMO_DTYPE_F32, c.n - part));
  expect_found(st.get(), v, ids, c.dim, sample_rows(rng, c, 0, c.n), "second add");
  // An upsert of a span past the staging size, in the middle of the store.
  const uint64_t lo = c.n / 5, hi = c.n * 4 / 5;
  for (size_t i = lo * c.dim; i < hi * c.dim; ++i) v[i] = mt::rand_nonzero(rng);
  Buf<uint64_t> span_ids(hi - lo);
  Buf<float> span_rows((hi - lo) * c.dim);  // aligned copies, as the call requires
  std::memcpy(span_ids.data(), &ids[lo], (hi - lo) * 8);
  std::memcpy(span_rows.data(), &v[lo * c.dim], span_rows.size() * 4);
  ASSERT_OK(mnemo_store_add(st.get(), span_ids.data(), span_rows.data(), MNEMO_DTYPE_F32, hi - lo));
  expect_found(st.get(), v, ids, c.dim, sample_rows(rng, c, lo, hi), "upserted span");
  expect_found(st.get(), v, ids, c.dim, sample_rows(rng, c, 0, lo), "before the span");
  expect_found(st.get(), v, ids, c.dim, sample_rows(rng, c, hi, c.n), "after the span");
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  return mt::case_name(i.param.dtype, MNEMO_METRIC_COSINE, i.param.dim) + "_n" + std::to_string(i.param.n);
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuUpload,
                         ::testing::Values(Case{MNEMO_DTYPE_F32, 197, 110017}, Case{MNEMO_DTYPE_F16, 384, 120011},
                                           Case{MNEMO_DTYPE_BF16, 100, 430009}),
                         case_name);

}  // namespace
