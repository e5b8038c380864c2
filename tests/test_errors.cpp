// Every class of bad input for every function: the right status, a message
// naming the argument, outputs byte-identical to their poisoned state and
// stores unchanged.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "reference.h"
#include "store_model.h"
#include "support.h"

namespace {

using mt::Buf;
using mt::Matrix;

constexpr uint64_t kBig32 = uint64_t{1} << 32;
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Watches buffers: every byte (spare bytes included) must survive a call.
class Outputs {
 public:
  template <class T>
  Outputs& watch(const Buf<T>& b) {
    items_.push_back({[&b] { return b.snapshot(); }, b.snapshot()});
    return *this;
  }
  bool unchanged() const {
    for (const auto& it : items_)
      if (it.first() != it.second) return false;
    return true;
  }

 private:
  std::vector<std::pair<std::function<std::vector<unsigned char>()>, std::vector<unsigned char>>> items_;
};

#define EXPECT_REFUSED(call, want, arg, outputs)                       \
  do {                                                                 \
    EXPECT_TRUE(::mt::failed_with((call), (want), (arg))) << #call;    \
    EXPECT_TRUE((outputs).unchanged()) << #call << " wrote an output"; \
  } while (0)

template <class T>
T* off4(const T* p) {  // a view of p shifted by 4 bytes
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) + 4);
}

// Bad enum values of each kind.
const std::vector<int32_t> kBadMetrics = {0, 4, -1, 99, std::numeric_limits<int32_t>::min()};
const std::vector<int32_t> kNotStorageDtypes = {MNEMO_DTYPE_F64, MNEMO_DTYPE_U32, MNEMO_DTYPE_U64, 0, 7, -2, 1000};

// ---- similarity ----------------------------------------------------------------

TEST(Errors, Similarity) {
  auto rng = mt::rng_for_test();
  const size_t nq = 2, n = 3, dim = 5;
  Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, dim);
  Matrix t = mt::random_matrix(rng, MNEMO_DTYPE_F32, n, dim);
  Buf<float> scores(nq * n);
  Outputs out;
  out.watch(scores);
  const float* qp = static_cast<const float*>(q.data());
  const void* tp = t.data();
  auto sim = [&](mnemo_runtime* r, int32_t metric, const float* qq, uint64_t nqq, const void* tt, int32_t dt,
                 uint64_t nn, uint64_t d, float* s) { return mnemo_similarity(r, metric, qq, nqq, tt, dt, nn, d, s); };
  const int32_t F32 = MNEMO_DTYPE_F32, COS = MNEMO_METRIC_COSINE;

  EXPECT_REFUSED(sim(nullptr, COS, qp, nq, tp, F32, n, dim, scores.data()), MNEMO_E_NULL_POINTER, "rt", out);
  EXPECT_REFUSED(sim(mt::rt(), COS, nullptr, nq, tp, F32, n, dim, scores.data()), MNEMO_E_NULL_POINTER, "queries", out);
  EXPECT_REFUSED(sim(mt::rt(), COS, qp, nq, nullptr, F32, n, dim, scores.data()), MNEMO_E_NULL_POINTER, "targets", out);
  EXPECT_REFUSED(sim(mt::rt(), COS, qp, nq, tp, F32, n, dim, nullptr), MNEMO_E_NULL_POINTER, "scores", out);

  EXPECT_REFUSED(sim(mt::rt(), COS, off4(qp), nq, tp, F32, n, dim, scores.data()), MNEMO_E_MISALIGNED, "queries", out);
  EXPECT_REFUSED(sim(mt::rt(), COS, qp, nq, off4(tp), F32, n, dim, scores.data()), MNEMO_E_MISALIGNED, "targets", out);
  EXPECT_REFUSED(sim(mt::rt(), COS, qp, nq, tp, F32, n, dim, scores.misaligned()), MNEMO_E_MISALIGNED, "scores", out);

  for (const int32_t m : kBadMetrics)
    EXPECT_REFUSED(sim(mt::rt(), m, qp, nq, tp, F32, n, dim, scores.data()), MNEMO_E_INVALID_ARGUMENT, "metric", out);
  EXPECT_REFUSED(sim(mt::rt(), COS, qp, nq, tp, F32, n, 0, scores.data()), MNEMO_E_INVALID_ARGUMENT, "dim", out);
  for (const int32_t dt : kNotStorageDtypes)
    EXPECT_REFUSED(sim(mt::rt(), COS, qp, nq, tp, dt, n, dim, scores.data()), MNEMO_E_DTYPE, "target_dtype", out);

  // Overflowing products: nq * n, n * dim, nq * dim, and bytes of dim.
  EXPECT_REFUSED(sim(mt::rt(), COS, qp, kBig32 + 1, tp, F32, kBig32, 1, scores.data()), MNEMO_E_OVERFLOW, nullptr, out);
  EXPECT_REFUSED(sim(mt::rt(), COS, qp, 1, tp, F32, uint64_t{1} << 33, uint64_t{1} << 31, scores.data()),
                 MNEMO_E_OVERFLOW, nullptr, out);
  EXPECT_REFUSED(sim(mt::rt(), COS, qp, uint64_t{1} << 40, tp, F32, 1, uint64_t{1} << 30, scores.data()),
                 MNEMO_E_OVERFLOW, nullptr, out);
  EXPECT_REFUSED(sim(mt::rt(), COS, qp, 1, tp, F32, 1, uint64_t{1} << 62, scores.data()), MNEMO_E_OVERFLOW, nullptr,
                 out);
  EXPECT_REFUSED(sim(mt::rt(), COS, qp, 1, tp, F32, (uint64_t{1} << 62) + 1, 1, scores.data()), MNEMO_E_OVERFLOW,
                 nullptr, out);

  // Non-finite inputs, in queries and in targets of each dtype.
  q.set(1, 4, kNaN);
  EXPECT_REFUSED(sim(mt::rt(), COS, qp, nq, tp, F32, n, dim, scores.data()), MNEMO_E_NON_FINITE, "queries", out);
  q.set(1, 4, 0.5f);
  q.set(0, 0, -kInf);
  EXPECT_REFUSED(sim(mt::rt(), COS, qp, nq, tp, F32, n, dim, scores.data()), MNEMO_E_NON_FINITE, "queries", out);
  q.set(0, 0, 0.5f);
  for (const int32_t dt : mt::storage_dtypes()) {
    for (const float bad : {kNaN, kInf}) {
      Matrix tt = mt::random_matrix(rng, dt, n, dim);
      tt.set(2, 3, bad);
      EXPECT_REFUSED(sim(mt::rt(), MNEMO_METRIC_L2SQ, qp, nq, tt.data(), dt, n, dim, scores.data()), MNEMO_E_NON_FINITE,
                     "targets", out);
    }
  }
  // Still fine afterwards.
  EXPECT_OK(sim(mt::rt(), COS, qp, nq, tp, F32, n, dim, scores.data()));
}

