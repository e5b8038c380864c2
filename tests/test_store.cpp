// The memory store: add/upsert/remove, slots and compaction, filters, bias,
// top-k against the reference, save/open, and concurrent searches.
#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>
#include <tuple>

#include "store_model.h"
#include "topk_check.h"

namespace {

using mt::Buf;
using mt::Matrix;
using mt::Results;
using mt::StoreModel;

std::vector<uint64_t> distinct_ids(std::mt19937_64& rng, size_t n) {
  std::set<uint64_t> seen;
  std::vector<uint64_t> ids;
  while (ids.size() < n) {
    const uint64_t id = rng();
    if (id != MNEMO_NO_ID && seen.insert(id).second) ids.push_back(id);
  }
  return ids;
}

std::vector<uint64_t> range_ids(uint64_t first, size_t n) {
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = first + i;
  return ids;
}

uint64_t count_of(const mnemo_store* s) {
  uint64_t n = MNEMO_NO_ID;
  EXPECT_OK(mnemo_store_count(s, &n));
  return n;
}
uint64_t slot_count_of(const mnemo_store* s) {
  uint64_t n = MNEMO_NO_ID;
  EXPECT_OK(mnemo_store_slot_count(s, &n));
  return n;
}
uint64_t slot_of(const mnemo_store* s, uint64_t id) {
  uint64_t slot = MNEMO_NO_ID;
  EXPECT_OK(mnemo_store_slot_of(s, id, &slot));
  return slot;
}

// The stored vector of every model id equals the model's rounded values.
void expect_stored_vectors(const mnemo_store* s, const StoreModel& model) {
  Buf<float> v(model.dim());
  for (const uint64_t id : model.ids()) {
    mt::poison_f32(v.data(), model.dim());
    ASSERT_OK(mnemo_store_get(s, id, v.data()));
    for (size_t j = 0; j < model.dim(); ++j)
      ASSERT_EQ(static_cast<double>(v[j]), model.vec(id)[j]) << "id " << id << " [" << j << "]";
  }
}

// A temporary folder removed with its files at the end of the test.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/mnemo_test_XXXXXX";
    const char* p = mkdtemp(tmpl);
    path_ = p ? p : "";
  }
  ~TempDir() {
    for (const auto& f : files()) std::remove((path_ + "/" + f).c_str());
    rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    if (DIR* d = opendir(path_.c_str())) {
      while (const dirent* e = readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") out.push_back(n);
      }
      closedir(d);
    }
    return out;
  }

 private:
  std::string path_;
};

std::vector<char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}
void write_file(const std::string& path, const char* data, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data, static_cast<std::streamsize>(n));
}

// ---- top-k against the reference, every dtype x metric x dim -------------

using Param = std::tuple<int32_t, int32_t, size_t>;  // dtype, metric, dim

class StoreSearch : public ::testing::TestWithParam<Param> {};

TEST_P(StoreSearch, TopKMatchesReference) {
  const auto [dtype, metric, dim] = GetParam();
  auto rng = mt::rng_for_test();
  const bool unit = metric == MNEMO_METRIC_DOT;
  auto s = mt::make_store(dim, dtype, metric);
  ASSERT_TRUE(s);
  StoreModel model(dim, dtype, metric);

  // 29 vectors (below a warp): some given as F32, some in the store's dtype.
  const size_t n = 29;
  const std::vector<uint64_t> ids = distinct_ids(rng, n);
  const std::vector<uint64_t> first(ids.begin(), ids.begin() + 15);
  const std::vector<uint64_t> second(ids.begin() + 15, ids.end());
  const Matrix a = mt::random_matrix(rng, MNEMO_DTYPE_F32, first.size(), dim, unit);
  const Matrix b = mt::random_matrix(rng, dtype, second.size(), dim, unit);
  ASSERT_OK(mt::store_add(s.get(), first, a));
  ASSERT_OK(mt::store_add(s.get(), second, b));
  model.add(first, a);
  model.add(second, b);

  EXPECT_EQ(count_of(s.get()), n);
  EXPECT_EQ(slot_count_of(s.get()), n);
  expect_stored_vectors(s.get(), model);

  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 3, dim, unit);
  for (const size_t k : {size_t{1}, n, n + 5}) {
    Results r;
    ASSERT_OK(mt::store_search(s.get(), q, k, nullptr, &r));
    mt::expect_results(model, q, r, false);
  }
}

INSTANTIATE_TEST_SUITE_P(AllShapes, StoreSearch,
                         ::testing::Combine(::testing::ValuesIn(mt::storage_dtypes()),
                                            ::testing::ValuesIn(mt::metrics()),
                                            ::testing::ValuesIn(mt::awkward_dims())),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return mt::case_name(std::get<0>(p.param), std::get<1>(p.param), std::get<2>(p.param));
                         });

// ---- store basics -----------------------------------------------------------

TEST(Store, ShapeReportsCreationParameters) {
  for (const int32_t dtype : mt::storage_dtypes()) {
    for (const int32_t metric : mt::metrics()) {
      auto s = mt::make_store(5, dtype, metric);
      ASSERT_TRUE(s);
      uint64_t dim = 0;
      int32_t dt = 0, me = 0;
      ASSERT_OK(mnemo_store_shape(s.get(), &dim, &dt, &me));
      EXPECT_EQ(dim, 5u);
      EXPECT_EQ(dt, dtype);
      EXPECT_EQ(me, metric);
      EXPECT_OK(mnemo_store_shape(s.get(), nullptr, nullptr, nullptr));
      EXPECT_EQ(count_of(s.get()), 0u);
      EXPECT_EQ(slot_count_of(s.get()), 0u);
    }
  }
}

