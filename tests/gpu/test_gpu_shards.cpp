// A store sharded over every visible GPU against the same memories on one
// GPU: every search path (scan, GEMM tiles, radix selection for large k,
// FAST), unequal shards, a shard emptied by removes, filters, bias, and
// searches running while writes land; host buffers and device buffers
// (queries and results on the first device, the shards' lists merged
// there). Results must agree bit for bit.
// Skips, saying why, with fewer than two usable GPUs.
#include <atomic>
#include <cmath>
#include <set>
#include <thread>
#include <utility>

#include "../support.h"

#ifdef MNEMO_TEST_HAVE_CUDART
#include "dev_buf.h"
#endif

namespace {

using mt::Buf;

mt::RuntimePtr gpu_runtime(int32_t precision, uint32_t devices, uint64_t workspace, std::string* why) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CUDA;
  o.precision = precision;
  o.device_count = devices;  // 0: device 0 alone
  o.workspace_bytes = workspace;
  mnemo_runtime* rt = nullptr;
  const mnemo_status s = mnemo_runtime_create(&o, &rt);
  if (s != MNEMO_OK && why) *why = mnemo_last_error();
  return mt::RuntimePtr(s == MNEMO_OK ? rt : nullptr);
}

// One device and all devices, or a skip.
#define REQUIRE_GPUS(precision, workspace)                                                        \
  std::string why_;                                                                               \
  auto one = gpu_runtime(precision, 0, workspace, &why_);                                         \
  if (!one) GTEST_SKIP() << "no CUDA backend: " << why_;                                          \
  auto many = gpu_runtime(precision, MNEMO_ALL_DEVICES, workspace, &why_);                        \
  ASSERT_TRUE(many) << why_;                                                                      \
  mnemo_runtime_report rep_;                                                                      \
  rep_.struct_size = sizeof rep_;                                                                 \
  ASSERT_OK(mnemo_runtime_info(many.get(), &rep_));                                               \
  if (rep_.device_count < 2) GTEST_SKIP() << "fewer than two GPUs (" << rep_.device_count << ")"; \
  ASSERT_EQ(rep_.shards, rep_.device_count)

Buf<float> random_rows(std::mt19937_64& rng, size_t rows, size_t dim) {
  Buf<float> v(rows * dim);
  for (size_t i = 0; i < rows * dim; ++i) v[i] = mt::rand_nonzero(rng);
  return v;
}

#ifdef MNEMO_TEST_HAVE_CUDART
// The device-pointer search of `many` (queries and poisoned results on
// device 0, the first shard's, on a stream of the caller's), read back.
mnemo_status device_search(const mnemo_store* many, const float* q, uint64_t nq, uint64_t dim, uint64_t k,
                           const mnemo_search_options* o, std::vector<uint64_t>* ids, std::vector<float>* scores) {
  cudaSetDevice(0);
  const std::vector<unsigned char> poison(nq * k * 8, 0xAB);
  mt::DevBuf dq(q, nq * dim * 4), di(poison.data(), nq * k * 8), ds(poison.data(), nq * k * 4);
  mt::Stream st;
  const mnemo_status s =
      mnemo_store_search_device(many, dq.as<float>(), nq, k, o, di.as<uint64_t>(), ds.as<float>(), st.s);
  EXPECT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  ids->resize(nq * k);
  scores->resize(nq * k);
  cudaMemcpy(ids->data(), di.get(), nq * k * 8, cudaMemcpyDeviceToHost);
  cudaMemcpy(scores->data(), ds.get(), nq * k * 4, cudaMemcpyDeviceToHost);
  return s;
}
#endif