// ---- store creation and queries ------------------------------------------------

TEST(Errors, StoreCreate) {
  mnemo_store* const sentinel = reinterpret_cast<mnemo_store*>(uintptr_t{0x5EED});
  mnemo_store* out = sentinel;
  auto refused = [&](mnemo_status st, mnemo_status want, const char* arg) {
    EXPECT_TRUE(mt::failed_with(st, want, arg));
    EXPECT_EQ(out, sentinel);
  };
  refused(mnemo_store_create(nullptr, 5, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, &out), MNEMO_E_NULL_POINTER, "rt");
  EXPECT_TRUE(mt::failed_with(mnemo_store_create(mt::rt(), 5, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, nullptr),
                              MNEMO_E_NULL_POINTER, "out"));
  refused(mnemo_store_create(mt::rt(), 0, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, &out), MNEMO_E_INVALID_ARGUMENT, "dim");
  refused(mnemo_store_create(mt::rt(), 65537, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, &out), MNEMO_E_INVALID_ARGUMENT,
          "dim");
  refused(mnemo_store_create(mt::rt(), MNEMO_NO_ID, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, &out), MNEMO_E_INVALID_ARGUMENT,
          "dim");
  for (const int32_t m : kBadMetrics)
    refused(mnemo_store_create(mt::rt(), 5, MNEMO_DTYPE_F32, m, &out), MNEMO_E_INVALID_ARGUMENT, "metric");
  for (const int32_t dt : kNotStorageDtypes)
    refused(mnemo_store_create(mt::rt(), 5, dt, MNEMO_METRIC_DOT, &out), MNEMO_E_DTYPE, "dtype");
}

// A store with content, biases and a removed slot, and the probes that show
// whether a failed call changed anything.
struct Fixture {
  mt::StorePtr store;
  std::vector<uint64_t> probe_ids = {1, 2, 3, 4, 5, 6, 999};
  Matrix probe;
  mt::StoreState before;

  Fixture(std::mt19937_64& rng, int32_t dtype) {
    store = mt::make_store(5, dtype, MNEMO_METRIC_COSINE);
    const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 6, 5);
    EXPECT_OK(mt::store_add(store.get(), {1, 2, 3, 4, 5, 6}, m));
    EXPECT_OK(mt::store_set_bias(store.get(), {2, 5}, {0.5f, -0.25f}));
    EXPECT_OK(mt::store_remove(store.get(), {4}, nullptr));
    probe = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 5);
    before = mt::capture(store.get(), probe_ids, probe);
  }
  bool unchanged() const { return mt::capture(store.get(), probe_ids, probe) == before; }
};

#define EXPECT_STORE_REFUSED(call, want, arg, fx)                   \
  do {                                                              \
    EXPECT_TRUE(::mt::failed_with((call), (want), (arg))) << #call; \
    EXPECT_TRUE((fx).unchanged()) << #call << " changed the store"; \
  } while (0)

TEST(Errors, StoreAdd) {
  auto rng = mt::rng_for_test();
  Fixture fx(rng, MNEMO_DTYPE_F16);
  ASSERT_TRUE(fx.store);
  mnemo_store* s = fx.store.get();
  Buf<uint64_t> ids(3);
  ids[0] = 10, ids[1] = 11, ids[2] = 12;
  Matrix v = mt::random_matrix(rng, MNEMO_DTYPE_F32, 3, 5);
  Matrix h = mt::random_matrix(rng, MNEMO_DTYPE_F16, 3, 5);
  const int32_t F32 = MNEMO_DTYPE_F32;

  EXPECT_STORE_REFUSED(mnemo_store_add(nullptr, ids.data(), v.data(), F32, 3), MNEMO_E_NULL_POINTER, "store", fx);
  EXPECT_STORE_REFUSED(mnemo_store_add(s, nullptr, v.data(), F32, 3), MNEMO_E_NULL_POINTER, "ids", fx);
  EXPECT_STORE_REFUSED(mnemo_store_add(s, ids.data(), nullptr, F32, 3), MNEMO_E_NULL_POINTER, "vectors", fx);
  EXPECT_STORE_REFUSED(mnemo_store_add(s, ids.misaligned(), v.data(), F32, 3), MNEMO_E_MISALIGNED, "ids", fx);
  EXPECT_STORE_REFUSED(mnemo_store_add(s, ids.data(), v.raw.misaligned(), F32, 3), MNEMO_E_MISALIGNED, "vectors", fx);
  // Neither F32 nor the store's dtype (F16).
  for (const int32_t dt : std::initializer_list<int32_t>{MNEMO_DTYPE_BF16, MNEMO_DTYPE_F64, MNEMO_DTYPE_U32, 0, 99})
    EXPECT_STORE_REFUSED(mnemo_store_add(s, ids.data(), h.data(), dt, 3), MNEMO_E_DTYPE, "vectors_dtype", fx);
  EXPECT_STORE_REFUSED(mnemo_store_add(s, ids.data(), v.data(), F32, uint64_t{1} << 61), MNEMO_E_OVERFLOW, nullptr, fx);
  EXPECT_STORE_REFUSED(mnemo_store_add(s, ids.data(), v.data(), F32, uint64_t{1} << 62), MNEMO_E_OVERFLOW, nullptr, fx);
  ids[2] = MNEMO_NO_ID;
  EXPECT_STORE_REFUSED(mnemo_store_add(s, ids.data(), v.data(), F32, 3), MNEMO_E_OUT_OF_RANGE, "ids", fx);
  ids[2] = 12;
  v.set(2, 4, kNaN);
  EXPECT_STORE_REFUSED(mnemo_store_add(s, ids.data(), v.data(), F32, 3), MNEMO_E_NON_FINITE, "vectors", fx);
  v.set(2, 4, 0.5f);
  v.set(0, 0, kInf);
  EXPECT_STORE_REFUSED(mnemo_store_add(s, ids.data(), v.data(), F32, 3), MNEMO_E_NON_FINITE, "vectors", fx);
  h.set(1, 2, kNaN);
  EXPECT_STORE_REFUSED(mnemo_store_add(s, ids.data(), h.data(), MNEMO_DTYPE_F16, 3), MNEMO_E_NON_FINITE, "vectors", fx);
  // An upsert of an existing id in a refused batch changes nothing either.
  ids[0] = 2;
  EXPECT_STORE_REFUSED(mnemo_store_add(s, ids.data(), h.data(), MNEMO_DTYPE_F16, 3), MNEMO_E_NON_FINITE, "vectors", fx);

  // A BF16 store refuses F16 vectors.
  auto b = mt::make_store(5, MNEMO_DTYPE_BF16, MNEMO_METRIC_DOT);
  ASSERT_TRUE(b);
  Matrix h2 = mt::random_matrix(rng, MNEMO_DTYPE_F16, 3, 5);
  ids[0] = 10;
  EXPECT_TRUE(mt::failed_with(mnemo_store_add(b.get(), ids.data(), h2.data(), MNEMO_DTYPE_F16, 3), MNEMO_E_DTYPE,
                              "vectors_dtype"));
}

