// mnemo_store_search_device and mnemo_similarity_device: device queries and
// outputs on a caller's stream give bit for bit what the host calls give
// (every search path: the fused scan with its last-block merge, the
// prefiltered radix selection for large k, GEMM tiles), padding included;
// bad input is refused with nothing written; a write waits for the searches
// queued before it. Skips, saying why, where no CUDA backend can be created
// (the same calls on a CPU runtime: Errors.DeviceCallsOnACpuRuntime).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "../reference.h"
#include "../store_model.h"
#include "../topk_check.h"

#ifdef MNEMO_TEST_HAVE_CUDART
#include "dev_buf.h"
#endif

namespace {

#ifdef MNEMO_TEST_HAVE_CUDART

using mt::DevBuf;
using mt::Matrix;
using mt::Results;
using mt::StoreModel;
using mt::Stream;

mt::RuntimePtr runtime_on(int32_t backend, int32_t precision = MNEMO_PRECISION_EXACT) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = backend;
  o.precision = precision;
  mnemo_runtime* rt = nullptr;
  if (mnemo_runtime_create(&o, &rt) != MNEMO_OK) return nullptr;
  return mt::RuntimePtr(rt);
}

#define REQUIRE_CUDA(name, precision)                    \
  auto name = runtime_on(MNEMO_BACKEND_CUDA, precision); \
  if (!name) GTEST_SKIP() << "no CUDA backend on this machine: " << mnemo_last_error()

// Device search of q against the host search of the same store: identical
// ids and score bits in every column (k past the candidates is padding).
void expect_device_matches_host(const mnemo_store* s, const Matrix& q, size_t k, const mnemo_search_options* o,
                                const std::string& what) {
  const size_t nq = q.rows;
  Results host;
  ASSERT_OK(mt::store_search(s, q, k, o, &host));
  DevBuf dq(q.data(), nq * q.dim * 4), di(nq * k * 8), ds(nq * k * 4);
  std::vector<unsigned char> poison(nq * k * 8, 0xAB);
  cudaMemcpy(di.get(), poison.data(), nq * k * 8, cudaMemcpyHostToDevice);
  cudaMemcpy(ds.get(), poison.data(), nq * k * 4, cudaMemcpyHostToDevice);
  cudaDeviceSynchronize();  // pageable copies may land late (dev_buf.h)
  Stream st;
  ASSERT_OK(mnemo_store_search_device(s, dq.as<float>(), nq, k, o, di.as<uint64_t>(), ds.as<float>(), st.s));
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  const auto ids = di.bytes(), scores = ds.bytes();
  ASSERT_EQ(std::memcmp(ids.data(), host.ids.data(), nq * k * 8), 0) << what << ": ids differ";
  ASSERT_EQ(std::memcmp(scores.data(), host.scores.data(), nq * k * 4), 0) << what << ": scores differ";
}

struct DevCase {
  size_t n, dim, nq, k;
  int32_t dtype, metric, precision;
};