void expect_same(const mnemo_store* a, const mnemo_store* b, const Buf<float>& q, uint64_t nq, uint64_t k,
                 const mnemo_search_options* o, const std::string& what) {
  Buf<uint64_t> ia(nq * k), ib(nq * k);
  Buf<float> sa(nq * k), sb(nq * k);
  mt::poison_f32(sa.data(), nq * k);
  mt::poison_f32(sb.data(), nq * k);
  ASSERT_OK(mnemo_store_search(a, q.data(), nq, k, o, ia.data(), sa.data()));
  ASSERT_OK(mnemo_store_search(b, q.data(), nq, k, o, ib.data(), sb.data()));
  for (uint64_t i = 0; i < nq * k; ++i) {
    ASSERT_EQ(ia[i], ib[i]) << what << ": query " << i / k << " place " << i % k;
    ASSERT_EQ(0, std::memcmp(&sa[i], &sb[i], 4)) << what << ": score bits, query " << i / k << " place " << i % k;
  }
#ifdef MNEMO_TEST_HAVE_CUDART
  std::vector<uint64_t> di;
  std::vector<float> ds;
  ASSERT_OK(device_search(b, q.data(), nq, q.size() / nq, k, o, &di, &ds));
  for (uint64_t i = 0; i < nq * k; ++i) {
    ASSERT_EQ(ia[i], di[i]) << what << ", device buffers: query " << i / k << " place " << i % k;
    ASSERT_EQ(0, std::memcmp(&sa[i], &ds[i], 4))
        << what << ", device buffers: score bits, query " << i / k << " place " << i % k;
  }
#endif
}

struct Stores {
  mnemo_store* one;
  mnemo_store* many;
  void add(const std::vector<uint64_t>& ids, const float* v) {
    ASSERT_OK(mnemo_store_add(one, ids.data(), v, MNEMO_DTYPE_F32, ids.size()));
    ASSERT_OK(mnemo_store_add(many, ids.data(), v, MNEMO_DTYPE_F32, ids.size()));
  }
  void remove(const std::vector<uint64_t>& ids) {
    uint64_t a = 0, b = 0;
    ASSERT_OK(mnemo_store_remove(one, ids.data(), ids.size(), &a));
    ASSERT_OK(mnemo_store_remove(many, ids.data(), ids.size(), &b));
    ASSERT_EQ(a, b);
  }
};

// Ids of each shard, from the slot ranges of the stats.
std::vector<std::vector<uint64_t>> ids_by_shard(const mnemo_store* s, const std::vector<uint64_t>& ids) {
  mnemo_store_statistics st;
  st.struct_size = sizeof st;
  EXPECT_OK(mnemo_store_stats(s, &st));
  std::vector<std::vector<uint64_t>> out(st.shards);
  uint64_t slots = 0;
  EXPECT_OK(mnemo_store_slot_count(s, &slots));
  // Slots are the shards' slots end to end; with no tombstones yet the
  // shard of a slot follows from the live counts.
  for (uint64_t id : ids) {
    uint64_t slot = 0;
    if (mnemo_store_slot_of(s, id, &slot) != MNEMO_OK) continue;
    uint64_t base = 0;
    for (uint32_t i = 0; i < st.shards; ++i) {
      if (slot < base + st.shard_vectors[i]) {
        out[i].push_back(id);
        break;
      }
      base += st.shard_vectors[i];
    }
  }
  return out;
}

struct Case {
  int32_t dtype, metric, precision;
  uint64_t n, dim, nq, k, workspace;
};

class GpuShards : public ::testing::TestWithParam<Case> {};