TEST(Errors, StoreRemoveAndQueries) {
  auto rng = mt::rng_for_test();
  Fixture fx(rng, MNEMO_DTYPE_F32);
  ASSERT_TRUE(fx.store);
  mnemo_store* s = fx.store.get();
  Buf<uint64_t> ids(2);
  ids[0] = 1, ids[1] = 3;
  uint64_t removed = 777;
  EXPECT_STORE_REFUSED(mnemo_store_remove(nullptr, ids.data(), 2, &removed), MNEMO_E_NULL_POINTER, "store", fx);
  EXPECT_STORE_REFUSED(mnemo_store_remove(s, nullptr, 2, &removed), MNEMO_E_NULL_POINTER, "ids", fx);
  EXPECT_STORE_REFUSED(mnemo_store_remove(s, ids.misaligned(), 2, &removed), MNEMO_E_MISALIGNED, "ids", fx);
  EXPECT_EQ(removed, 777u);

  uint64_t u = 777;
  EXPECT_TRUE(mt::failed_with(mnemo_store_count(nullptr, &u), MNEMO_E_NULL_POINTER, "store"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_count(s, nullptr), MNEMO_E_NULL_POINTER, "out"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_slot_count(nullptr, &u), MNEMO_E_NULL_POINTER, "store"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_slot_count(s, nullptr), MNEMO_E_NULL_POINTER, "out"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_shape(nullptr, &u, nullptr, nullptr), MNEMO_E_NULL_POINTER, "store"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_slot_of(nullptr, 1, &u), MNEMO_E_NULL_POINTER, "store"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_slot_of(s, 1, nullptr), MNEMO_E_NULL_POINTER, "slot"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_slot_of(s, 4, &u), MNEMO_E_NOT_FOUND));
  EXPECT_TRUE(mt::failed_with(mnemo_store_slot_of(s, MNEMO_NO_ID, &u), MNEMO_E_NOT_FOUND));
  EXPECT_EQ(u, 777u);

  Buf<float> v(5);
  Outputs out;
  out.watch(v);
  EXPECT_REFUSED(mnemo_store_get(nullptr, 1, v.data()), MNEMO_E_NULL_POINTER, "store", out);
  EXPECT_REFUSED(mnemo_store_get(s, 1, nullptr), MNEMO_E_NULL_POINTER, "out", out);
  EXPECT_REFUSED(mnemo_store_get(s, 1, v.misaligned()), MNEMO_E_MISALIGNED, "out", out);
  EXPECT_REFUSED(mnemo_store_get(s, 4, v.data()), MNEMO_E_NOT_FOUND, nullptr, out);
  EXPECT_REFUSED(mnemo_store_get(s, 999, v.data()), MNEMO_E_NOT_FOUND, nullptr, out);
  EXPECT_TRUE(fx.unchanged());
}

TEST(Errors, StoreSetBias) {
  auto rng = mt::rng_for_test();
  Fixture fx(rng, MNEMO_DTYPE_BF16);
  ASSERT_TRUE(fx.store);
  mnemo_store* s = fx.store.get();
  Buf<uint64_t> ids(5);
  Buf<float> b(5);
  const uint64_t id_list[5] = {1, 2, 6, 777, 5};  // 777 at position 3 is unknown
  for (size_t i = 0; i < 5; ++i) {
    ids[i] = id_list[i];
    b[i] = 0.125f * static_cast<float>(i + 1);
  }
  EXPECT_STORE_REFUSED(mnemo_store_set_bias(nullptr, ids.data(), b.data(), 5), MNEMO_E_NULL_POINTER, "store", fx);
  EXPECT_STORE_REFUSED(mnemo_store_set_bias(s, nullptr, b.data(), 5), MNEMO_E_NULL_POINTER, "ids", fx);
  EXPECT_STORE_REFUSED(mnemo_store_set_bias(s, ids.data(), nullptr, 5), MNEMO_E_NULL_POINTER, "biases", fx);
  EXPECT_STORE_REFUSED(mnemo_store_set_bias(s, ids.misaligned(), b.data(), 5), MNEMO_E_MISALIGNED, "ids", fx);
  EXPECT_STORE_REFUSED(mnemo_store_set_bias(s, ids.data(), b.misaligned(), 5), MNEMO_E_MISALIGNED, "biases", fx);
  // Not found names the position; the valid ids before it keep their bias.
  EXPECT_TRUE(mt::failed_with(mnemo_store_set_bias(s, ids.data(), b.data(), 5), MNEMO_E_NOT_FOUND));
  EXPECT_TRUE(mt::names_number(mt::last_error(), 3)) << "position 3 not named: " << mt::last_error();
  EXPECT_TRUE(fx.unchanged());
  ids[3] = 4;  // removed in the fixture: not found either
  EXPECT_STORE_REFUSED(mnemo_store_set_bias(s, ids.data(), b.data(), 5), MNEMO_E_NOT_FOUND, nullptr, fx);
  ids[3] = 3;
  b[4] = kNaN;
  EXPECT_STORE_REFUSED(mnemo_store_set_bias(s, ids.data(), b.data(), 5), MNEMO_E_NON_FINITE, "biases", fx);
  b[4] = -kInf;
  EXPECT_STORE_REFUSED(mnemo_store_set_bias(s, ids.data(), b.data(), 5), MNEMO_E_NON_FINITE, "biases", fx);
}