TEST(GpuDeviceSearch, MatchesHostCallOnEveryPath) {
  const std::vector<DevCase> cases = {
      {20, 5, 1, 10, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, MNEMO_PRECISION_EXACT},        // below a warp, 5 padded to 8
      {20, 5, 2, 25, MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ, MNEMO_PRECISION_EXACT},          // k > N: padding
      {5003, 768, 1, 10, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, MNEMO_PRECISION_EXACT},    // fused scan, in place
      {5003, 768, 3, 5003, MNEMO_DTYPE_F16, MNEMO_METRIC_DOT, MNEMO_PRECISION_EXACT},     // k = N
      {4097, 127, 5, 256, MNEMO_DTYPE_BF16, MNEMO_METRIC_L2SQ, MNEMO_PRECISION_EXACT},    // two scan groups
      {30011, 96, 2, 1000, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, MNEMO_PRECISION_EXACT},  // prefiltered radix
      {6001, 64, 20, 10, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, MNEMO_PRECISION_FAST},     // GEMM tiles
      {6001, 64, 20, 300, MNEMO_DTYPE_F16, MNEMO_METRIC_L2SQ, MNEMO_PRECISION_FAST},      // GEMM, large k
  };
  for (const DevCase& c : cases) {
    REQUIRE_CUDA(gpu, c.precision);
    auto rng = mt::rng_for_test();
    auto s = mt::make_store(c.dim, c.dtype, c.metric, gpu.get());
    ASSERT_TRUE(s);
    StoreModel model(c.dim, c.dtype, c.metric);
    std::vector<uint64_t> ids(c.n);
    for (size_t i = 0; i < c.n; ++i) ids[i] = (i * 2654435761ull) % 1000003ull + 7 * i;
    const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, c.n, c.dim, c.metric == MNEMO_METRIC_DOT);
    ASSERT_OK(mt::store_add(s.get(), ids, m));
    model.add(ids, m);
    std::vector<uint64_t> biased;
    std::vector<float> bias;
    for (size_t i = 0; i < c.n; i += 7) biased.push_back(ids[i]), bias.push_back(0.25f * mt::rand_nonzero(rng));
    ASSERT_OK(mt::store_set_bias(s.get(), biased, bias));
    for (size_t i = 0; i < biased.size(); ++i) model.set_bias(biased[i], bias[i]);
    const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, c.nq, c.dim, c.metric == MNEMO_METRIC_DOT);
    const std::string what = mt::case_name(c.dtype, c.metric, c.dim) + " n" + std::to_string(c.n) + " q" +
                             std::to_string(c.nq) + " k" + std::to_string(c.k);
    // The host results themselves against the reference.
    Results host;
    ASSERT_OK(mt::store_search(s.get(), q, c.k, nullptr, &host));
    mt::expect_results(model, q, host, false);
    expect_device_matches_host(s.get(), q, c.k, nullptr, what);
    mnemo_search_options o = mnemo_search_options_default();
    o.apply_bias = 1;
    expect_device_matches_host(s.get(), q, c.k, &o, what + " bias");
    // A filter that keeps fewer than k rows: the rest is padding.
    std::vector<uint64_t> keep;
    for (size_t i = 0; i < c.n && keep.size() < std::max<size_t>(1, c.k / 2); i += 3) keep.push_back(ids[i]);
    mt::Buf<uint64_t> fk(keep.size());
    std::copy(keep.begin(), keep.end(), fk.data());
    o = mnemo_search_options_default();
    o.filter_kind = MNEMO_FILTER_IDS;
    o.filter_ids = fk.data();
    o.filter_count = keep.size();
    const std::set<uint64_t> allow(keep.begin(), keep.end());
    Results rf;
    ASSERT_OK(mt::store_search(s.get(), q, c.k, &o, &rf));
    mt::expect_results(model, q, rf, false, &allow);
    expect_device_matches_host(s.get(), q, c.k, &o, what + " filter");
  }
}

// Many equal keys around the k-th: the prefilter's compact list overflows
// and the exact selection reads the full row; ties go to the smaller id.
TEST(GpuDeviceSearch, TiesBeyondThePrefilterFallBack) {
  REQUIRE_CUDA(gpu, MNEMO_PRECISION_EXACT);
  auto rng = mt::rng_for_test();
  const size_t dim = 32, dups = 7000, others = 25000, k = 1200;
  auto s = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, gpu.get());
  ASSERT_TRUE(s);
  StoreModel model(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE);
  const Matrix base = mt::random_matrix(rng, MNEMO_DTYPE_F32, 1, dim, true);
  const Matrix rest = mt::random_matrix(rng, MNEMO_DTYPE_F32, others, dim, true);
  Matrix all(MNEMO_DTYPE_F32, dups + others, dim);
  for (size_t i = 0; i < dups; ++i) all.copy_row(i, base, 0);
  for (size_t i = 0; i < others; ++i) all.copy_row(dups + i, rest, i);
  std::vector<uint64_t> ids(dups + others);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = (ids.size() - i) * 3 + 11;  // ids fall as slots rise
  ASSERT_OK(mt::store_add(s.get(), ids, all));
  model.add(ids, all);
  Matrix q(MNEMO_DTYPE_F32, 1, dim);
  q.copy_row(0, base, 0);
  Results r;
  ASSERT_OK(mt::store_search(s.get(), q, k, nullptr, &r));
  mt::expect_results(model, q, r, false);
  std::vector<uint64_t> dup_ids(ids.begin(), ids.begin() + dups);
  std::sort(dup_ids.begin(), dup_ids.end());
  for (size_t j = 0; j < k; ++j) ASSERT_EQ(r.row_ids(0)[j], dup_ids[j]) << "rank " << j;
  expect_device_matches_host(s.get(), q, k, nullptr, "ties");
}