TEST_P(GpuShards, SameAsOneDevice) {
  const Case c = GetParam();
  REQUIRE_GPUS(c.precision, c.workspace);
  auto rng = mt::rng_for_test();
  auto s1 = mt::make_store(c.dim, c.dtype, c.metric, one.get());
  auto sn = mt::make_store(c.dim, c.dtype, c.metric, many.get());
  Stores st{s1.get(), sn.get()};
  std::vector<uint64_t> ids(c.n);
  std::set<uint64_t> seen;
  for (auto& id : ids) {
    do id = rng() % (10 * c.n);
    while (!seen.insert(id).second);
  }
  Buf<float> v = random_rows(rng, c.n, c.dim);
  for (size_t i = 0; i < c.n / 10; ++i) std::memcpy(&v[(i + c.n / 2) * c.dim], &v[i * c.dim], c.dim * 4);  // ties
  st.add(ids, v.data());
  Buf<float> q = random_rows(rng, c.nq, c.dim);
  expect_same(st.one, st.many, q, c.nq, c.k, nullptr, "balanced shards");
  // Unequal shards: most of shard 0 removed, shard 1 emptied.
  auto by = ids_by_shard(st.many, ids);
  std::vector<uint64_t> gone(by[0].begin(), by[0].begin() + by[0].size() * 3 / 4);
  gone.insert(gone.end(), by[1].begin(), by[1].end());
  st.remove(gone);
  mnemo_store_statistics stats;
  stats.struct_size = sizeof stats;
  ASSERT_OK(mnemo_store_stats(st.many, &stats));
  EXPECT_EQ(stats.shard_vectors[1], 0u);
  expect_same(st.one, st.many, q, c.nq, c.k, nullptr, "unequal shards, one empty");
  // Bias and an id filter.
  std::vector<uint64_t> live;
  for (uint64_t id : ids)
    if (std::find(gone.begin(), gone.end(), id) == gone.end()) live.push_back(id);
  Buf<uint64_t> bid(live.size() / 2);
  Buf<float> b(live.size() / 2);
  for (size_t i = 0; i < bid.size(); ++i) bid[i] = live[2 * i], b[i] = mt::rand_nonzero(rng) * 0.3f;
  ASSERT_OK(mnemo_store_set_bias(st.one, bid.data(), b.data(), bid.size()));
  ASSERT_OK(mnemo_store_set_bias(st.many, bid.data(), b.data(), bid.size()));
  mnemo_search_options o = mnemo_search_options_default();
  o.apply_bias = 1;
  expect_same(st.one, st.many, q, c.nq, c.k, &o, "bias");
  o.filter_kind = MNEMO_FILTER_IDS;
  o.filter_ids = bid.data();
  o.filter_count = bid.size();
  expect_same(st.one, st.many, q, c.nq, c.k, &o, "bias and id filter");
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  const Case& c = i.param;
  return mt::case_name(c.dtype, c.metric, c.dim) + "_n" + std::to_string(c.n) + "_q" + std::to_string(c.nq) + "_k" +
         std::to_string(c.k) + (c.precision == MNEMO_PRECISION_FAST ? "_fast" : "_exact") +
         (c.workspace ? "_smallws" : "");
}

const Case kCases[] = {
    {MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, MNEMO_PRECISION_EXACT, 20011, 768, 1, 10, 0},
    {MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, MNEMO_PRECISION_EXACT, 20011, 129, 3, 100, 0},
    {MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ, MNEMO_PRECISION_EXACT, 30001, 96, 200, 10, 0},
    {MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, MNEMO_PRECISION_EXACT, 30001, 768, 300, 16, 0},
    {MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, MNEMO_PRECISION_FAST, 30001, 768, 300, 16, 0},
    {MNEMO_DTYPE_F16, MNEMO_METRIC_COSINE, MNEMO_PRECISION_FAST, 30001, 384, 257, 10, 0},
    {MNEMO_DTYPE_BF16, MNEMO_METRIC_L2SQ, MNEMO_PRECISION_EXACT, 10007, 65, 64, 10, 0},
    {MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, MNEMO_PRECISION_EXACT, 9001, 127, 40, 3000, 0},
    {MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, MNEMO_PRECISION_FAST, 50021, 256, 500, 10, 8u << 20},
    // Cosine batches over short rows (the short-row kernel takes unit-length
    // queries): 16-bit rows with two query tiles, f32 rows.
    {MNEMO_DTYPE_F16, MNEMO_METRIC_COSINE, MNEMO_PRECISION_FAST, 30011, 128, 300, 10, 0},
    {MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, MNEMO_PRECISION_FAST, 20011, 128, 150, 10, 0},
    // Shards smaller than k: the whole store selects over every key, a
    // shard takes the fused scan.
    {MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, MNEMO_PRECISION_EXACT, 1001, 200, 2, 300, 0},
    // The whole store is past the workspace for the GEMM path (exact keys of
    // every slot), its shards are not.
    {MNEMO_DTYPE_F16, MNEMO_METRIC_DOT, MNEMO_PRECISION_EXACT, 150001, 64, 20, 300, 8u << 20},
};

INSTANTIATE_TEST_SUITE_P(Cases, GpuShards, ::testing::ValuesIn(kCases), case_name);