TEST(Errors, StoreSearch) {
  auto rng = mt::rng_for_test();
  Fixture fx(rng, MNEMO_DTYPE_F32);
  ASSERT_TRUE(fx.store);
  const mnemo_store* s = fx.store.get();
  const size_t nq = 2, k = 3;
  Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, 5);
  const float* qp = static_cast<const float*>(q.data());
  Buf<uint64_t> ids(nq * k);
  Buf<float> sc(nq * k);
  Outputs out;
  out.watch(ids).watch(sc);
  const mnemo_search_options def = mnemo_search_options_default();

  EXPECT_REFUSED(mnemo_store_search(nullptr, qp, nq, k, &def, ids.data(), sc.data()), MNEMO_E_NULL_POINTER, "store",
                 out);
  EXPECT_REFUSED(mnemo_store_search(s, nullptr, nq, k, &def, ids.data(), sc.data()), MNEMO_E_NULL_POINTER, "queries",
                 out);
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &def, nullptr, sc.data()), MNEMO_E_NULL_POINTER, "ids", out);
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &def, ids.data(), nullptr), MNEMO_E_NULL_POINTER, "scores", out);
  EXPECT_REFUSED(mnemo_store_search(s, off4(qp), nq, k, &def, ids.data(), sc.data()), MNEMO_E_MISALIGNED, "queries",
                 out);
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &def, ids.misaligned(), sc.data()), MNEMO_E_MISALIGNED, "ids", out);
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &def, ids.data(), sc.misaligned()), MNEMO_E_MISALIGNED, "scores",
                 out);
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, 0, &def, ids.data(), sc.data()), MNEMO_E_INVALID_ARGUMENT, "k", out);
  EXPECT_REFUSED(mnemo_store_search(s, qp, kBig32 + 1, kBig32, &def, ids.data(), sc.data()), MNEMO_E_OVERFLOW, nullptr,
                 out);
  EXPECT_REFUSED(mnemo_store_search(s, qp, uint64_t{1} << 62, 1, &def, ids.data(), sc.data()), MNEMO_E_OVERFLOW,
                 nullptr, out);
  EXPECT_REFUSED(mnemo_store_search(s, qp, 1, uint64_t{1} << 61, &def, ids.data(), sc.data()), MNEMO_E_OVERFLOW,
                 nullptr, out);

  mnemo_search_options o = def;
  o.struct_size = 0;
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &o, ids.data(), sc.data()), MNEMO_E_INVALID_ARGUMENT, "struct_size",
                 out);
  o.struct_size = 8;
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &o, ids.data(), sc.data()), MNEMO_E_INVALID_ARGUMENT, "struct_size",
                 out);
  // A size that ends inside a field (here half of the pointer `where`).
  o.struct_size = 108;
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &o, ids.data(), sc.data()), MNEMO_E_INVALID_ARGUMENT, "struct_size",
                 out);
  // The device-check fields: a flag of 0 or 1; no device status on the
  // host entry point (it would be device memory written by a stream).
  o = def;
  o.check_on_device = 2;
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &o, ids.data(), sc.data()), MNEMO_E_INVALID_ARGUMENT,
                 "check_on_device", out);
  Buf<int32_t> status(4);
  o = def;
  o.device_status = status.data();
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &o, ids.data(), sc.data()), MNEMO_E_INVALID_ARGUMENT, "device_status",
                 out);
  // A caller of the header before them (80-byte options) gets their
  // defaults, whatever its bytes after the struct say.
  o = def;
  o.check_on_device = 7;
  o.struct_size = 80;
  Buf<uint64_t> ok_ids(nq * k);
  Buf<float> ok_sc(nq * k);
  ASSERT_OK(mnemo_store_search(s, qp, nq, k, &o, ok_ids.data(), ok_sc.data()));
  for (const int32_t kind : {3, -1, 100}) {
    o = def;
    o.filter_kind = kind;
    EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &o, ids.data(), sc.data()), MNEMO_E_INVALID_ARGUMENT, "filter_kind",
                   out);
  }

  Buf<uint64_t> allow(2);
  allow[0] = 1, allow[1] = 5;
  o = def;
  o.filter_kind = MNEMO_FILTER_IDS;
  o.filter_count = 2;
  o.filter_ids = nullptr;
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &o, ids.data(), sc.data()), MNEMO_E_NULL_POINTER, "filter_ids", out);
  o.filter_ids = allow.misaligned();
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &o, ids.data(), sc.data()), MNEMO_E_MISALIGNED, "filter_ids", out);

  uint64_t slots = 0;
  ASSERT_OK(mnemo_store_slot_count(s, &slots));
  Buf<uint64_t> bitmap(1);
  bitmap[0] = ~uint64_t{0};
  o = def;
  o.filter_kind = MNEMO_FILTER_SLOT_BITMAP;
  o.filter_count = slots;
  o.filter_bitmap = nullptr;
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &o, ids.data(), sc.data()), MNEMO_E_NULL_POINTER, "filter_bitmap",
                 out);
  o.filter_bitmap = bitmap.misaligned();
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &o, ids.data(), sc.data()), MNEMO_E_MISALIGNED, "filter_bitmap", out);
  o.filter_bitmap = bitmap.data();
  o.filter_count = slots + 1;
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &o, ids.data(), sc.data()), MNEMO_E_SHAPE, nullptr, out);

  q.set(1, 2, kNaN);
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, &def, ids.data(), sc.data()), MNEMO_E_NON_FINITE, "queries", out);
  q.set(1, 2, kInf);
  EXPECT_REFUSED(mnemo_store_search(s, qp, nq, k, nullptr, ids.data(), sc.data()), MNEMO_E_NON_FINITE, "queries", out);
  EXPECT_TRUE(fx.unchanged());
}