TEST(GpuDeviceSearch, BadInputChangesNothing) {
  REQUIRE_CUDA(gpu, MNEMO_PRECISION_EXACT);
  auto rng = mt::rng_for_test();
  const size_t n = 500, dim = 24, k = 5;
  auto s = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, gpu.get());
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = i + 1;
  ASSERT_OK(mt::store_add(s.get(), ids, mt::random_matrix(rng, MNEMO_DTYPE_F32, n, dim)));
  Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, dim);
  static_cast<float*>(q.data())[dim + 3] = std::nanf("");
  std::vector<unsigned char> poison(2 * k * 8, 0xAB);
  DevBuf dq(q.data(), 2 * dim * 4), di(poison.data(), 2 * k * 8), ds(poison.data(), 2 * k * 4);
  EXPECT_EQ(
      mnemo_store_search_device(s.get(), dq.as<float>(), 2, k, nullptr, di.as<uint64_t>(), ds.as<float>(), nullptr),
      MNEMO_E_NON_FINITE);
  EXPECT_NE(std::string(mnemo_last_error()).find("queries[" + std::to_string(dim + 3) + "]"), std::string::npos)
      << mnemo_last_error();
  EXPECT_EQ(di.bytes(), std::vector<unsigned char>(poison.begin(), poison.begin() + 2 * k * 8));
  EXPECT_EQ(ds.bytes(), std::vector<unsigned char>(poison.begin(), poison.begin() + 2 * k * 4));
  // Pageable host memory is not device memory.
  mt::Buf<float> hq(2 * dim);
  std::fill(hq.data(), hq.data() + 2 * dim, 0.5f);
  EXPECT_EQ(mnemo_store_search_device(s.get(), hq.data(), 2, k, nullptr, di.as<uint64_t>(), ds.as<float>(), nullptr),
            MNEMO_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mnemo_last_error()).find("queries"), std::string::npos) << mnemo_last_error();
  EXPECT_EQ(ds.bytes(), std::vector<unsigned char>(poison.begin(), poison.begin() + 2 * k * 4));
}

// What one device search with check_on_device wrote: the status word (set
// to poison before the call), the ids and the scores.
struct CheckedSearch {
  int32_t verdict = -1;
  std::vector<uint64_t> ids;
  std::vector<float> scores;
};

// A device search of q (nq rows) with check_on_device and o.device_status
// in `status`, on a stream of its own, into outputs poisoned first.
void checked_device_search(const mnemo_store* s, const Matrix& q, size_t nq, size_t k, const mnemo_search_options& o,
                           const DevBuf& status, CheckedSearch* out) {
  const std::vector<unsigned char> poison(nq * k * 8, 0xAB), status_poison(16, 0x5A);
  DevBuf dq(q.data(), nq * q.dim * 4), di(poison.data(), nq * k * 8), ds(poison.data(), nq * k * 4);
  cudaMemcpy(status.get(), status_poison.data(), 16, cudaMemcpyHostToDevice);
  cudaDeviceSynchronize();  // pageable copies may land late (dev_buf.h)
  Stream st;
  ASSERT_OK(mnemo_store_search_device(s, dq.as<float>(), nq, k, &o, di.as<uint64_t>(), ds.as<float>(), st.s));
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  cudaMemcpy(&out->verdict, status.get(), 4, cudaMemcpyDeviceToHost);
  out->ids.resize(nq * k);
  out->scores.resize(nq * k);
  cudaMemcpy(out->ids.data(), di.get(), nq * k * 8, cudaMemcpyDeviceToHost);
  cudaMemcpy(out->scores.data(), ds.get(), nq * k * 4, cudaMemcpyDeviceToHost);
}