TEST(Store, LargestDimensionAccepted) {
  auto rng = mt::rng_for_test();
  auto s = mt::make_store(65536, MNEMO_DTYPE_BF16, MNEMO_METRIC_COSINE);
  ASSERT_TRUE(s);
  StoreModel model(65536, MNEMO_DTYPE_BF16, MNEMO_METRIC_COSINE);
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 65536);
  ASSERT_OK(mt::store_add(s.get(), {3, 4}, m));
  model.add({3, 4}, m);
  expect_stored_vectors(s.get(), model);
}

TEST(Store, SearchOptionsDefaults) {
  const mnemo_search_options o = mnemo_search_options_default();
  EXPECT_EQ(o.struct_size, sizeof(mnemo_search_options));
  EXPECT_EQ(o.filter_kind, MNEMO_FILTER_NONE);
  EXPECT_EQ(o.filter_ids, nullptr);
  EXPECT_EQ(o.filter_bitmap, nullptr);
  EXPECT_EQ(o.filter_count, 0u);
  EXPECT_EQ(o.apply_bias, 0u);
  EXPECT_EQ(o.reserved0, 0u);
}

// F32 input to a half store is rounded to nearest even, ties included.
TEST(Store, F32InputRoundsToNearestEven) {
  auto rng = mt::rng_for_test();
  const std::vector<float> ties_f16 = {1.0f + 0x1p-11f,              // halfway 1 | 1 + 2^-10: down to even
                                       1.0f + 3 * 0x1p-11f,          // halfway: up to even
                                       -(2.0f + 0x1p-10f),           // halfway at exponent 1, negative
                                       3 * 0x1p-25f,                 // subnormal halfway: up to 2^-23
                                       0x1p-14f - 0x1p-25f,          // halfway up into the smallest normal
                                       65519.0f,                     // just below the overflow threshold: 65504
                                       1.0f + 0x1p-11f + 0x1p-20f};  // just above halfway: up
  const std::vector<float> ties_bf16 = {
      1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(4.0f + 0x1p-6f), 1.0f + 0x1p-8f + 0x1p-20f, 3.0e38f, 1e-39f};
  for (const int32_t dtype : {MNEMO_DTYPE_F16, MNEMO_DTYPE_BF16}) {
    const auto& ties = dtype == MNEMO_DTYPE_F16 ? ties_f16 : ties_bf16;
    const size_t dim = ties.size();
    auto s = mt::make_store(dim, dtype, MNEMO_METRIC_DOT);
    ASSERT_TRUE(s);
    StoreModel model(dim, dtype, MNEMO_METRIC_DOT);
    Matrix m(MNEMO_DTYPE_F32, 5, dim);
    for (size_t j = 0; j < dim; ++j) m.set(0, j, ties[j]);
    for (size_t i = 1; i < 5; ++i)
      for (size_t j = 0; j < dim; ++j) m.set(i, j, mt::rand_nonzero(rng) * 3.0f);
    ASSERT_OK(mt::store_add(s.get(), {1, 2, 3, 4, 5}, m));
    model.add({1, 2, 3, 4, 5}, m);
    expect_stored_vectors(s.get(), model);
  }
}

TEST(Store, UpsertKeepsSlotAndBias) {
  auto rng = mt::rng_for_test();
  for (const int32_t metric : mt::metrics()) {
    auto s = mt::make_store(5, MNEMO_DTYPE_F32, metric);
    ASSERT_TRUE(s);
    StoreModel model(5, MNEMO_DTYPE_F32, metric);
    const std::vector<uint64_t> ids = {40, 10, 30, 20};
    const Matrix a = mt::random_matrix(rng, MNEMO_DTYPE_F32, 4, 5);
    ASSERT_OK(mt::store_add(s.get(), ids, a));
    model.add(ids, a);
    ASSERT_OK(mt::store_set_bias(s.get(), {10, 30}, {0.25f, -0.5f}));
    model.set_bias(10, 0.25f);
    model.set_bias(30, -0.5f);
    std::vector<uint64_t> slots;
    for (const uint64_t id : ids) slots.push_back(slot_of(s.get(), id));

    // Replace 10 and 30 and add a new id in the same call.
    const Matrix b = mt::random_matrix(rng, MNEMO_DTYPE_F32, 3, 5);
    ASSERT_OK(mt::store_add(s.get(), {30, 50, 10}, b));
    model.add({30, 50, 10}, b);
    EXPECT_EQ(count_of(s.get()), 5u);
    EXPECT_EQ(slot_count_of(s.get()), 5u);
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(slot_of(s.get(), ids[i]), slots[i]);
    EXPECT_EQ(slot_of(s.get(), 50), 4u);  // a new id takes a fresh slot at the end
    expect_stored_vectors(s.get(), model);

    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 5);
    mnemo_search_options o = mnemo_search_options_default();
    o.apply_bias = 1;
    Results r;
    ASSERT_OK(mt::store_search(s.get(), q, 5, &o, &r));
    mt::expect_results(model, q, r, true);
  }
}

TEST(Store, RepeatedIdInOneAddTakesLastVector) {
  auto rng = mt::rng_for_test();
  for (const int32_t dtype : mt::storage_dtypes()) {
    auto s = mt::make_store(127, dtype, MNEMO_METRIC_COSINE);
    ASSERT_TRUE(s);
    StoreModel model(127, dtype, MNEMO_METRIC_COSINE);
    const std::vector<uint64_t> ids = {7, 8, 7, 9, 7};
    const Matrix m = mt::random_matrix(rng, dtype, ids.size(), 127);
    ASSERT_OK(mt::store_add(s.get(), ids, m));
    model.add(ids, m);
    EXPECT_EQ(count_of(s.get()), 3u);
    EXPECT_EQ(slot_count_of(s.get()), 3u);
    expect_stored_vectors(s.get(), model);
    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 127);
    Results r;
    ASSERT_OK(mt::store_search(s.get(), q, 4, nullptr, &r));
    mt::expect_results(model, q, r, false);
  }
}