TEST(Errors, StoreSaveAndOpen) {
  auto rng = mt::rng_for_test();
  Fixture fx(rng, MNEMO_DTYPE_F32);
  ASSERT_TRUE(fx.store);
  EXPECT_TRUE(mt::failed_with(mnemo_store_save(nullptr, "/tmp/x.mnemo"), MNEMO_E_NULL_POINTER, "store"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_save(fx.store.get(), nullptr), MNEMO_E_NULL_POINTER, "path"));
  mnemo_store* const sentinel = reinterpret_cast<mnemo_store*>(uintptr_t{0x5EED});
  mnemo_store* out = sentinel;
  EXPECT_TRUE(mt::failed_with(mnemo_store_open(nullptr, "/tmp/x.mnemo", &out), MNEMO_E_NULL_POINTER, "rt"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_open(mt::rt(), nullptr, &out), MNEMO_E_NULL_POINTER, "path"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_open(mt::rt(), "/tmp/x.mnemo", nullptr), MNEMO_E_NULL_POINTER, "out"));
  EXPECT_EQ(out, sentinel);
  EXPECT_TRUE(fx.unchanged());
}

// ---- pairs -------------------------------------------------------------------------

TEST(Errors, ScorePairs) {
  auto rng = mt::rng_for_test();
  const size_t n_items = 6, dim = 5, n_pairs = 4;
  Matrix table = mt::random_matrix(rng, MNEMO_DTYPE_F32, n_items, dim);
  Buf<uint64_t> src(n_pairs), tgt(n_pairs);
  for (size_t p = 0; p < n_pairs; ++p) src[p] = p, tgt[p] = n_items - 1 - p;
  Buf<float> scores(n_pairs);
  Outputs out;
  out.watch(scores);
  const void* tp = table.data();
  const int32_t F32 = MNEMO_DTYPE_F32, U64 = MNEMO_DTYPE_U64, DOT = MNEMO_METRIC_DOT;
  auto pairs = [&](mnemo_runtime* r, int32_t metric, const void* t, int32_t tdt, uint64_t ni, uint64_t d, const void* s,
                   const void* g, int32_t idt, uint64_t np,
                   float* o) { return mnemo_score_pairs(r, metric, t, tdt, ni, d, s, g, idt, np, o); };
  float* o = scores.data();

  EXPECT_REFUSED(pairs(nullptr, DOT, tp, F32, n_items, dim, src.data(), tgt.data(), U64, n_pairs, o),
                 MNEMO_E_NULL_POINTER, "rt", out);
  EXPECT_REFUSED(pairs(mt::rt(), DOT, nullptr, F32, n_items, dim, src.data(), tgt.data(), U64, n_pairs, o),
                 MNEMO_E_NULL_POINTER, "table", out);
  EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, F32, n_items, dim, nullptr, tgt.data(), U64, n_pairs, o),
                 MNEMO_E_NULL_POINTER, "src", out);
  EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, F32, n_items, dim, src.data(), nullptr, U64, n_pairs, o),
                 MNEMO_E_NULL_POINTER, "tgt", out);
  EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, F32, n_items, dim, src.data(), tgt.data(), U64, n_pairs, nullptr),
                 MNEMO_E_NULL_POINTER, "scores", out);
  EXPECT_REFUSED(pairs(mt::rt(), DOT, off4(tp), F32, n_items, dim, src.data(), tgt.data(), U64, n_pairs, o),
                 MNEMO_E_MISALIGNED, "table", out);
  EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, F32, n_items, dim, src.misaligned(), tgt.data(), U64, n_pairs, o),
                 MNEMO_E_MISALIGNED, "src", out);
  EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, F32, n_items, dim, src.data(), tgt.misaligned(), U64, n_pairs, o),
                 MNEMO_E_MISALIGNED, "tgt", out);
  EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, F32, n_items, dim, src.data(), tgt.data(), U64, n_pairs, scores.misaligned()),
                 MNEMO_E_MISALIGNED, "scores", out);

  for (const int32_t m : kBadMetrics)
    EXPECT_REFUSED(pairs(mt::rt(), m, tp, F32, n_items, dim, src.data(), tgt.data(), U64, n_pairs, o),
                   MNEMO_E_INVALID_ARGUMENT, "metric", out);
  EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, F32, n_items, 0, src.data(), tgt.data(), U64, n_pairs, o),
                 MNEMO_E_INVALID_ARGUMENT, "dim", out);
  for (const int32_t dt : kNotStorageDtypes)
    EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, dt, n_items, dim, src.data(), tgt.data(), U64, n_pairs, o), MNEMO_E_DTYPE,
                   "table_dtype", out);
  for (const int32_t dt :
       std::initializer_list<int32_t>{MNEMO_DTYPE_F32, MNEMO_DTYPE_F16, MNEMO_DTYPE_BF16, MNEMO_DTYPE_F64, 0, 9, -1})
    EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, F32, n_items, dim, src.data(), tgt.data(), dt, n_pairs, o), MNEMO_E_DTYPE,
                   "index_dtype", out);

  EXPECT_REFUSED(
      pairs(mt::rt(), DOT, tp, F32, uint64_t{1} << 40, uint64_t{1} << 30, src.data(), tgt.data(), U64, n_pairs, o),
      MNEMO_E_OVERFLOW, nullptr, out);
  EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, F32, 1, uint64_t{1} << 62, src.data(), tgt.data(), U64, n_pairs, o),
                 MNEMO_E_OVERFLOW, nullptr, out);
  EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, F32, n_items, dim, src.data(), tgt.data(), U64, uint64_t{1} << 61, o),
                 MNEMO_E_OVERFLOW, nullptr, out);
  EXPECT_REFUSED(
      pairs(mt::rt(), DOT, tp, F32, n_items, dim, src.data(), tgt.data(), MNEMO_DTYPE_U32, uint64_t{1} << 62, o),
      MNEMO_E_OVERFLOW, nullptr, out);

  tgt[2] = n_items;
  EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, F32, n_items, dim, src.data(), tgt.data(), U64, n_pairs, o),
                 MNEMO_E_OUT_OF_RANGE, nullptr, out);
  tgt[2] = 1;
  table.set(src[1], 2, kNaN);
  EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, F32, n_items, dim, src.data(), tgt.data(), U64, n_pairs, o),
                 MNEMO_E_NON_FINITE, "table", out);
  table.set(src[1], 2, -kInf);
  EXPECT_REFUSED(pairs(mt::rt(), DOT, tp, F32, n_items, dim, src.data(), tgt.data(), U64, n_pairs, o),
                 MNEMO_E_NON_FINITE, "table", out);
  Matrix h = mt::random_matrix(rng, MNEMO_DTYPE_BF16, n_items, dim);
  h.set(tgt[0], 0, kNaN);
  EXPECT_REFUSED(
      pairs(mt::rt(), DOT, h.data(), MNEMO_DTYPE_BF16, n_items, dim, src.data(), tgt.data(), U64, n_pairs, o),
      MNEMO_E_NON_FINITE, "table", out);
}