// check_on_device: the queries' non-finite check inside the search. A bad
// query's row becomes padding and the device status says NON_FINITE; the
// other rows equal the host search; with finite queries the status says OK
// and every row equals the host search. Dimensions with and without row
// padding (the query copy), f32 and f16 storage, NaN and infinity.
TEST(GpuDeviceSearch, QueriesCheckedInsideTheSearch) {
  REQUIRE_CUDA(gpu, MNEMO_PRECISION_EXACT);
  auto rng = mt::rng_for_test();
  const size_t n = 700, nq = 3, k = 7;
  for (const int32_t dt : {MNEMO_DTYPE_F32, MNEMO_DTYPE_F16}) {
    for (const size_t dim : {size_t{24}, size_t{13}}) {
      for (const float bad_value : {std::nanf(""), -INFINITY}) {
        const std::string what = "dtype " + std::to_string(dt) + " dim " + std::to_string(dim);
        auto s = mt::make_store(dim, dt, MNEMO_METRIC_COSINE, gpu.get());
        std::vector<uint64_t> ids(n);
        for (size_t i = 0; i < n; ++i) ids[i] = 3 * i + 2;
        ASSERT_OK(mt::store_add(s.get(), ids, mt::random_matrix(rng, MNEMO_DTYPE_F32, n, dim)));
        Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, dim);
        Results host;
        ASSERT_OK(mt::store_search(s.get(), q, k, nullptr, &host));
        mnemo_search_options o = mnemo_search_options_default();
        o.check_on_device = 1;
        DevBuf status(16);
        o.device_status = status.as<int32_t>();
        // Finite queries: OK and the host's results.
        CheckedSearch got;
        ASSERT_NO_FATAL_FAILURE(checked_device_search(s.get(), q, nq, k, o, status, &got));
        EXPECT_EQ(got.verdict, MNEMO_OK) << what;
        EXPECT_EQ(std::memcmp(got.ids.data(), host.ids.data(), nq * k * 8), 0) << what;
        EXPECT_EQ(std::memcmp(got.scores.data(), host.scores.data(), nq * k * 4), 0) << what;
        // Query 1 holds a bad value: its row is padding, the others stand.
        static_cast<float*>(q.data())[dim + dim / 2] = bad_value;
        ASSERT_NO_FATAL_FAILURE(checked_device_search(s.get(), q, nq, k, o, status, &got));
        EXPECT_EQ(got.verdict, MNEMO_E_NON_FINITE) << what;
        for (size_t j = 0; j < k; ++j) {
          EXPECT_EQ(got.ids[k + j], MNEMO_NO_ID) << what << " rank " << j;
          EXPECT_TRUE(std::isnan(got.scores[k + j])) << what << " rank " << j;
        }
        for (const size_t row : {size_t{0}, size_t{2}}) {
          EXPECT_EQ(std::memcmp(&got.ids[row * k], &host.ids[row * k], k * 8), 0) << what << " row " << row;
          EXPECT_EQ(std::memcmp(&got.scores[row * k], &host.scores[row * k], k * 4), 0) << what << " row " << row;
        }
        // Without the option the same call is refused as before, nothing written.
        const std::vector<unsigned char> poison(nq * k * 8, 0xAB);
        DevBuf dq(q.data(), nq * dim * 4), di(poison.data(), nq * k * 8), ds(poison.data(), nq * k * 4);
        EXPECT_EQ(mnemo_store_search_device(s.get(), dq.as<float>(), nq, k, nullptr, di.as<uint64_t>(), ds.as<float>(),
                                            nullptr),
                  MNEMO_E_NON_FINITE);
        EXPECT_EQ(di.bytes(), poison) << what;
      }
    }
  }
}

// The device status word is checked like every other buffer: device memory
// of the store's GPU, 16-byte aligned; nothing written on refusal.
TEST(GpuDeviceSearch, DeviceStatusIsChecked) {
  REQUIRE_CUDA(gpu, MNEMO_PRECISION_EXACT);
  auto rng = mt::rng_for_test();
  const size_t n = 50, dim = 16, k = 3;
  auto s = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, gpu.get());
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = i;
  ASSERT_OK(mt::store_add(s.get(), ids, mt::random_matrix(rng, MNEMO_DTYPE_F32, n, dim)));
  Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 1, dim);
  std::vector<unsigned char> poison(k * 8, 0xAB);
  DevBuf dq(q.data(), dim * 4), di(poison.data(), k * 8), ds(poison.data(), k * 4), status(32);
  mnemo_search_options o = mnemo_search_options_default();
  o.check_on_device = 1;
  o.device_status = reinterpret_cast<int32_t*>(status.as<unsigned char>() + 4);
  EXPECT_EQ(mnemo_store_search_device(s.get(), dq.as<float>(), 1, k, &o, di.as<uint64_t>(), ds.as<float>(), nullptr),
            MNEMO_E_MISALIGNED);
  EXPECT_NE(std::string(mnemo_last_error()).find("device_status"), std::string::npos) << mnemo_last_error();
  mt::Buf<int32_t> host_status(4, 0);
  o.device_status = host_status.data();
  EXPECT_EQ(mnemo_store_search_device(s.get(), dq.as<float>(), 1, k, &o, di.as<uint64_t>(), ds.as<float>(), nullptr),
            MNEMO_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mnemo_last_error()).find("device_status"), std::string::npos) << mnemo_last_error();
  EXPECT_EQ(di.bytes(), poison);
}