// Batches large enough to convert their rows over the cores: one of distinct
// ids (new ones and upserts of stored ones), then one that names ids twice
// (kept in order: the last row of an id wins), each against the model.
TEST(Store, LargeBatchesWithUpsertsAndRepeats) {
  auto rng = mt::rng_for_test();
  const uint64_t dim = 33;
  for (const int32_t dtype : mt::storage_dtypes()) {
    auto s = mt::make_store(dim, dtype, MNEMO_METRIC_COSINE);
    ASSERT_TRUE(s);
    StoreModel model(dim, dtype, MNEMO_METRIC_COSINE);
    std::vector<uint64_t> first(3000);
    for (uint64_t i = 0; i < first.size(); ++i) first[i] = 10 + 2 * i;
    const Matrix a = mt::random_matrix(rng, dtype, first.size(), dim);
    ASSERT_OK(mt::store_add(s.get(), first, a));
    model.add(first, a);
    std::vector<uint64_t> distinct;  // 2000 upserts, then 4500 new ids
    for (uint64_t i = 0; i < 2000; ++i) distinct.push_back(10 + 2 * (i * 7 % 3000));
    for (uint64_t i = 0; i < 4500; ++i) distinct.push_back(7 + 2 * i + 6000);
    const Matrix b = mt::random_matrix(rng, dtype, distinct.size(), dim);
    ASSERT_OK(mt::store_add(s.get(), distinct, b));
    model.add(distinct, b);
    // The last 3000 ids of that batch, 600 of them twice more; the first
    // 3500 keep the rows the spread conversion wrote.
    std::vector<uint64_t> repeats(distinct.begin() + 3500, distinct.end());
    for (int twice = 0; twice < 2; ++twice)
      for (uint64_t i = 0; i < 600; ++i) repeats.push_back(distinct[3500 + (i * 13) % 3000]);
    ASSERT_GE(repeats.size(), 4096u);
    const Matrix c = mt::random_matrix(rng, dtype, repeats.size(), dim);
    ASSERT_OK(mt::store_add(s.get(), repeats, c));
    model.add(repeats, c);
    EXPECT_EQ(count_of(s.get()), 3000u + 4500u);
    expect_stored_vectors(s.get(), model);
    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 5, dim);
    Results r;
    ASSERT_OK(mt::store_search(s.get(), q, 20, nullptr, &r));
    mt::expect_results(model, q, r, false);
  }
}

TEST(Store, AddNothing) {
  auto rng = mt::rng_for_test();
  auto s = mt::make_store(3, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
  ASSERT_TRUE(s);
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 1, 3);
  Buf<uint64_t> ids(1);
  ids[0] = 1;
  EXPECT_OK(mnemo_store_add(s.get(), ids.data(), m.data(), MNEMO_DTYPE_F32, 0));
  EXPECT_EQ(count_of(s.get()), 0u);
}

TEST(Store, RemoveCountAndGet) {
  auto rng = mt::rng_for_test();
  auto s = mt::make_store(5, MNEMO_DTYPE_F16, MNEMO_METRIC_L2SQ);
  ASSERT_TRUE(s);
  StoreModel model(5, MNEMO_DTYPE_F16, MNEMO_METRIC_L2SQ);
  const std::vector<uint64_t> ids = range_ids(1000, 20);
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 20, 5);
  ASSERT_OK(mt::store_add(s.get(), ids, m));
  model.add(ids, m);

  uint64_t removed = 12345;
  ASSERT_OK(mt::store_remove(s.get(), {1003, 77, 1011, 5}, &removed));
  EXPECT_EQ(removed, 2u);
  model.remove({1003, 1011});
  EXPECT_EQ(count_of(s.get()), 18u);
  ASSERT_OK(mt::store_remove(s.get(), {1003}, nullptr));  // already gone; removed may be NULL
  removed = 12345;
  ASSERT_OK(mnemo_store_remove(s.get(), nullptr, 0, &removed));
  EXPECT_EQ(removed, 0u);
  EXPECT_EQ(count_of(s.get()), 18u);

  Buf<float> v(5);
  const auto before = v.snapshot();
  EXPECT_TRUE(mt::failed_with(mnemo_store_get(s.get(), 1003, v.data()), MNEMO_E_NOT_FOUND));
  EXPECT_TRUE(v.same_as(before));
  uint64_t slot = 777;
  EXPECT_TRUE(mt::failed_with(mnemo_store_slot_of(s.get(), 1011, &slot), MNEMO_E_NOT_FOUND));
  EXPECT_EQ(slot, 777u);
  expect_stored_vectors(s.get(), model);

  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 3, 5);
  Results r;
  ASSERT_OK(mt::store_search(s.get(), q, 20, nullptr, &r));
  mt::expect_results(model, q, r, false);  // removed ids never come back
}