// ---- resampling -------------------------------------------------------------------

TEST(Errors, Resample) {
  auto rng = mt::rng_for_test();
  const size_t batch = 2, n_src = 3, n_tgt = 4, dim = 5;
  Matrix data = mt::random_matrix(rng, MNEMO_DTYPE_F32, batch * n_src, dim);
  Buf<float> st(batch * n_src), tt(batch * n_tgt);
  for (size_t b = 0; b < batch; ++b) {
    for (size_t i = 0; i < n_src; ++i) st[b * n_src + i] = static_cast<float>(i);
    for (size_t j = 0; j < n_tgt; ++j) tt[b * n_tgt + j] = 0.7f * static_cast<float>(j);
  }
  Buf<double> st64(batch * n_src), tt64(batch * n_tgt);
  for (size_t i = 0; i < batch * n_src; ++i) st64[i] = st[i];
  for (size_t i = 0; i < batch * n_tgt; ++i) tt64[i] = tt[i];
  Buf<float> outb(batch * n_tgt * dim);
  Outputs out;
  out.watch(outb);
  const void* dp = data.data();
  const int32_t F32 = MNEMO_DTYPE_F32;
  auto rs = [&](mnemo_runtime* r, const void* d, int32_t ddt, uint64_t b, uint64_t s, uint64_t dm, const void* sp,
                const void* tp, int32_t tdt, uint64_t t, const mnemo_resample_options* opts,
                void* o) { return mnemo_resample(r, d, ddt, b, s, dm, sp, tp, tdt, t, opts, o); };
  void* o = outb.data();

  EXPECT_REFUSED(rs(nullptr, dp, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, nullptr, o),
                 MNEMO_E_NULL_POINTER, "rt", out);
  EXPECT_REFUSED(rs(mt::rt(), nullptr, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, nullptr, o),
                 MNEMO_E_NULL_POINTER, "data", out);
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, nullptr, tt.data(), F32, n_tgt, nullptr, o),
                 MNEMO_E_NULL_POINTER, "src_times", out);
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), nullptr, F32, n_tgt, nullptr, o),
                 MNEMO_E_NULL_POINTER, "tgt_times", out);
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, nullptr, nullptr),
                 MNEMO_E_NULL_POINTER, "out", out);
  EXPECT_REFUSED(rs(mt::rt(), off4(dp), F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, nullptr, o),
                 MNEMO_E_MISALIGNED, "data", out);
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.misaligned(), tt.data(), F32, n_tgt, nullptr, o),
                 MNEMO_E_MISALIGNED, "src_times", out);
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.misaligned(), F32, n_tgt, nullptr, o),
                 MNEMO_E_MISALIGNED, "tgt_times", out);
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, nullptr, outb.misaligned()),
                 MNEMO_E_MISALIGNED, "out", out);

  for (const int32_t dt : kNotStorageDtypes)
    EXPECT_REFUSED(rs(mt::rt(), dp, dt, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, nullptr, o), MNEMO_E_DTYPE,
                   "data_dtype", out);
  for (const int32_t dt :
       std::initializer_list<int32_t>{MNEMO_DTYPE_F16, MNEMO_DTYPE_BF16, MNEMO_DTYPE_U32, MNEMO_DTYPE_U64, 0, 42})
    EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.data(), dt, n_tgt, nullptr, o), MNEMO_E_DTYPE,
                   "time_dtype", out);
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, 0, dim, st.data(), tt.data(), F32, n_tgt, nullptr, o),
                 MNEMO_E_INVALID_ARGUMENT, "n_src", out);
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, 0, st.data(), tt.data(), F32, n_tgt, nullptr, o),
                 MNEMO_E_INVALID_ARGUMENT, "dim", out);

  // Options: struct_size, lengths out of range, misaligned lengths.
  Buf<uint64_t> sl(batch), tl(batch);
  sl[0] = n_src, sl[1] = 2;
  tl[0] = n_tgt, tl[1] = 1;
  mnemo_resample_options opts = mnemo_resample_options_default();
  opts.struct_size = 0;
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, &opts, o),
                 MNEMO_E_INVALID_ARGUMENT, "struct_size", out);
  opts = mnemo_resample_options_default();
  opts.src_lengths = sl.data();
  opts.tgt_lengths = tl.data();
  for (const uint64_t bad : {uint64_t{0}, uint64_t{n_src + 1}, MNEMO_NO_ID}) {
    sl[1] = bad;
    EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, &opts, o),
                   MNEMO_E_INVALID_ARGUMENT, "src_lengths", out);
  }
  sl[1] = 2;
  for (const uint64_t bad : {uint64_t{n_tgt + 1}, MNEMO_NO_ID}) {
    tl[1] = bad;
    EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, &opts, o),
                   MNEMO_E_INVALID_ARGUMENT, "tgt_lengths", out);
  }
  tl[1] = 1;
  opts.src_lengths = sl.misaligned();
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, &opts, o),
                 MNEMO_E_MISALIGNED, "src_lengths", out);
  opts.src_lengths = sl.data();
  opts.tgt_lengths = tl.misaligned();
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, &opts, o),
                 MNEMO_E_MISALIGNED, "tgt_lengths", out);
  opts.tgt_lengths = tl.data();

  EXPECT_REFUSED(
      rs(mt::rt(), dp, F32, uint64_t{1} << 40, uint64_t{1} << 30, dim, st.data(), tt.data(), F32, n_tgt, nullptr, o),
      MNEMO_E_OVERFLOW, nullptr, out);
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, 1, n_src, dim, st.data(), tt.data(), F32, uint64_t{1} << 62, nullptr, o),
                 MNEMO_E_OVERFLOW, nullptr, out);
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, 1, 1, uint64_t{1} << 62, st.data(), tt.data(), F32, 1, nullptr, o),
                 MNEMO_E_OVERFLOW, nullptr, out);

  st[1 * n_src + 2] = 0.5f;  // row 1 goes back in time
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, nullptr, o),
                 MNEMO_E_NOT_SORTED, nullptr, out);
  st[1 * n_src + 2] = kNaN;
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, nullptr, o),
                 MNEMO_E_NON_FINITE, "src_times", out);
  st[1 * n_src + 2] = 2.0f;
  tt[3] = kInf;
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, nullptr, o),
                 MNEMO_E_NON_FINITE, "tgt_times", out);
  tt[3] = 1.0f;
  tt64[5] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st64.data(), tt64.data(), MNEMO_DTYPE_F64, n_tgt, nullptr, o),
                 MNEMO_E_NON_FINITE, "tgt_times", out);
  tt64[5] = 1.0;
  data.set(4, 1, kNaN);
  EXPECT_REFUSED(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, nullptr, o),
                 MNEMO_E_NON_FINITE, "data", out);
  data.set(4, 1, 0.25f);
  // And the same arguments now work.
  EXPECT_OK(rs(mt::rt(), dp, F32, batch, n_src, dim, st.data(), tt.data(), F32, n_tgt, &opts, o));
}