// A write right after a queued device search: the search sees the store as
// it was when called (the write waits for it), and the next one sees the write.
TEST(GpuDeviceSearch, WritesWaitForQueuedSearches) {
  REQUIRE_CUDA(gpu, MNEMO_PRECISION_EXACT);
  auto rng = mt::rng_for_test();
  const size_t n = 200000, dim = 256, k = 8;
  auto s = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, gpu.get());
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = i;
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, n, dim);
  ASSERT_OK(mt::store_add(s.get(), ids, m));
  Matrix q(MNEMO_DTYPE_F32, 1, dim);
  q.copy_row(0, m, 17);
  Results before;
  ASSERT_OK(mt::store_search(s.get(), q, k, nullptr, &before));
  ASSERT_EQ(before.row_ids(0)[0], 17u);
  DevBuf dq(q.data(), dim * 4), di(k * 8), ds(k * 4);
  Stream st;
  for (int round = 0; round < 3; ++round) {
    ASSERT_OK(
        mnemo_store_search_device(s.get(), dq.as<float>(), 1, k, nullptr, di.as<uint64_t>(), ds.as<float>(), st.s));
    // Overwrite every row while the search may still run.
    const Matrix other = mt::random_matrix(rng, MNEMO_DTYPE_F32, n, dim);
    ASSERT_OK(mt::store_add(s.get(), ids, other));
    ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
    if (round == 0) {
      const auto got = di.bytes();
      ASSERT_EQ(std::memcmp(got.data(), before.ids.data(), k * 8), 0);
    }
    ASSERT_OK(mt::store_add(s.get(), ids, m));  // back to the original rows
  }
}

TEST(GpuDeviceSimilarity, MatchesHostCall) {
  for (const int32_t precision : {MNEMO_PRECISION_EXACT, MNEMO_PRECISION_FAST}) {
    REQUIRE_CUDA(gpu, precision);
    auto rng = mt::rng_for_test();
    for (const int32_t dt : {MNEMO_DTYPE_F32, MNEMO_DTYPE_F16, MNEMO_DTYPE_BF16})
      for (const int32_t me : {MNEMO_METRIC_COSINE, MNEMO_METRIC_DOT, MNEMO_METRIC_L2SQ})
        for (const size_t dim : {size_t{131}, size_t{128}})
          for (const size_t nq : {size_t{3}, size_t{20}}) {
            const size_t n = 777;
            const Matrix t = mt::random_matrix(rng, dt, n, dim);
            const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, dim);
            mt::Buf<float> host(nq * n);
            mt::poison_f32(host.data(), nq * n);
            ASSERT_OK(mnemo_similarity(gpu.get(), me, static_cast<const float*>(q.data()), nq, t.data(), dt, n, dim,
                                       host.data()));
            DevBuf dq(q.data(), nq * dim * 4), dtg(t.data(), n * dim * (dt == MNEMO_DTYPE_F32 ? 4 : 2)),
                dout(nq * n * 4);
            Stream st;
            ASSERT_OK(mnemo_similarity_device(gpu.get(), me, dq.as<float>(), nq, dtg.get(), dt, n, dim,
                                              dout.as<float>(), st.s));
            ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
            const auto got = dout.bytes();
            ASSERT_EQ(std::memcmp(got.data(), host.data(), nq * n * 4), 0)
                << mt::case_name(dt, me, dim) << " nq " << nq << " precision " << precision;
            if (precision == MNEMO_PRECISION_EXACT)
              for (size_t j = 0; j < n; j += 97) {
                const double want = ref::score(me, q.row(0), t.row(j), dim);
                ASSERT_NEAR(host[j], want, ref::score_tol(me, q.row(0), t.row(j), dim, want));
              }
          }
  }
}

#endif  // MNEMO_TEST_HAVE_CUDART

}  // namespace