// Slots are stable until removed slots exceed a quarter of all slots; then
// the store compacts and slots are renumbered densely.
TEST(Store, SlotsAndCompaction) {
  auto rng = mt::rng_for_test();
  auto s = mt::make_store(3, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE);
  ASSERT_TRUE(s);
  StoreModel model(3, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE);
  const std::vector<uint64_t> ids = range_ids(100, 8);
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 8, 3);
  ASSERT_OK(mt::store_add(s.get(), ids, m));
  model.add(ids, m);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(slot_of(s.get(), ids[i]), i);

  // 2 of 8 removed: not more than a quarter, so nothing moves.
  ASSERT_OK(mt::store_remove(s.get(), {101, 104}, nullptr));
  model.remove({101, 104});
  EXPECT_EQ(slot_count_of(s.get()), 8u);
  for (size_t i = 0; i < 8; ++i)
    if (model.has(ids[i])) {
      EXPECT_EQ(slot_of(s.get(), ids[i]), i);
    }

  // A new id goes to the end, not into a freed slot.
  const Matrix one = mt::random_matrix(rng, MNEMO_DTYPE_F32, 1, 3);
  ASSERT_OK(mt::store_add(s.get(), {200}, one));
  model.add({200}, one);
  EXPECT_EQ(slot_of(s.get(), 200), 8u);
  EXPECT_EQ(slot_count_of(s.get()), 9u);

  // 3 of 9 removed exceeds a quarter: compacted to 6 dense slots.
  ASSERT_OK(mt::store_remove(s.get(), {102}, nullptr));
  model.remove({102});
  EXPECT_EQ(count_of(s.get()), 6u);
  EXPECT_EQ(slot_count_of(s.get()), 6u);
  std::set<uint64_t> slots;
  for (const uint64_t id : model.ids()) slots.insert(slot_of(s.get(), id));
  EXPECT_EQ(slots, (std::set<uint64_t>{0, 1, 2, 3, 4, 5}));
  expect_stored_vectors(s.get(), model);

  // The bitmap follows the new numbering.
  const std::set<uint64_t> allow = {100, 200, 107};
  Buf<uint64_t> bitmap(1);
  bitmap[0] = 0;
  for (const uint64_t id : allow) bitmap[0] |= uint64_t{1} << slot_of(s.get(), id);
  mnemo_search_options o = mnemo_search_options_default();
  o.filter_kind = MNEMO_FILTER_SLOT_BITMAP;
  o.filter_bitmap = bitmap.data();
  o.filter_count = 6;
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 3);
  Results r;
  ASSERT_OK(mt::store_search(s.get(), q, 5, &o, &r));
  mt::expect_results(model, q, r, false, &allow);
}

TEST(Store, IdFilter) {
  auto rng = mt::rng_for_test();
  for (const int32_t metric : mt::metrics()) {
    auto s = mt::make_store(127, MNEMO_DTYPE_BF16, metric);
    ASSERT_TRUE(s);
    StoreModel model(127, MNEMO_DTYPE_BF16, metric);
    const std::vector<uint64_t> ids = range_ids(1, 40);
    const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 40, 127, metric == MNEMO_METRIC_DOT);
    ASSERT_OK(mt::store_add(s.get(), ids, m));
    model.add(ids, m);
    // Unknown ids are ignored and a repeated id counts once.
    const std::vector<uint64_t> list = {3, 17, 999, 17, 40, 22, 5, 123456789};
    const std::set<uint64_t> allow(list.begin(), list.end());
    Buf<uint64_t> f(list.size());
    std::copy(list.begin(), list.end(), f.data());
    mnemo_search_options o = mnemo_search_options_default();
    o.filter_kind = MNEMO_FILTER_IDS;
    o.filter_ids = f.data();
    o.filter_count = list.size();
    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 3, 127, metric == MNEMO_METRIC_DOT);
    for (const size_t k : {size_t{1}, size_t{5}, size_t{9}}) {
      Results r;
      ASSERT_OK(mt::store_search(s.get(), q, k, &o, &r));
      mt::expect_results(model, q, r, false, &allow);
    }
    // An empty allow-list admits nothing: every slot is padding.
    o.filter_count = 0;
    Results r;
    ASSERT_OK(mt::store_search(s.get(), q, 3, &o, &r));
    const std::set<uint64_t> none;
    mt::expect_results(model, q, r, false, &none);
  }
}

TEST(Store, SlotBitmapFilter) {
  auto rng = mt::rng_for_test();
  auto s = mt::make_store(5, MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ);
  ASSERT_TRUE(s);
  StoreModel model(5, MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ);
  const std::vector<uint64_t> ids = distinct_ids(rng, 70);  // two bitmap words
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 70, 5);
  ASSERT_OK(mt::store_add(s.get(), ids, m));
  model.add(ids, m);
  // Remove a few (below the compaction threshold): their bits are ignored.
  const std::vector<uint64_t> gone = {ids[2], ids[65], ids[40]};
  ASSERT_OK(mt::store_remove(s.get(), gone, nullptr));
  model.remove(gone);
  ASSERT_EQ(slot_count_of(s.get()), 70u);

  Buf<uint64_t> bitmap(2);
  bitmap[0] = bitmap[1] = 0;
  std::set<uint64_t> allow;
  for (size_t i = 0; i < 70; ++i) {
    if (mt::rand_below(rng, 3) == 0 || i == 2 || i == 65) {
      bitmap[i / 64] |= uint64_t{1} << (i % 64);
      if (model.has(ids[i])) allow.insert(ids[i]);
    }
  }
  mnemo_search_options o = mnemo_search_options_default();
  o.filter_kind = MNEMO_FILTER_SLOT_BITMAP;
  o.filter_bitmap = bitmap.data();
  o.filter_count = 70;
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 4, 5);
  for (const size_t k : {size_t{1}, allow.size(), allow.size() + 3}) {
    Results r;
    ASSERT_OK(mt::store_search(s.get(), q, k, &o, &r));
    mt::expect_results(model, q, r, false, &allow);
  }

  // A bitmap whose length is not the slot count is refused, nothing written.
  for (const uint64_t wrong : {uint64_t{69}, uint64_t{71}, uint64_t{67}, uint64_t{128}}) {
    o.filter_count = wrong;
    Buf<uint64_t> bigger(2);
    bigger[0] = bigger[1] = ~uint64_t{0};
    o.filter_bitmap = bigger.data();
    Buf<uint64_t> rid(4 * 3);
    Buf<float> rsc(4 * 3);
    const auto id0 = rid.snapshot();
    const auto sc0 = rsc.snapshot();
    EXPECT_TRUE(mt::failed_with(
        mnemo_store_search(s.get(), static_cast<const float*>(q.data()), 4, 3, &o, rid.data(), rsc.data()),
        MNEMO_E_SHAPE))
        << "filter_count " << wrong;
    EXPECT_TRUE(rid.same_as(id0));
    EXPECT_TRUE(rsc.same_as(sc0));
  }
}