// ---- normalisation ------------------------------------------------------------------

TEST(Errors, NormalizeAndLayerNorm) {
  auto rng = mt::rng_for_test();
  const size_t rows = 3, dim = 5;
  Matrix in = mt::random_matrix(rng, MNEMO_DTYPE_F32, rows, dim);
  Buf<float> ob(rows * dim), gamma(dim), beta(dim);
  for (size_t j = 0; j < dim; ++j) gamma[j] = 1.5f, beta[j] = -0.5f;
  Outputs out;
  out.watch(ob);
  const void* ip = in.data();
  void* o = ob.data();
  const int32_t F32 = MNEMO_DTYPE_F32;
  const float* g = gamma.data();
  const float* b = beta.data();

  // Both functions share in/out/dtype/rows/dim checks.
  using Fn = std::function<mnemo_status(mnemo_runtime*, const void*, void*, int32_t, uint64_t, uint64_t)>;
  const std::vector<std::pair<const char*, Fn>> fns = {
      {"normalize_rows", [](mnemo_runtime* r, const void* i, void* op, int32_t dt, uint64_t n,
                            uint64_t d) { return mnemo_normalize_rows(r, i, op, dt, n, d); }},
      {"layer_norm", [&](mnemo_runtime* r, const void* i, void* op, int32_t dt, uint64_t n, uint64_t d) {
         return mnemo_layer_norm(r, i, op, dt, n, d, g, b, 1e-5f);
       }}};
  for (const auto& [name, fn] : fns) {
    SCOPED_TRACE(name);
    EXPECT_REFUSED(fn(nullptr, ip, o, F32, rows, dim), MNEMO_E_NULL_POINTER, "rt", out);
    EXPECT_REFUSED(fn(mt::rt(), nullptr, o, F32, rows, dim), MNEMO_E_NULL_POINTER, "in", out);
    EXPECT_REFUSED(fn(mt::rt(), ip, nullptr, F32, rows, dim), MNEMO_E_NULL_POINTER, "out", out);
    EXPECT_REFUSED(fn(mt::rt(), off4(ip), o, F32, rows, dim), MNEMO_E_MISALIGNED, "in", out);
    EXPECT_REFUSED(fn(mt::rt(), ip, ob.misaligned(), F32, rows, dim), MNEMO_E_MISALIGNED, "out", out);
    for (const int32_t dt : kNotStorageDtypes)
      EXPECT_REFUSED(fn(mt::rt(), ip, o, dt, rows, dim), MNEMO_E_DTYPE, "dtype", out);
    EXPECT_REFUSED(fn(mt::rt(), ip, o, F32, rows, 0), MNEMO_E_INVALID_ARGUMENT, "dim", out);
    EXPECT_REFUSED(fn(mt::rt(), ip, o, F32, uint64_t{1} << 40, uint64_t{1} << 30), MNEMO_E_OVERFLOW, nullptr, out);
    EXPECT_REFUSED(fn(mt::rt(), ip, o, F32, 1, uint64_t{1} << 62), MNEMO_E_OVERFLOW, nullptr, out);
    in.set(2, 4, kNaN);
    EXPECT_REFUSED(fn(mt::rt(), ip, o, F32, rows, dim), MNEMO_E_NON_FINITE, "in", out);
    in.set(2, 4, -kInf);
    EXPECT_REFUSED(fn(mt::rt(), ip, o, F32, rows, dim), MNEMO_E_NON_FINITE, "in", out);
    in.set(2, 4, 0.75f);
    Matrix h = mt::random_matrix(rng, MNEMO_DTYPE_F16, rows, dim);
    h.set(0, 0, kInf);
    EXPECT_REFUSED(fn(mt::rt(), h.data(), o, MNEMO_DTYPE_F16, rows, dim), MNEMO_E_NON_FINITE, "in", out);
  }

  auto ln = [&](const float* gg, const float* bb, float eps) {
    return mnemo_layer_norm(mt::rt(), ip, o, F32, rows, dim, gg, bb, eps);
  };
  EXPECT_REFUSED(ln(gamma.misaligned(), b, 1e-5f), MNEMO_E_MISALIGNED, "gamma", out);
  EXPECT_REFUSED(ln(g, beta.misaligned(), 1e-5f), MNEMO_E_MISALIGNED, "beta", out);
  EXPECT_REFUSED(ln(g, b, -1e-5f), MNEMO_E_INVALID_ARGUMENT, "eps", out);
  EXPECT_REFUSED(ln(g, b, -0.0f - 1e-30f), MNEMO_E_INVALID_ARGUMENT, "eps", out);
  // A non-finite eps is out of its domain; either code names it.
  for (const float eps : {kNaN, kInf}) {
    const mnemo_status st = ln(g, b, eps);
    EXPECT_TRUE(st == MNEMO_E_INVALID_ARGUMENT || st == MNEMO_E_NON_FINITE) << mt::status_str(st);
    EXPECT_TRUE(mt::names_identifier(mt::last_error(), "eps")) << mt::last_error();
    EXPECT_TRUE(out.unchanged());
  }
  gamma[3] = kNaN;
  EXPECT_REFUSED(ln(g, b, 1e-5f), MNEMO_E_NON_FINITE, "gamma", out);
  gamma[3] = 1.0f;
  beta[0] = kInf;
  EXPECT_REFUSED(ln(g, b, 1e-5f), MNEMO_E_NON_FINITE, "beta", out);
  beta[0] = 0.0f;
  EXPECT_OK(ln(g, b, 1e-5f));
}