TEST(GpuShardsConcurrent, SearchesWhileWritesLand) {
  REQUIRE_GPUS(MNEMO_PRECISION_EXACT, 0);
  auto rng = mt::rng_for_test();
  const uint64_t dim = 256, k = 10, nq = 64;
  auto s1 = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, one.get());
  auto sn = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, many.get());
  Stores st{s1.get(), sn.get()};
  const size_t n = 40000;
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = 7 * i + 3;
  Buf<float> v = random_rows(rng, n, dim);
  st.add(std::vector<uint64_t>(ids.begin(), ids.begin() + 10000), v.data());
  Buf<float> q = random_rows(rng, nq, dim);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&] {
      Buf<uint64_t> ri(nq * k);
      Buf<float> rs(nq * k);
      while (!done.load()) {
        if (mnemo_store_search(st.many, q.data(), nq, k, nullptr, ri.data(), rs.data()) != MNEMO_OK) ++bad;
        for (uint64_t r = 0; r < nq; ++r)
          for (uint64_t j = 1; j < k; ++j)
            if (rs[r * k + j] > rs[r * k + j - 1]) ++bad;
      }
    });
  for (size_t i = 10000; i < n; i += 5000) {
    st.add(std::vector<uint64_t>(ids.begin() + i, ids.begin() + i + 5000), &v[i * dim]);
    st.remove(std::vector<uint64_t>(ids.begin() + i - 4000, ids.begin() + i - 3000));
  }
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  expect_same(st.one, st.many, q, nq, k, nullptr, "after concurrent writes");
}

#ifdef MNEMO_TEST_HAVE_CUDART

// A store on one GPU and one over all of them holding the same n random
// rows, ids a * i + b.
struct Filled {
  mt::StorePtr s1, sn;
  std::vector<uint64_t> ids;
  Stores st() const { return {s1.get(), sn.get()}; }
};

void fill(Filled* f, mnemo_runtime* one, mnemo_runtime* many, std::mt19937_64& rng, uint64_t n, uint64_t dim,
          int32_t dtype, int32_t metric, uint64_t a, uint64_t b) {
  f->s1 = mt::make_store(dim, dtype, metric, one);
  f->sn = mt::make_store(dim, dtype, metric, many);
  f->ids.resize(n);
  for (uint64_t i = 0; i < n; ++i) f->ids[i] = a * i + b;
  Buf<float> v = random_rows(rng, n, dim);
  f->st().add(f->ids, v.data());
}