// Bias: rank by score + bias (cosine, dot) or distance - bias (L2); the
// returned scores include it; apply_bias = 0 ignores it.
TEST(Store, BiasRanking) {
  auto rng = mt::rng_for_test();
  for (const int32_t dtype : mt::storage_dtypes()) {
    for (const int32_t metric : mt::metrics()) {
      const size_t dim = 16, n = 40;
      auto s = mt::make_store(dim, dtype, metric);
      ASSERT_TRUE(s);
      StoreModel model(dim, dtype, metric);
      const std::vector<uint64_t> ids = distinct_ids(rng, n);
      const Matrix m = mt::random_matrix(rng, dtype, n, dim, metric == MNEMO_METRIC_DOT);
      ASSERT_OK(mt::store_add(s.get(), ids, m));
      model.add(ids, m);
      // Biases comparable to the spread of scores, so the order changes.
      const float scale = metric == MNEMO_METRIC_L2SQ ? 4.0f : 0.5f;
      std::vector<float> biases(n);
      for (size_t i = 0; i < n; ++i) {
        biases[i] = mt::rand_nonzero(rng) * scale;
        model.set_bias(ids[i], biases[i]);
      }
      ASSERT_OK(mt::store_set_bias(s.get(), ids, biases));
      const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 3, dim, metric == MNEMO_METRIC_DOT);
      mnemo_search_options o = mnemo_search_options_default();
      o.apply_bias = 1;
      for (const size_t k : {size_t{1}, size_t{10}, n}) {
        Results r;
        ASSERT_OK(mt::store_search(s.get(), q, k, &o, &r));
        mt::expect_results(model, q, r, true);
      }
      o.apply_bias = 0;
      Results r;
      ASSERT_OK(mt::store_search(s.get(), q, n, &o, &r));
      mt::expect_results(model, q, r, false);
    }
  }
}

// Exact duplicates have bit-identical scores, so the tie rule (smaller id
// first) decides their order deterministically.
TEST(Store, ExactDuplicatesTieBySmallerId) {
  auto rng = mt::rng_for_test();
  const std::vector<uint64_t> dup_ids = {41, 13, 77, 5, 60};
  for (const int32_t dtype : mt::storage_dtypes()) {
    for (const int32_t metric : mt::metrics()) {
      for (const size_t dim : {size_t{3}, size_t{768}}) {
        SCOPED_TRACE(mt::case_name(dtype, metric, dim));
        const bool unit = metric == MNEMO_METRIC_DOT;
        auto s = mt::make_store(dim, dtype, metric);
        ASSERT_TRUE(s);
        StoreModel model(dim, dtype, metric);
        const Matrix base = mt::random_matrix(rng, dtype, 20, dim, unit);
        const std::vector<uint64_t> base_ids = range_ids(1000, 20);
        const Matrix one = mt::random_matrix(rng, dtype, 1, dim, unit);
        Matrix dups(dtype, dup_ids.size(), dim);
        for (size_t i = 0; i < dup_ids.size(); ++i) dups.copy_row(i, one, 0);
        // Duplicates spread over slots: two before the others, three after.
        ASSERT_OK(mt::store_add(s.get(), {41, 13}, dups));
        ASSERT_OK(mt::store_add(s.get(), base_ids, base));
        Matrix rest(dtype, 3, dim);
        for (size_t i = 0; i < 3; ++i) rest.copy_row(i, one, 0);
        ASSERT_OK(mt::store_add(s.get(), {77, 5, 60}, rest));
        model.add(dup_ids, dups);
        model.add(base_ids, base);

        // A random query: the five duplicates sit together, by id.
        const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, dim, unit);
        Results r;
        ASSERT_OK(mt::store_search(s.get(), q, 25, nullptr, &r));
        mt::expect_results(model, q, r, false);
        for (size_t i = 0; i < 2; ++i) {
          std::vector<uint64_t> seen;
          std::vector<float> sc;
          for (size_t j = 0; j < 25; ++j) {
            const uint64_t id = r.row_ids(i)[j];
            if (std::find(dup_ids.begin(), dup_ids.end(), id) != dup_ids.end()) {
              seen.push_back(id);
              sc.push_back(r.row_scores(i)[j]);
            }
          }
          EXPECT_EQ(seen, (std::vector<uint64_t>{5, 13, 41, 60, 77}));
          for (const float v : sc)
            EXPECT_EQ(std::memcmp(&v, &sc[0], sizeof v), 0) << "duplicate scores differ: " << v << " vs " << sc[0];
        }

        // The duplicate itself as query: the smallest duplicate id is first.
        // (Under dot another vector may be longer, so only cosine and L2.)
        if (metric == MNEMO_METRIC_DOT) continue;
        Matrix self(MNEMO_DTYPE_F32, 1, dim);
        for (size_t j = 0; j < dim; ++j) self.set(0, j, static_cast<float>(one.row(0)[j]));
        Results top;
        ASSERT_OK(mt::store_search(s.get(), self, 1, nullptr, &top));
        EXPECT_EQ(top.ids[0], 5u);
        Results top5;
        ASSERT_OK(mt::store_search(s.get(), self, 5, nullptr, &top5));
        EXPECT_EQ(std::vector<uint64_t>(top5.ids.data(), top5.ids.data() + 5),
                  (std::vector<uint64_t>{5, 13, 41, 60, 77}));
      }
    }
  }
}