// ---- device entry points on a CPU runtime ----------------------------------------

// Refused before anything else, whatever the pointers; the usual argument
// checks come first where they apply.
TEST(Errors, DeviceCallsOnACpuRuntime) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CPU;
  auto cpu = mt::make_runtime(o);
  ASSERT_TRUE(cpu);
  auto s = mt::make_store(8, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, cpu.get());
  ASSERT_TRUE(s);
  Buf<float> q(8), scores(4);
  std::fill(q.data(), q.data() + 8, 0.5f);
  Buf<uint64_t> ids(4);
  EXPECT_EQ(mnemo_store_search_device(s.get(), q.data(), 1, 4, nullptr, ids.data(), scores.data(), nullptr),
            MNEMO_E_BACKEND_UNAVAILABLE);
  EXPECT_NE(mt::last_error().find("CUDA"), std::string::npos) << mt::last_error();
  EXPECT_EQ(mnemo_similarity_device(cpu.get(), MNEMO_METRIC_DOT, q.data(), 1, q.data(), MNEMO_DTYPE_F32, 1, 8,
                                    scores.data(), nullptr),
            MNEMO_E_BACKEND_UNAVAILABLE);
  EXPECT_EQ(mnemo_store_search_device(s.get(), q.data(), 1, 0, nullptr, ids.data(), scores.data(), nullptr),
            MNEMO_E_INVALID_ARGUMENT);
  EXPECT_EQ(mnemo_store_search_device(s.get(), nullptr, 1, 4, nullptr, ids.data(), scores.data(), nullptr),
            MNEMO_E_NULL_POINTER);
}

// ---- allocation and runtime info ---------------------------------------------------

TEST(Errors, AllocAndInfo) {
  void* p = reinterpret_cast<void*>(uintptr_t{0x5EED});
  EXPECT_TRUE(mt::failed_with(mnemo_alloc(0, &p), MNEMO_E_INVALID_ARGUMENT, "bytes"));
  EXPECT_EQ(p, reinterpret_cast<void*>(uintptr_t{0x5EED}));
  EXPECT_TRUE(mt::failed_with(mnemo_alloc(64, nullptr), MNEMO_E_NULL_POINTER, "out"));
  // mnemo_alloc lists OUT_OF_MEMORY; a size beyond the address space also
  // fits the general OVERFLOW rule, so either code is taken here.
  for (const uint64_t huge : {UINT64_MAX, UINT64_MAX - 15, uint64_t{1} << 63}) {
    const mnemo_status st = mnemo_alloc(huge, &p);
    EXPECT_TRUE(st == MNEMO_E_OUT_OF_MEMORY || st == MNEMO_E_OVERFLOW) << mt::status_str(st);
    EXPECT_FALSE(mt::last_error().empty());
  }
  EXPECT_EQ(p, reinterpret_cast<void*>(uintptr_t{0x5EED}));

  mnemo_runtime_report info;
  std::memset(&info, 0xAB, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_TRUE(mt::failed_with(mnemo_runtime_info(nullptr, &info), MNEMO_E_NULL_POINTER, "rt"));
  EXPECT_TRUE(mt::failed_with(mnemo_runtime_info(mt::rt(), nullptr), MNEMO_E_NULL_POINTER, "info"));
  for (const uint32_t small : {0u, 4u, 16u}) {
    mnemo_runtime_report r;
    std::memset(&r, 0xAB, sizeof r);
    r.struct_size = small;
    mnemo_runtime_report before;
    std::memcpy(&before, &r, sizeof r);
    EXPECT_TRUE(mt::failed_with(mnemo_runtime_info(mt::rt(), &r), MNEMO_E_INVALID_ARGUMENT, "struct_size"));
    EXPECT_EQ(std::memcmp(&r, &before, sizeof r), 0) << "struct_size " << small;
  }
}

}  // namespace
