// Filtered searches whose matches the GPU gathers (the selective plan's
// scans of per-query slot lists: the staged gather where a pass's longest
// list times its queries reaches MNEMO_GATHER_MIN_ROWS slots, 1 in the GPU
// suites' run of this file; the span scan otherwise or with
// MNEMO_GATHER_STAGED=0) against the float64 reference, and bit for bit
// against the same matches given as an id allow-list (the masked scan over
// every row): every dtype and metric, widths from 1 to 512, k from 1 to 256
// and beyond the matches, one query and many, with and without bias. Skips
// where no GPU is usable.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../fields_check.h"
#include "../store_model.h"
#include "cuda_fixture.h"

namespace {

using mt::Matrix;
using mt::Results;
using mt::StoreModel;
using namespace mt::fields;

constexpr int32_t kF32 = MNEMO_DTYPE_F32, kF16 = MNEMO_DTYPE_F16, kBF16 = MNEMO_DTYPE_BF16;
constexpr int32_t kCos = MNEMO_METRIC_COSINE, kDot = MNEMO_METRIC_DOT, kL2 = MNEMO_METRIC_L2SQ;

// Three tags on about a fifth, a fiftieth and a five-hundredth of the rows
// (each at most a quarter of the store: the selective plan).
const char* const kTagNames[] = {"wide", "narrow", "rare"};
const uint64_t kTagEvery[] = {5, 50, 500};

struct Tagged {
  mt::StorePtr store;
  StoreModel model;
  std::vector<std::set<uint64_t>> with;  // ids holding each tag
};

Tagged make_tagged(mnemo_runtime* rt, std::mt19937_64& g, size_t n, size_t dim, int32_t dt, int32_t me, bool bias) {
  Tagged t{mt::make_store(dim, dt, me, rt), StoreModel(dim, dt, me), std::vector<std::set<uint64_t>>(3)};
  EXPECT_TRUE(t.store);
  const auto ids = mt::distinct_ids(g, n);
  const Matrix rows = mt::random_matrix(g, kF32, n, dim);
  std::vector<std::vector<const char*>> tags(n);
  std::vector<mnemo_memory_fields> fields(n, mnemo_memory_fields_default());
  for (size_t i = 0; i < n; ++i) {
    for (int j = 0; j < 3; ++j)
      if (g() % kTagEvery[j] == 0) {
        tags[i].push_back(kTagNames[j]);
        t.with[j].insert(ids[i]);
      }
    fields[i].set = MNEMO_FIELD_TAGS;
    fields[i].tags = tags[i].data();
    fields[i].tag_count = static_cast<uint32_t>(tags[i].size());
  }
  mt::Buf<uint64_t> id_buf(n);
  for (size_t i = 0; i < n; ++i) id_buf[i] = ids[i];
  EXPECT_EQ(
      mnemo_store_add_with_fields(t.store.get(), id_buf.data(), rows.data(), kF32, n, nullptr, nullptr, fields.data()),
      MNEMO_OK)
      << mnemo_last_error();
  t.model.add(ids, rows);
  if (bias) {
    std::vector<uint64_t> bid;
    std::vector<float> b;
    for (size_t i = 0; i < n; i += 7) {
      bid.push_back(ids[i]);
      b.push_back(0.25f * mt::rand_nonzero(g));
      t.model.set_bias(ids[i], b.back());
    }
    EXPECT_EQ(mt::store_set_bias(t.store.get(), bid, b), MNEMO_OK) << mnemo_last_error();
  }
  return t;
}

uint64_t on_device(const mnemo_store* s) {
  mnemo_store_statistics st{};
  st.struct_size = sizeof st;
  EXPECT_EQ(mnemo_store_stats(s, &st), MNEMO_OK) << mnemo_last_error();
  return st.filtered_on_device;
}

// Queries q searched with tag tag_of[i] each (where for one query,
// where_each for more), checked against the reference over that tag's ids
// and, bit for bit, against each query searched alone with the ids as an
// allow-list.
void check_tags(const Tagged& t, const Matrix& q, const std::vector<int>& tag_of, size_t k, bool bias,
                const std::string& at) {
  std::vector<std::unique_ptr<FilterPtr>> filters;
  for (int j = 0; j < 3; ++j) filters.push_back(std::make_unique<FilterPtr>(*node_of(Node::tags_any, {kTagNames[j]})));
  std::vector<const mnemo_filter*> each;
  for (const int j : tag_of) each.push_back(filters[j]->f);
  mnemo_search_options o = mnemo_search_options_default();
  o.apply_bias = bias ? 1 : 0;
  if (q.rows == 1)
    o.where = each[0];
  else
    o.where_each = each.data();
  const uint64_t before = on_device(t.store.get());
  Results got;
  ASSERT_EQ(mt::store_search(t.store.get(), q, k, &o, &got), MNEMO_OK) << at << ": " << mnemo_last_error();
  EXPECT_EQ(on_device(t.store.get()), before + q.rows) << at << ": the filters were evaluated on the device";
  for (size_t i = 0; i < q.rows; ++i) {
    const std::set<uint64_t>& allow = t.with[tag_of[i]];
    Matrix one(kF32, 1, q.dim);
    one.copy_row(0, q, i);
    Results alone_got;
    alone_got.nq = 1;
    alone_got.k = k;
    alone_got.ids = mt::Buf<uint64_t>(k);
    alone_got.scores = mt::Buf<float>(k);
    std::memcpy(alone_got.ids.data(), got.row_ids(i), k * 8);
    std::memcpy(alone_got.scores.data(), got.row_scores(i), k * 4);
    mt::expect_results(t.model, one, alone_got, bias, &allow);
    const std::vector<uint64_t> allowed(allow.begin(), allow.end());
    mt::Buf<uint64_t> allow_buf(std::max<size_t>(allowed.size(), 1));
    for (size_t j = 0; j < allowed.size(); ++j) allow_buf[j] = allowed[j];
    mnemo_search_options m = mnemo_search_options_default();
    m.apply_bias = o.apply_bias;
    m.filter_kind = MNEMO_FILTER_IDS;
    m.filter_ids = allow_buf.data();
    m.filter_count = allowed.size();
    Results masked;
    ASSERT_EQ(mt::store_search(t.store.get(), one, k, &m, &masked), MNEMO_OK) << at << ": " << mnemo_last_error();
    EXPECT_TRUE(mt::same_results(alone_got, masked))
        << at << ", query " << i << " (tag " << kTagNames[tag_of[i]] << ", " << allow.size()
        << " matches): the gathered rows' keys differ from the masked scan's";
  }
}

class GpuGather : public mt::CudaRuntimeTest {};

// One dtype a case (so that a sanitizer can take one at a time).
class GpuGatherDtype : public GpuGather, public ::testing::WithParamInterface<int32_t> {};

TEST_P(GpuGatherDtype, EveryMetricAndWidth) {
  auto g = mt::rng_for_test();
  const int32_t dt = GetParam();
  const size_t ks[] = {1, 31, 32, 33, 100, 256};
  size_t c = 0;
  for (const int32_t me : {kCos, kDot, kL2})
    for (const size_t dim : {1, 3, 17, 33, 64, 100, 192, 256, 512}) {
      const bool bias = c % 3 == 1;
      const size_t n = 2003 + g() % 2000, k = ks[c++ % 6];
      const Tagged t = make_tagged(rt_.get(), g, n, dim, dt, me, bias);
      const std::string at = mt::case_name(dt, me, dim) + "_n" + std::to_string(n) + "_k" + std::to_string(k);
      check_tags(t, mt::random_matrix(g, kF32, 1, dim), {0}, k, bias, at + " one query");
      check_tags(t, mt::random_matrix(g, kF32, 5, dim), {0, 1, 2, 1, 0}, k, bias, at + " five queries");
      if (HasFatalFailure()) return;
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuGatherDtype, ::testing::Values(kF32, kF16, kBF16),
                         [](const ::testing::TestParamInfo<int32_t>& i) {
                           return std::string(mt::dtype_name(i.param));
                         });

// Lists longer than the warps' first chunks (many queries share the grid,
// so each warp reads several chunks of 32 entries and cycles its copies'
// stages), and k beyond the rarest tag's matches.
TEST_F(GpuGather, LongListsAndShortOnes) {
  auto g = mt::rng_for_test();
  for (const int32_t dt : {kF16, kBF16, kF32})
    for (const size_t dim : {192, 40}) {
      const size_t n = 60001;
      const Tagged t = make_tagged(rt_.get(), g, n, dim, dt, kCos, false);
      const std::string at = mt::case_name(dt, kCos, dim);
      std::vector<int> tag_of(64);
      for (size_t i = 0; i < tag_of.size(); ++i) tag_of[i] = i % 9 == 4 ? 2 : i % 5 == 1 ? 1 : 0;
      for (const size_t k : {10, 100, 250}) {
        ASSERT_LT(t.with[2].size(), 250u) << at;
        check_tags(t, mt::random_matrix(g, kF32, tag_of.size(), dim), tag_of, k, false, at + " k" + std::to_string(k));
        if (HasFatalFailure()) return;
      }
      check_tags(t, mt::random_matrix(g, kF32, 1, dim), {0}, 10, false, at + " one query");
    }
}

}  // namespace