TEST(Store, EmptyStoreAndEmptyQueryBatch) {
  auto rng = mt::rng_for_test();
  auto s = mt::make_store(5, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE);
  ASSERT_TRUE(s);
  StoreModel model(5, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE);
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 5);
  Results r;
  ASSERT_OK(mt::store_search(s.get(), q, 4, nullptr, &r));
  mt::expect_results(model, q, r, false);  // all padding

  Buf<uint64_t> ids(4);
  Buf<float> sc(4);
  const auto i0 = ids.snapshot();
  const auto s0 = sc.snapshot();
  EXPECT_OK(mnemo_store_search(s.get(), static_cast<const float*>(q.data()), 0, 4, nullptr, ids.data(), sc.data()));
  EXPECT_TRUE(ids.same_as(i0));
  EXPECT_TRUE(sc.same_as(s0));
}

// The reserved id is refused, naming its position, and nothing is added.
TEST(Store, ReservedIdRefused) {
  auto rng = mt::rng_for_test();
  auto s = mt::make_store(3, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
  ASSERT_TRUE(s);
  const Matrix pre = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 3);
  ASSERT_OK(mt::store_add(s.get(), {1, 2}, pre));
  const Matrix probe = mt::random_matrix(rng, MNEMO_DTYPE_F32, 1, 3);
  const mt::StoreState before = mt::capture(s.get(), {1, 2, 3, 4}, probe);
  std::vector<uint64_t> ids = {3, 4, 1, 8, 9, 10, MNEMO_NO_ID, 11};
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, ids.size(), 3);
  EXPECT_TRUE(mt::failed_with(mt::store_add(s.get(), ids, m), MNEMO_E_OUT_OF_RANGE));
  EXPECT_TRUE(mt::names_number(mt::last_error(), 6)) << mt::last_error();
  EXPECT_TRUE(mt::capture(s.get(), {1, 2, 3, 4}, probe) == before);
}

// ---- persistence ---------------------------------------------------------------

TEST(Store, SaveOpenRoundTrip) {
  auto rng = mt::rng_for_test();
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  for (const int32_t dtype : mt::storage_dtypes()) {
    for (const int32_t metric : mt::metrics()) {
      SCOPED_TRACE(mt::case_name(dtype, metric, 127));
      auto s = mt::make_store(127, dtype, metric);
      ASSERT_TRUE(s);
      StoreModel model(127, dtype, metric);
      const std::vector<uint64_t> ids = distinct_ids(rng, 30);
      const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 30, 127, metric == MNEMO_METRIC_DOT);
      ASSERT_OK(mt::store_add(s.get(), ids, m));
      model.add(ids, m);
      std::vector<float> biases;
      for (size_t i = 0; i < 30; ++i) {
        biases.push_back(mt::rand_nonzero(rng) * 0.3f);
        model.set_bias(ids[i], biases.back());
      }
      ASSERT_OK(mt::store_set_bias(s.get(), ids, biases));
      const std::vector<uint64_t> gone = {ids[4], ids[9]};
      ASSERT_OK(mt::store_remove(s.get(), gone, nullptr));
      model.remove(gone);

      const std::string name = mt::case_name(dtype, metric, 127) + ".mnemo";
      const std::string path = dir.file(name);
      ASSERT_OK(mnemo_store_save(s.get(), path.c_str()));
      // Saving again over an existing file works too (rename over it).
      ASSERT_OK(mnemo_store_save(s.get(), path.c_str()));
      // No temporary file is left beside it.
      for (const auto& f : dir.files())
        EXPECT_TRUE(f.size() > 6 && f.compare(f.size() - 6, 6, ".mnemo") == 0) << "stray file " << f;

      mnemo_store* raw = nullptr;
      ASSERT_OK(mnemo_store_open(mt::rt(), path.c_str(), &raw));
      mt::StorePtr o(raw);
      uint64_t dim = 0;
      int32_t dt = 0, me = 0;
      ASSERT_OK(mnemo_store_shape(o.get(), &dim, &dt, &me));
      EXPECT_EQ(dim, 127u);
      EXPECT_EQ(dt, dtype);
      EXPECT_EQ(me, metric);
      EXPECT_EQ(count_of(o.get()), 28u);
      expect_stored_vectors(o.get(), model);
      Buf<float> v(127);
      EXPECT_EQ(mnemo_store_get(o.get(), ids[4], v.data()), MNEMO_E_NOT_FOUND);

      const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 3, 127, metric == MNEMO_METRIC_DOT);
      mnemo_search_options opt = mnemo_search_options_default();
      opt.apply_bias = 1;
      Results a, b;
      ASSERT_OK(mt::store_search(s.get(), q, 30, &opt, &a));
      ASSERT_OK(mt::store_search(o.get(), q, 30, &opt, &b));
      mt::expect_results(model, q, b, true);  // biases survived
      EXPECT_EQ(std::vector<uint64_t>(a.ids.data(), a.ids.data() + 90),
                std::vector<uint64_t>(b.ids.data(), b.ids.data() + 90));

      // The opened store is a normal store: it takes new vectors.
      const Matrix more = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 127, metric == MNEMO_METRIC_DOT);
      ASSERT_OK(mt::store_add(o.get(), {ids[4], 5}, more));
      model.add({ids[4], 5}, more);
      EXPECT_EQ(count_of(o.get()), 30u);
      expect_stored_vectors(o.get(), model);
    }
  }
}