// Bad input to a device-pointer search of a sharded store: a non-finite
// query checked inside the search (its row padding, the status saying so,
// the other rows standing) or before it (refused, nothing written); buffers
// of another device or of pageable memory refused, nothing written.
TEST(GpuShardsDevice, BadQueriesAndBuffers) {
  REQUIRE_GPUS(MNEMO_PRECISION_EXACT, 0);
  auto rng = mt::rng_for_test();
  const uint64_t n = 3001, dim = 40, nq = 3, k = 9;
  Filled f;
  fill(&f, one.get(), many.get(), rng, n, dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, 5, 1);
  const Stores st = f.st();
  Buf<float> q = random_rows(rng, nq, dim);
  Buf<uint64_t> hi(nq * k);
  Buf<float> hs(nq * k);
  ASSERT_OK(mnemo_store_search(st.one, q.data(), nq, k, nullptr, hi.data(), hs.data()));
  cudaSetDevice(0);
  mt::DevBuf status(16);
  const std::vector<unsigned char> status_poison(16, 0x5A);
  mnemo_search_options o = mnemo_search_options_default();
  o.check_on_device = 1;
  o.device_status = status.as<int32_t>();
  std::vector<uint64_t> di;
  std::vector<float> ds;
  int32_t verdict = -1;
  // Finite queries: OK and the one-device results.
  cudaMemcpy(status.get(), status_poison.data(), 16, cudaMemcpyHostToDevice);
  ASSERT_OK(device_search(st.many, q.data(), nq, dim, k, &o, &di, &ds));
  cudaMemcpy(&verdict, status.get(), 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(verdict, MNEMO_OK);
  EXPECT_EQ(0, std::memcmp(di.data(), hi.data(), nq * k * 8));
  EXPECT_EQ(0, std::memcmp(ds.data(), hs.data(), nq * k * 4));
  // Query 1 holds a NaN.
  q[dim + 7] = std::nanf("");
  cudaMemcpy(status.get(), status_poison.data(), 16, cudaMemcpyHostToDevice);
  ASSERT_OK(device_search(st.many, q.data(), nq, dim, k, &o, &di, &ds));
  cudaMemcpy(&verdict, status.get(), 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(verdict, MNEMO_E_NON_FINITE);
  for (uint64_t j = 0; j < k; ++j) {
    EXPECT_EQ(di[k + j], MNEMO_NO_ID) << "place " << j;
    EXPECT_TRUE(std::isnan(ds[k + j])) << "place " << j;
  }
  for (const uint64_t row : {uint64_t{0}, uint64_t{2}}) {
    EXPECT_EQ(0, std::memcmp(&di[row * k], &hi[row * k], k * 8)) << "row " << row;
    EXPECT_EQ(0, std::memcmp(&ds[row * k], &hs[row * k], k * 4)) << "row " << row;
  }
  // Checked before the search: refused, the poisoned results unchanged.
  EXPECT_TRUE(mt::failed_with(device_search(st.many, q.data(), nq, dim, k, nullptr, &di, &ds), MNEMO_E_NON_FINITE));
  for (uint64_t i = 0; i < nq * k; ++i) ASSERT_EQ(di[i], 0xABABABABABABABABull) << i;
  // Buffers the first device cannot use.
  q[dim + 7] = 0.5f;
  const std::vector<unsigned char> poison(nq * k * 8, 0xAB);
  mt::DevBuf dq(q.data(), nq * dim * 4), dsc(poison.data(), nq * k * 4);
  cudaSetDevice(1);
  mt::DevBuf elsewhere(poison.data(), nq * k * 8);
  cudaSetDevice(0);
  EXPECT_TRUE(mt::failed_with(mnemo_store_search_device(st.many, dq.as<float>(), nq, k, nullptr,
                                                        elsewhere.as<uint64_t>(), dsc.as<float>(), nullptr),
                              MNEMO_E_INVALID_ARGUMENT));
  EXPECT_NE(std::string(mnemo_last_error()).find("ids"), std::string::npos) << mnemo_last_error();
  EXPECT_EQ(elsewhere.bytes(), poison);
  EXPECT_EQ(dsc.bytes(), std::vector<unsigned char>(nq * k * 4, 0xAB));
  const auto before_ids = hi.snapshot();
  const auto before_scores = hs.snapshot();
  EXPECT_TRUE(
      mt::failed_with(mnemo_store_search_device(st.many, q.data(), nq, k, nullptr, hi.data(), hs.data(), nullptr),
                      MNEMO_E_INVALID_ARGUMENT));
  EXPECT_TRUE(hi.same_as(before_ids));
  EXPECT_TRUE(hs.same_as(before_scores));
}

// Activation (plain and min-max normalised, which takes two passes over
// the shards) and touch through host and device buffers: the one-device
// results, and with touch the same times afterwards.
TEST(GpuShardsDevice, ActivationAndTouch) {
  REQUIRE_GPUS(MNEMO_PRECISION_EXACT, 0);
  auto rng = mt::rng_for_test();
  const uint64_t n = 5003, dim = 48, k = 12;
  const double now = 1.0e9;
  // 4 queries: each shard's own host search; 20: host buffers gathered too.
  for (const auto& [metric, nq] : {std::pair<int32_t, uint64_t>{MNEMO_METRIC_DOT, 4}, {MNEMO_METRIC_L2SQ, 20}}) {
    Filled f;
    fill(&f, one.get(), many.get(), rng, n, dim, MNEMO_DTYPE_F32, metric, 11, 4);
    const Stores st = f.st();
    const std::vector<uint64_t>& ids = f.ids;
    Buf<double> t(n);
    Buf<float> imp(n);
    for (uint64_t i = 0; i < n; ++i) {
      t[i] = now - static_cast<double>(rng() % 200000);
      imp[i] = static_cast<float>(rng() % 1000) / 1000.0f;
    }
    for (mnemo_store* s : {st.one, st.many}) {
      ASSERT_OK(mnemo_store_set_times(s, ids.data(), t.data(), n));
      ASSERT_OK(mnemo_store_set_importance(s, ids.data(), imp.data(), n));
    }
    Buf<float> q = random_rows(rng, nq, dim);
    mnemo_search_options o = mnemo_search_options_default();
    o.activation = 1;
    o.w_relevance = 0.6f;
    o.w_recency = 0.3f;
    o.w_importance = 0.2f;
    o.half_life = 3600.0;
    o.now = now;
    for (const uint32_t normalize : {0u, 1u}) {
      o.normalize = normalize;
      expect_same(st.one, st.many, q, nq, k, &o, normalize ? "normalized activation" : "activation");
    }
    o.touch = 1;
    o.now = now + 50.0;
    Buf<uint64_t> hi(nq * k);
    Buf<float> hs(nq * k);
    ASSERT_OK(mnemo_store_search(st.one, q.data(), nq, k, &o, hi.data(), hs.data()));
    std::vector<uint64_t> di;
    std::vector<float> ds;
    ASSERT_OK(device_search(st.many, q.data(), nq, dim, k, &o, &di, &ds));
    EXPECT_EQ(0, std::memcmp(di.data(), hi.data(), nq * k * 8));
    EXPECT_EQ(0, std::memcmp(ds.data(), hs.data(), nq * k * 4));
    Buf<double> t1(n), tn(n);
    ASSERT_OK(mnemo_store_get_meta(st.one, ids.data(), n, t1.data(), nullptr, nullptr));
    ASSERT_OK(mnemo_store_get_meta(st.many, ids.data(), n, tn.data(), nullptr, nullptr));
    EXPECT_EQ(0, std::memcmp(t1.data(), tn.data(), n * 8));
    uint64_t touched = 0;
    for (uint64_t i = 0; i < n; ++i) touched += tn[i] == o.now;
    EXPECT_GT(touched, 0u);
  }
}

// Several host threads, each with its own stream and buffers, searching the
// sharded store through device buffers at once (the gathers' streams and
// buffers are leased per call): every answer the one-device one.
TEST(GpuShardsDevice, ConcurrentCallers) {
  REQUIRE_GPUS(MNEMO_PRECISION_EXACT, 0);
  auto rng = mt::rng_for_test();
  const uint64_t n = 20000, dim = 128, k = 10;
  Filled f;
  fill(&f, one.get(), many.get(), rng, n, dim, MNEMO_DTYPE_F16, MNEMO_METRIC_COSINE, 3, 2);
  const Stores st = f.st();
  const uint64_t sizes[] = {1, 5, 40};
  std::vector<Buf<float>> qs;
  std::vector<Buf<uint64_t>> want_ids;
  std::vector<Buf<float>> want_scores;
  for (const uint64_t nq : sizes) {
    qs.push_back(random_rows(rng, nq, dim));
    want_ids.emplace_back(nq * k);
    want_scores.emplace_back(nq * k);
    ASSERT_OK(mnemo_store_search(st.one, qs.back().data(), nq, k, nullptr, want_ids.back().data(),
                                 want_scores.back().data()));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int round = 0; round < 12; ++round) {
        const size_t c = static_cast<size_t>(t + round) % 3;
        const uint64_t nq = sizes[c];
        std::vector<uint64_t> di;
        std::vector<float> ds;
        if (device_search(st.many, qs[c].data(), nq, dim, k, nullptr, &di, &ds) != MNEMO_OK) ++bad;
        if (std::memcmp(di.data(), want_ids[c].data(), nq * k * 8) != 0 ||
            std::memcmp(ds.data(), want_scores[c].data(), nq * k * 4) != 0)
          ++bad;
      }
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(bad.load(), 0);
}

#endif  // MNEMO_TEST_HAVE_CUDART

TEST(GpuShardsRuntime, DeviceListAndErrors) {
  std::string why;
  auto one = gpu_runtime(MNEMO_PRECISION_EXACT, 0, 0, &why);
  if (!one) GTEST_SKIP() << "no CUDA backend: " << why;
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CUDA;
  Buf<int32_t> dev(2);
  dev[0] = 0;
  dev[1] = 4096;  // no machine has this device
  o.device_count = 2;
  o.device_ids = dev.data();
  mnemo_runtime* rt = nullptr;
  EXPECT_TRUE(mt::failed_with(mnemo_runtime_create(&o, &rt), MNEMO_E_OUT_OF_RANGE));
  EXPECT_EQ(rt, nullptr);
  // A list of one device is an unsharded runtime.
  o.device_count = 1;
  ASSERT_OK(mnemo_runtime_create(&o, &rt));
  mt::RuntimePtr p(rt);
  mnemo_runtime_report rep;
  rep.struct_size = sizeof rep;
  ASSERT_OK(mnemo_runtime_info(rt, &rep));
  EXPECT_EQ(rep.shards, 1u);
  EXPECT_EQ(rep.device_count, 1u);
  EXPECT_EQ(rep.devices[0], 0);
}

}  // namespace
