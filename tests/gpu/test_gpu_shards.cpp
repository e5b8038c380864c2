// A store sharded over every visible GPU against the same memories on one
// GPU: every search path (scan, GEMM tiles, radix selection for large k,
// FAST), unequal shards, a shard emptied by removes, filters, bias, and
// searches running while writes land. Results must agree bit for bit.
// Skips, saying why, with fewer than two usable GPUs.
#include <atomic>
#include <set>
#include <thread>

#include "../support.h"

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

TEST(GpuShardsRuntime, DeviceSearchOfAShardedStoreIsRefused) {
  REQUIRE_GPUS(MNEMO_PRECISION_EXACT, 0);
  auto s = mt::make_store(8, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, many.get());
  Buf<uint64_t> ids(4);
  Buf<float> v(4 * 8);
  for (int i = 0; i < 4; ++i) ids[i] = 10 + i;
  for (int i = 0; i < 32; ++i) v[i] = 0.25f * static_cast<float>(i % 7) + 0.1f;
  ASSERT_OK(mnemo_store_add(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 4));
  // Host buffers are enough to reach the check: the store refuses first.
  Buf<uint64_t> oi(2);
  Buf<float> os(2);
  const auto before = oi.snapshot();
  EXPECT_TRUE(mt::failed_with(
      mnemo_store_search_device(s.get(), v.data(), 1, 2, nullptr, oi.data(), os.data(), nullptr), MNEMO_E_UNSUPPORTED));
  EXPECT_TRUE(oi.same_as(before));
}

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