// Every single-byte change and every truncation of a saved store is refused
// as corrupt; nothing is returned.
TEST(Store, CorruptOrTruncatedFileRefused) {
  auto rng = mt::rng_for_test();
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  auto s = mt::make_store(3, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE);
  ASSERT_TRUE(s);
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 4, 3);
  ASSERT_OK(mt::store_add(s.get(), {11, 22, 33, 44}, m));
  ASSERT_OK(mt::store_set_bias(s.get(), {22}, {0.5f}));
  ASSERT_OK(mt::store_remove(s.get(), {33}, nullptr));
  const std::string good = dir.file("good.mnemo");
  ASSERT_OK(mnemo_store_save(s.get(), good.c_str()));
  const std::vector<char> bytes = read_file(good);
  ASSERT_GT(bytes.size(), 0u);

  mnemo_store* const sentinel = reinterpret_cast<mnemo_store*>(uintptr_t{0x5EED});
  const std::string bad = dir.file("bad.mnemo");
  size_t accepted = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<char> b = bytes;
    b[i] = static_cast<char>(b[i] ^ 0x5A);
    write_file(bad, b.data(), b.size());
    mnemo_store* out = sentinel;
    const mnemo_status st = mnemo_store_open(mt::rt(), bad.c_str(), &out);
    if (st == MNEMO_OK) {
      mnemo_store_destroy(out);
      if (accepted++ < 5) ADD_FAILURE() << "byte " << i << " changed, file accepted";
      continue;
    }
    EXPECT_TRUE(mt::failed_with(st, MNEMO_E_CORRUPT)) << "byte " << i << " changed";
    EXPECT_EQ(out, sentinel);
  }
  EXPECT_EQ(accepted, 0u) << "corrupted files accepted (of " << bytes.size() << ")";

  accepted = 0;
  for (size_t len = 0; len < bytes.size(); ++len) {
    write_file(bad, bytes.data(), len);
    mnemo_store* out = sentinel;
    const mnemo_status st = mnemo_store_open(mt::rt(), bad.c_str(), &out);
    if (st == MNEMO_OK) {
      mnemo_store_destroy(out);
      if (accepted++ < 5) ADD_FAILURE() << "truncated to " << len << " bytes, accepted";
      continue;
    }
    EXPECT_TRUE(mt::failed_with(st, MNEMO_E_CORRUPT)) << "truncated to " << len << " bytes";
    EXPECT_EQ(out, sentinel);
  }
  EXPECT_EQ(accepted, 0u);

  // The intact file still opens.
  mnemo_store* out = nullptr;
  ASSERT_OK(mnemo_store_open(mt::rt(), good.c_str(), &out));
  mnemo_store_destroy(out);

  out = sentinel;
  EXPECT_TRUE(mt::failed_with(mnemo_store_open(mt::rt(), dir.file("missing.mnemo").c_str(), &out), MNEMO_E_IO));
  EXPECT_EQ(out, sentinel);
  EXPECT_TRUE(mt::failed_with(mnemo_store_save(s.get(), (dir.path() + "/no/such/folder/x.mnemo").c_str()), MNEMO_E_IO));
}

// ---- precision and size ---------------------------------------------------------

// FAST may find candidates with reduced precision, but returned scores are
// re-scored: the EXACT bounds hold.
TEST(Store, FastPrecisionReturnsExactScores) {
  auto rng = mt::rng_for_test();
  mnemo_runtime_options opts = mt::test_options();
  opts.precision = MNEMO_PRECISION_FAST;
  mt::RuntimePtr fast = mt::make_runtime(opts);
  ASSERT_TRUE(fast);
  for (const int32_t metric : mt::metrics()) {
    auto s = mt::make_store(768, MNEMO_DTYPE_F16, metric, fast.get());
    ASSERT_TRUE(s);
    StoreModel model(768, MNEMO_DTYPE_F16, metric);
    const std::vector<uint64_t> ids = distinct_ids(rng, 300);
    const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 300, 768, metric == MNEMO_METRIC_DOT);
    ASSERT_OK(mt::store_add(s.get(), ids, m));
    model.add(ids, m);
    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 5, 768, metric == MNEMO_METRIC_DOT);
    Results r;
    ASSERT_OK(mt::store_search(s.get(), q, 10, nullptr, &r));
    mt::expect_results(model, q, r, false);
  }
}

// One large case: more than 100k stored vectors.
TEST(Store, LargeStore) {
  auto rng = mt::rng_for_test();
  const size_t n = 120000, dim = 8;
  auto s = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ);
  ASSERT_TRUE(s);
  StoreModel model(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ);
  const std::vector<uint64_t> ids = distinct_ids(rng, n);
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, n, dim);
  ASSERT_OK(mt::store_add(s.get(), ids, m));
  model.add(ids, m);
  EXPECT_EQ(count_of(s.get()), n);
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 3, dim);
  for (const size_t k : {size_t{1}, size_t{100}}) {
    Results r;
    ASSERT_OK(mt::store_search(s.get(), q, k, nullptr, &r));
    mt::expect_results(model, q, r, false);
  }
}

// Any k from 1 to N: no cap at 1024 or 2048.
TEST(Store, LargeKHasNoCap) {
  auto rng = mt::rng_for_test();
  const size_t n = 3000, dim = 8;
  for (const int32_t metric : mt::metrics()) {
    auto s = mt::make_store(dim, MNEMO_DTYPE_F16, metric);
    ASSERT_TRUE(s);
    StoreModel model(dim, MNEMO_DTYPE_F16, metric);
    const std::vector<uint64_t> ids = distinct_ids(rng, n);
    const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, n, dim, metric == MNEMO_METRIC_DOT);
    ASSERT_OK(mt::store_add(s.get(), ids, m));
    model.add(ids, m);
    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, dim, metric == MNEMO_METRIC_DOT);
    for (const size_t k : {size_t{2049}, n, n + 7}) {
      Results r;
      ASSERT_OK(mt::store_search(s.get(), q, k, nullptr, &r));
      mt::expect_results(model, q, r, false);
    }
  }
}

// Many queries at once, some of them near-duplicates of stored vectors: small
// squared distances must keep their relative accuracy (no |x|^2 + |y|^2 -
// 2 x.y cancellation), and cosine/dot stay within their bounds.
TEST(Store, QueryBatchWithNearDuplicates) {
  auto rng = mt::rng_for_test();
  const size_t n = 500, dim = 768, nq = 64;
  for (const int32_t metric : mt::metrics()) {
    const bool unit = metric == MNEMO_METRIC_DOT;
    auto s = mt::make_store(dim, MNEMO_DTYPE_F32, metric);
    ASSERT_TRUE(s);
    StoreModel model(dim, MNEMO_DTYPE_F32, metric);
    const std::vector<uint64_t> ids = distinct_ids(rng, n);
    const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, n, dim, unit);
    ASSERT_OK(mt::store_add(s.get(), ids, m));
    model.add(ids, m);
    Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, dim, unit);
    for (size_t i = 0; i < nq; i += 2) {
      const size_t src = mt::rand_below(rng, n);
      for (size_t j = 0; j < dim; ++j) q.set(i, j, static_cast<float>(m.row(src)[j] + 1e-3 * mt::rand_nonzero(rng)));
    }
    Results r;
    ASSERT_OK(mt::store_search(s.get(), q, 10, nullptr, &r));
    mt::expect_results(model, q, r, false);
  }
}

// Cosine with a zero-norm stored vector is 0: it is a candidate like any other.
TEST(Store, CosineWithZeroVector) {
  auto rng = mt::rng_for_test();
  for (const int32_t dtype : mt::storage_dtypes()) {
    auto s = mt::make_store(5, dtype, MNEMO_METRIC_COSINE);
    ASSERT_TRUE(s);
    StoreModel model(5, dtype, MNEMO_METRIC_COSINE);
    Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 6, 5);
    for (size_t j = 0; j < 5; ++j) m.set(4, j, 0.0f);
    ASSERT_OK(mt::store_add(s.get(), {1, 2, 3, 4, 5, 6}, m));
    model.add({1, 2, 3, 4, 5, 6}, m);
    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 5);
    Results r;
    ASSERT_OK(mt::store_search(s.get(), q, 7, nullptr, &r));
    mt::expect_results(model, q, r, false);
    for (size_t i = 0; i < 2; ++i)
      for (size_t j = 0; j < 6; ++j) {
        if (r.row_ids(i)[j] == 5) {
          EXPECT_EQ(r.row_scores(i)[j], 0.0f);
        }
      }
  }
}

// A removed id that comes back is a new memory: its bias starts at 0 again.
TEST(Store, BiasResetsAfterRemoveAndAdd) {
  auto rng = mt::rng_for_test();
  auto s = mt::make_store(5, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
  ASSERT_TRUE(s);
  StoreModel model(5, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 3, 5, true);
  ASSERT_OK(mt::store_add(s.get(), {1, 2, 3}, m));
  model.add({1, 2, 3}, m);
  ASSERT_OK(mt::store_set_bias(s.get(), {2, 3}, {5.0f, -3.0f}));
  model.set_bias(3, -3.0f);
  ASSERT_OK(mt::store_remove(s.get(), {2}, nullptr));
  const Matrix again = mt::random_matrix(rng, MNEMO_DTYPE_F32, 1, 5, true);
  ASSERT_OK(mt::store_add(s.get(), {2}, again));
  model.remove({2});
  model.add({2}, again);  // bias 0
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 5, true);
  mnemo_search_options o = mnemo_search_options_default();
  o.apply_bias = 1;
  Results r;
  ASSERT_OK(mt::store_search(s.get(), q, 3, &o, &r));
  mt::expect_results(model, q, r, true);
}

// ---- threads ----------------------------------------------------------------------

TEST(Store, ConcurrentSearchesAgree) {
  auto rng = mt::rng_for_test();
  auto s = mt::make_store(64, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE);
  ASSERT_TRUE(s);
  const std::vector<uint64_t> ids = distinct_ids(rng, 2000);
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2000, 64);
  ASSERT_OK(mt::store_add(s.get(), ids, m));
  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 8, 64);
  Results base;
  ASSERT_OK(mt::store_search(s.get(), q, 10, nullptr, &base));

  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int it = 0; it < 25; ++it) {
        Results r;
        if (mt::store_search(s.get(), q, 10, nullptr, &r) != MNEMO_OK || !mt::same_results(r, base))
          failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << "searches from several threads disagreed";
}

}  // namespace
