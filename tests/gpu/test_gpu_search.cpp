// The CUDA backend against the float64 reference and against the CPU
// backend on identical inputs: every search path (fused scan, GEMM tiles,
// radix selection for large k, FAST re-scoring), filters, bias, updates of
// the resident store, ties, workspace tiling and concurrent searches.
// Skips, saying why, where no CUDA backend can be created.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <set>
#include <thread>

#include "../store_model.h"
#include "../topk_check.h"

namespace {

using mt::Matrix;
using mt::Results;
using mt::StoreModel;

// A CUDA runtime, or a skip with the reason.
mt::RuntimePtr cuda_runtime(int32_t precision, uint64_t workspace = 0, std::string* why = nullptr) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CUDA;
  o.precision = precision;
  o.workspace_bytes = workspace;
  mnemo_runtime* rt = nullptr;
  const mnemo_status s = mnemo_runtime_create(&o, &rt);
  if (s != MNEMO_OK && why) *why = mnemo_last_error();
  return mt::RuntimePtr(s == MNEMO_OK ? rt : nullptr);
}

mt::RuntimePtr cpu_runtime() {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CPU;
  return mt::make_runtime(o);
}

#define REQUIRE_CUDA(rt)                                   \
  std::string why_;                                        \
  auto rt = cuda_runtime(MNEMO_PRECISION_EXACT, 0, &why_); \
  if (!rt) GTEST_SKIP() << "no CUDA backend on this machine: " << why_

struct Case {
  size_t n, dim, nq, k;
  int32_t dtype, metric, precision;
  uint64_t workspace;
};

std::string name_of(const Case& c) {
  return mt::case_name(c.dtype, c.metric, c.dim) + "_n" + std::to_string(c.n) + "_q" + std::to_string(c.nq) + "_k" +
         std::to_string(c.k) + (c.precision == MNEMO_PRECISION_FAST ? "_fast" : "_exact") +
         (c.workspace ? "_ws" + std::to_string(c.workspace >> 20) : "");
}

// Builds the same store on the CPU and the GPU: add, upsert a tenth, remove a
// tenth (below the compaction threshold), bias a tenth; then searches plain,
// with an id filter, with a slot bitmap and with bias, checking the GPU
// against the reference and against the CPU.
void run_case(const Case& c) {
  std::string why;
  auto gpu = cuda_runtime(c.precision, c.workspace, &why);
  if (!gpu) GTEST_SKIP() << "no CUDA backend on this machine: " << why;
  auto cpu = cpu_runtime();
  auto rng = mt::rng_for_test();
  const bool unit = c.metric == MNEMO_METRIC_DOT;
  auto sg = mt::make_store(c.dim, c.dtype, c.metric, gpu.get());
  auto sc = mt::make_store(c.dim, c.dtype, c.metric, cpu.get());
  ASSERT_TRUE(sg && sc);
  StoreModel model(c.dim, c.dtype, c.metric);
  const auto ids = mt::distinct_ids(rng, c.n);
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, c.n, c.dim, unit);
  for (auto* s : {sg.get(), sc.get()}) ASSERT_OK(mt::store_add(s, ids, m));
  model.add(ids, m);
  std::vector<uint64_t> up, gone, biased;
  for (size_t i = 0; i < c.n / 10; ++i) up.push_back(ids[mt::rand_below(rng, c.n)]);
  const Matrix mu = mt::random_matrix(rng, MNEMO_DTYPE_F32, up.size(), c.dim, unit);
  for (auto* s : {sg.get(), sc.get()}) ASSERT_OK(mt::store_add(s, up, mu));
  model.add(up, mu);
  for (size_t i = 0; i < c.n / 10; ++i) gone.push_back(ids[mt::rand_below(rng, c.n)]);
  uint64_t removed = 0;
  for (auto* s : {sg.get(), sc.get()}) ASSERT_OK(mt::store_remove(s, gone, &removed));
  model.remove(gone);
  std::vector<float> bias;
  for (const uint64_t id : model.ids())
    if (mt::rand_below(rng, 10) == 0) biased.push_back(id), bias.push_back(0.3f * mt::rand_nonzero(rng));
  for (auto* s : {sg.get(), sc.get()}) ASSERT_OK(mt::store_set_bias(s, biased, bias));
  for (size_t i = 0; i < biased.size(); ++i) model.set_bias(biased[i], bias[i]);

  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, c.nq, c.dim, unit);
  // Plain and biased.
  for (const bool apply_bias : {false, true}) {
    mnemo_search_options o = mnemo_search_options_default();
    o.apply_bias = apply_bias;
    Results rg, rc;
    ASSERT_OK(mt::store_search(sg.get(), q, c.k, &o, &rg));
    ASSERT_OK(mt::store_search(sc.get(), q, c.k, &o, &rc));
    mt::expect_results(model, q, rg, apply_bias);
    mt::expect_results(model, q, rc, apply_bias);
  }
  // An id filter over about a third of the live ids.
  std::vector<uint64_t> allow_ids;
  std::set<uint64_t> allow;
  for (const uint64_t id : model.ids())
    if (mt::rand_below(rng, 3) == 0) allow_ids.push_back(id), allow.insert(id);
  mt::Buf<uint64_t> fids(std::max<size_t>(allow_ids.size(), 1));
  std::copy(allow_ids.begin(), allow_ids.end(), fids.data());
  mnemo_search_options o = mnemo_search_options_default();
  o.filter_kind = MNEMO_FILTER_IDS;
  o.filter_ids = fids.data();
  o.filter_count = allow_ids.size();
  Results rf;
  ASSERT_OK(mt::store_search(sg.get(), q, c.k, &o, &rf));
  mt::expect_results(model, q, rf, false, &allow);
  // The same set as a slot bitmap.
  uint64_t slots = 0;
  ASSERT_OK(mnemo_store_slot_count(sg.get(), &slots));
  mt::Buf<uint64_t> bm((slots + 63) / 64 + 1, 0);
  for (const uint64_t id : allow_ids) {
    uint64_t slot = 0;
    ASSERT_OK(mnemo_store_slot_of(sg.get(), id, &slot));
    bm[slot / 64] |= uint64_t{1} << (slot % 64);
  }
  o.filter_kind = MNEMO_FILTER_SLOT_BITMAP;
  o.filter_ids = nullptr;
  o.filter_bitmap = bm.data();
  o.filter_count = slots;
  Results rb;
  ASSERT_OK(mt::store_search(sg.get(), q, c.k, &o, &rb));
  mt::expect_results(model, q, rb, false, &allow);
}

// Readable parameter in ctest's listing (the struct has padding bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << name_of(c); }

class GpuSearch : public ::testing::TestWithParam<Case> {};
TEST_P(GpuSearch, MatchesReferenceAndCpu) { run_case(GetParam()); }

const int32_t kF32 = MNEMO_DTYPE_F32, kF16 = MNEMO_DTYPE_F16, kBF16 = MNEMO_DTYPE_BF16;
const int32_t kCos = MNEMO_METRIC_COSINE, kDot = MNEMO_METRIC_DOT, kL2 = MNEMO_METRIC_L2SQ;
const int32_t kExact = MNEMO_PRECISION_EXACT, kFast = MNEMO_PRECISION_FAST;

std::vector<Case> cases() {
  std::vector<Case> v;
  for (int32_t dt : {kF32, kF16, kBF16})
    for (int32_t me : {kCos, kDot, kL2}) {
      // Fused scan: specialised and generic dimensions, 1..6 queries, k up to 256.
      v.push_back({5000, 768, 1, 10, dt, me, kExact, 0});
      v.push_back({5000, 384, 3, 1, dt, me, kExact, 0});
      v.push_back({4000, 127, 6, 256, dt, me, kExact, 0});
      v.push_back({31, 5, 2, 31, dt, me, kExact, 0});
      v.push_back({20, 3, 1, 25, dt, me, kExact, 0});
      // Scan keys + radix selection (k > 256).
      v.push_back({3000, 1536, 2, 1000, dt, me, kExact, 0});
      // GEMM path, small and large lists, EXACT and FAST.
      v.push_back({6000, 64, 16, 10, dt, me, kExact, 0});
      v.push_back({6000, 100, 40, 100, dt, me, kFast, 0});
      v.push_back({6000, 96, 17, 300, dt, me, kExact, 0});
      v.push_back({6000, 96, 17, 300, dt, me, kFast, 0});
      // FAST batches with short lists (the GEMM with the selection in its
      // epilogue): a partial second query tile, rows not a multiple of the
      // tile, ld past dim; k = N below a warp (the filter keeps fewer than k).
      v.push_back({6001, 100, 70, 10, dt, me, kFast, 0});
      v.push_back({20, 5, 16, 20, dt, me, kFast, 0});
    }
  // The longest fused lists (k = 16, 32 candidates), many chunks per query
  // tile, and 16-byte pieces of K past the last full stage (dim 200).
  v.push_back({30011, 200, 130, 16, kF16, kCos, kFast, 0});
  v.push_back({30011, 120, 130, 16, kF16, kL2, kFast, 0});
  v.push_back({30011, 64, 33, 1, kBF16, kL2, kFast, 0});
  v.push_back({12345, 768, 16, 16, kF32, kDot, kFast, 0});
  // Tiles: a small workspace forces several slot tiles and query chunks.
  v.push_back({100000, 16, 200, 10, kF32, kCos, kFast, 64ull << 20});
  v.push_back({100000, 16, 200, 10, kF16, kL2, kExact, 64ull << 20});
  // k = 4096 (beyond what FAISS GPU supports) on the GEMM path.
  v.push_back({50000, 128, 17, 4096, kF16, kCos, kFast, 0});
  // k > 256 over more rows than the prefilter's compact lists hold (the
  // multi-block histogram prefilter before the exact radix selection).
  v.push_back({30011, 96, 1, 1000, kF32, kCos, kExact, 0});
  v.push_back({30011, 96, 3, 2000, kBF16, kL2, kExact, 0});
  // Single queries on the scan fed by bulk copies (16-bit rows; f32 rows
  // take the register-fed scan): N below a warp, N not a
  // multiple of the two-row unit, k = N past the register lists, the
  // longest register list, shared-memory lists up to 256, every row length
  // it is built for.
  for (int32_t dt : {kF32, kF16, kBF16}) {
    v.push_back({7, 384, 1, 5, dt, kCos, kExact, 0});
    v.push_back({1001, 512, 1, 32, dt, kL2, kExact, 0});
    v.push_back({40, 1024, 1, 40, dt, kDot, kExact, 0});
    v.push_back({3001, 1536, 1, 7, dt, kCos, kExact, 0});
    v.push_back({2999, 768, 1, 256, dt, kL2, kExact, 0});
  }
  // FAST batches over short rows (queries in registers, sm_90 and later):
  // f32 rows of 512 bytes in 64-row tiles with a partial second query tile,
  // a 16-bit query tile holding one query, a warp with fewer than its 32
  // queries over 80-byte rows, and k = N = 30 (the filter keeps fewer).
  v.push_back({12007, 128, 150, 10, kF32, kCos, kFast, 0});
  v.push_back({6007, 128, 257, 16, kBF16, kDot, kFast, 0});
  v.push_back({9001, 40, 23, 5, kF16, kL2, kFast, 0});
  v.push_back({30, 24, 16, 30, kF32, kDot, kFast, 0});
  // Cosine over 16-bit short rows (the queries go in divided by their
  // norms): two query tiles, the second partial; a third of a warp's queries
  // over 128-byte rows.
  v.push_back({8009, 128, 300, 10, kF16, kCos, kFast, 0});
  v.push_back({3001, 64, 11, 7, kBF16, kCos, kFast, 0});
  // FAST batches over longer rows (queries streamed with the rows, sm_90
  // and later): the 768-dim batch shape with a partial query tile and N not
  // a multiple of the 128-row tile; N below a warp with k = N (the filter
  // keeps fewer); two query tiles, the second holding one query, over rows
  // whose last 128-byte slab is partial; f32 rows one partial slab past the
  // short-row limit; three query tiles.
  v.push_back({20011, 768, 100, 10, kF32, kCos, kFast, 0});
  v.push_back({7, 300, 16, 7, kBF16, kL2, kFast, 0});
  v.push_back({5003, 1000, 113, 16, kF16, kDot, kFast, 0});
  v.push_back({3001, 136, 40, 10, kF32, kL2, kFast, 0});
  v.push_back({9000, 384, 250, 5, kBF16, kCos, kFast, 0});
  // EXACT batches over longer f32 rows (the same kernel with split-TF32
  // keys): the 768-dim batch shape, partial last slab, N below a warp.
  v.push_back({20011, 768, 100, 10, kF32, kCos, kExact, 0});
  v.push_back({3001, 136, 40, 10, kF32, kL2, kExact, 0});
  v.push_back({7, 300, 16, 7, kF32, kDot, kExact, 0});
  // Longer lists over long rows (the long-row kernel writing candidates
  // for an exact selection, sm_90 and later): N not a multiple of the tile
  // with every row within the candidate room, FAST and EXACT; two query
  // tiles over a partial last slab; k = N = 50 (the filter keeps fewer);
  // a store past the room of 16384 candidates, its bound sampled.
  v.push_back({20011, 768, 40, 300, kF32, kCos, kFast, 0});
  v.push_back({20011, 768, 40, 300, kF32, kL2, kExact, 0});
  v.push_back({5003, 1000, 113, 100, kF16, kDot, kFast, 0});
  v.push_back({50, 300, 16, 50, kBF16, kL2, kFast, 0});
  v.push_back({100003, 136, 17, 40, kF32, kCos, kFast, 0});
  // One large store on the specialised 768 scan.
  v.push_back({100003, 768, 2, 10, kF16, kCos, kExact, 0});
  // The bulk-copy scan's warps taking chunks of 32 rows from a counter
  // over many blocks: N odd (a partial last unit) and not a multiple of
  // the chunk.
  v.push_back({70001, 768, 1, 20, kBF16, kCos, kExact, 0});
  // The same over units of four rows (16-bit rows of 384 and 512): N not
  // a multiple of the unit, the register lists and the shared-memory list
  // from a sampled bound.
  v.push_back({70003, 384, 1, 20, kF16, kCos, kExact, 0});
  v.push_back({90002, 384, 1, 100, kBF16, kL2, kExact, 0});
  v.push_back({50001, 512, 1, 10, kF16, kDot, kExact, 0});
  // Exact keys of every row for k > 256 at the widths whose trip counts
  // are compiled in: one query (f16, 768), three queries in a pass of four
  // (f32, 1536), k = N past what the filter keeps (bf16, 512).
  v.push_back({5003, 768, 1, 300, kF16, kCos, kExact, 0});
  v.push_back({4099, 1536, 3, 400, kF32, kL2, kExact, 0});
  v.push_back({300, 512, 1, 300, kBF16, kDot, kExact, 0});
  // The same at the widths read four rows a step (16-bit rows of 384 and
  // 512): three queries in a pass of four, and one query, N not a multiple
  // of the rows a step.
  v.push_back({5003, 384, 3, 300, kF16, kCos, kExact, 0});
  v.push_back({4099, 512, 2, 400, kBF16, kL2, kExact, 0});
  v.push_back({3001, 384, 1, 1000, kBF16, kDot, kExact, 0});
  // Every row width from one element to 4096 on the single-query scans:
  // below 32 16-byte vectors several rows a warp (4, 8 or 16 lanes a row,
  // one to four queries a pass), k across the register lists (1, 31, 32),
  // the shared-memory lists from a sampled bound (33, 100; stores of 512
  // rows a list entry and more are sampled), the radix selection (1000,
  // 1024, 2048), in every dtype and metric.
  const size_t widths[] = {1, 3, 17, 33, 64, 100, 1000, 4096};
  const size_t ks[] = {1, 31, 32, 33, 100, 1000, 1024, 2048};
  const int32_t dts[] = {kF32, kF16, kBF16}, mes[] = {kCos, kDot, kL2};
  const size_t nqs[] = {1, 2, 5};
  size_t turn = 0;
  for (size_t w = 0; w < 8; ++w)
    for (size_t j = 0; j < 9; ++j, ++turn) {
      const size_t dim = widths[w], k = ks[(w + j) % 8];
      // Long lists need 512 * k rows to be sampled: short rows get them.
      const size_t n = dim <= 100 ? (k <= 100 ? 60013 : 9001) : dim == 1000 ? (k <= 33 ? 17011 : 3001) : 1501;
      v.push_back({n, dim, nqs[turn % 3], k, dts[j / 3], mes[j % 3], kExact, 0});
    }
  // Samples of more than 4096 keys (one row in 128 of over 524,288 rows):
  // the sampled bound's selection holding 16 keys a thread (the
  // tensor-core scan, f32 and bf16 rows).
  v.push_back({600011, 3, 1, 100, kF32, kCos, kExact, 0});
  v.push_back({530017, 17, 1, 33, kBF16, kDot, kExact, 0});
  // Passes of several queries sample more, up to what the selection
  // holds: past 16,384 keys a query (over 2.1M rows) the selection reads
  // them from shared memory.
  v.push_back({3000017, 8, 3, 100, kF16, kCos, kExact, 0});
  v.push_back({2500009, 4, 2, 120, kF32, kL2, kExact, 0});
  // k past the store on the short-row scan and the radix selection.
  v.push_back({500, 64, 1, 1024, kF16, kCos, kExact, 0});
  v.push_back({700, 17, 2, 2048, kF32, kL2, kExact, 0});
  v.push_back({40, 3, 3, 100, kBF16, kDot, kExact, 0});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Paths, GpuSearch, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& p) { return name_of(p.param); });

// Exact duplicates: equal scores rank by the smaller id on every path.
TEST(GpuSearchTies, DuplicatesRankBySmallerId) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  for (const int32_t precision : {kExact, kFast}) {
    // dim 64: the short-row kernel (FAST); dim 300: the long-row kernel (FAST and EXACT);
    // dim 768: the scan with its trip counts compiled in (one to three queries).
    // 300 duplicates: the scan's last block ranks its survivors (at most
    // 512); 600: more survive the bound than that, and it merges lists.
    for (const size_t dim : {size_t{64}, size_t{300}, size_t{768}})
      for (const size_t dups : {size_t{300}, size_t{600}}) {
        auto rt = cuda_runtime(precision);
        const size_t others = 3000;
        auto s = mt::make_store(dim, kF32, kCos, rt.get());
        ASSERT_TRUE(s);
        StoreModel model(dim, kF32, kCos);
        const Matrix base = mt::random_matrix(rng, kF32, 1, dim, true);
        Matrix all(kF32, dups + others, dim);
        const Matrix rest = mt::random_matrix(rng, kF32, others, dim, true);
        for (size_t i = 0; i < dups; ++i) all.copy_row(i, base, 0);
        for (size_t i = 0; i < others; ++i) all.copy_row(dups + i, rest, i);
        auto ids = mt::distinct_ids(rng, dups + others);
        ASSERT_OK(mt::store_add(s.get(), ids, all));
        model.add(ids, all);
        // k = 32 fills a register list, k = 100 a shared-memory list (its
        // block lists ranked by search; 600 duplicates leave more than 512
        // survivors to the last block, which then merges lists); 3 queries
        // share one scan.
        for (const size_t k : {size_t{10}, size_t{32}, size_t{100}, size_t{300}}) {
          for (const size_t nq : {size_t{1}, size_t{3}, size_t{20}}) {  // scan and GEMM paths
            Matrix qq(kF32, nq, dim);
            for (size_t i = 0; i < nq; ++i) qq.copy_row(i, base, 0);
            Results r;
            ASSERT_OK(mt::store_search(s.get(), qq, k, nullptr, &r));
            std::vector<uint64_t> sorted(ids.begin(), ids.begin() + dups);
            std::sort(sorted.begin(), sorted.end());
            for (size_t i = 0; i < nq; ++i)
              for (size_t j = 0; j < k; ++j)
                ASSERT_EQ(r.row_ids(i)[j], sorted[j])
                    << "dim " << dim << " duplicates " << dups << " query " << i << " rank " << j;
          }
        }
      }
  }
}

// Single queries from a sampled bound (k = 100 over 60000 rows): with
// 3000 copies of the query's own row the bound is the copies' key, every
// sampled key at the top ties with it, and the rows at the bound are still
// offered: the answer is the 100 smallest ids of the copies, on short rows
// (several a warp) and on rows of a warp, 16-bit rows on the bulk-copy scan.
TEST(GpuSearchTies, RowsAtTheSampledBoundRankBySmallerId) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  const size_t n = 60013, dups = 3000, k = 100;
  for (const size_t dim : {size_t{24}, size_t{64}, size_t{384}})
    for (const int32_t dt : {kF32, kF16}) {
      const Matrix base = mt::random_matrix(rng, kF32, 1, dim, true);
      Matrix all = mt::random_matrix(rng, kF32, n, dim, true);
      // The copies spread over the store, so the sample meets them.
      std::vector<size_t> at;
      for (size_t i = 0; i < dups; ++i) at.push_back(i * (n / dups)), all.copy_row(at.back(), base, 0);
      const auto ids = mt::distinct_ids(rng, n);
      std::vector<uint64_t> sorted;
      for (const size_t i : at) sorted.push_back(ids[i]);
      std::sort(sorted.begin(), sorted.end());
      auto s = mt::make_store(dim, dt, kCos, gpu.get());
      ASSERT_TRUE(s);
      ASSERT_OK(mt::store_add(s.get(), ids, all));
      Results r;
      ASSERT_OK(mt::store_search(s.get(), base, k, nullptr, &r));
      for (size_t j = 0; j < k; ++j) ASSERT_EQ(r.row_ids(0)[j], sorted[j]) << "dim " << dim << " rank " << j;
    }
}

// Both precisions over cosine rows `all` (ids) with the given workspace:
// query i's results are want(i)'s first k ids, in order.
template <class Want>
void expect_ranks(const std::vector<uint64_t>& ids, const Matrix& all, const Matrix& q, size_t k, uint64_t workspace,
                  Want want) {
  for (const int32_t precision : {kExact, kFast}) {
    auto rt = cuda_runtime(precision, workspace);
    auto s = mt::make_store(all.dim, kF32, kCos, rt.get());
    ASSERT_TRUE(s);
    ASSERT_OK(mt::store_add(s.get(), ids, all));
    Results r;
    ASSERT_OK(mt::store_search(s.get(), q, k, nullptr, &r));
    for (size_t i = 0; i < q.rows; ++i)
      for (size_t j = 0; j < k; ++j)
        ASSERT_EQ(r.row_ids(i)[j], (*want(i))[j]) << "precision " << precision << " query " << i << " rank " << j;
  }
}

// A batch where ties let every row reach the sampled bound: more candidates
// than the long-row kernel keeps, so the overflowed queries are selected
// from every key; equal scores still rank by the smaller id.
TEST(GpuSearchTies, OverflowingCandidatesRankBySmallerId) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  const size_t dim = 300, dups = 18000, others = 2011, nq = 20, k = 20;
  const Matrix base = mt::random_matrix(rng, kF32, 1, dim, true);
  Matrix all(kF32, dups + others, dim);
  const Matrix rest = mt::random_matrix(rng, kF32, others, dim, true);
  for (size_t i = 0; i < dups; ++i) all.copy_row(i, base, 0);
  for (size_t i = 0; i < others; ++i) all.copy_row(dups + i, rest, i);
  const auto ids = mt::distinct_ids(rng, dups + others);
  std::vector<uint64_t> sorted(ids.begin(), ids.begin() + dups);
  std::sort(sorted.begin(), sorted.end());
  Matrix q(kF32, nq, dim);
  for (size_t i = 0; i < nq; ++i) q.copy_row(i, base, 0);
  ASSERT_NO_FATAL_FAILURE(expect_ranks(ids, all, q, k, 0, [&](size_t) { return &sorted; }));
}

// The smallest workspace, and a store whose full key row per query (8 MB)
// leaves room for a few: overflowed queries take their dense rows in
// several rounds, between queries whose candidates fit (selected in the
// first round). Every query holds two tie groups' rows: even queries
// 100000 rows (overflowing), odd ones 1000 (fitting); each still ranks by
// the smaller id.
TEST(GpuSearchTies, OverflowedQueriesTakeDenseRowsInRounds) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  const size_t dim = 8, big = 100000, small = 1000, n = 2000003, nq = 37, k = 40;
  const Matrix base = mt::random_matrix(rng, kF32, 2, dim, true);
  Matrix all = mt::random_matrix(rng, kF32, n, dim, true);
  std::vector<size_t> pos(n);
  std::iota(pos.begin(), pos.end(), size_t{0});
  std::shuffle(pos.begin(), pos.end(), rng);
  for (size_t i = 0; i < big + small; ++i) all.copy_row(pos[i], base, i < big ? 0 : 1);
  const auto ids = mt::distinct_ids(rng, n);
  std::vector<uint64_t> want[2];
  for (size_t i = 0; i < big + small; ++i) want[i < big ? 0 : 1].push_back(ids[pos[i]]);
  for (auto& w : want) std::sort(w.begin(), w.end());
  Matrix q(kF32, nq, dim);
  for (size_t i = 0; i < nq; ++i) q.copy_row(i, base, i % 2);
  // 1: the smallest workspace there is.
  ASSERT_NO_FATAL_FAILURE(expect_ranks(ids, all, q, k, 1, [&](size_t i) { return &want[i % 2]; }));
}

// EXACT: a batch (the GEMM paths, candidates re-scored) reports for every
// row the bits that query alone (the scan) reports, as an index's probe scan
// does: the re-score sums a row as the scans do.
TEST(GpuSearchBits, BatchScoresAreTheSingleQueryBits) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  const size_t n = 3001, nq = 40, k = 8;
  for (const int32_t dt : {kF32, kF16, kBF16})
    for (const int32_t me : {kCos, kDot, kL2})
      for (const size_t dim : {size_t{20}, size_t{100}, size_t{300}, size_t{771}}) {
        auto s = mt::make_store(dim, dt, me, gpu.get());
        ASSERT_TRUE(s);
        const auto ids = mt::distinct_ids(rng, n);
        ASSERT_OK(mt::store_add(s.get(), ids, mt::random_matrix(rng, kF32, n, dim)));
        const Matrix q = mt::random_matrix(rng, kF32, nq, dim);
        Results batch;
        ASSERT_OK(mt::store_search(s.get(), q, k, nullptr, &batch));
        for (size_t i = 0; i < nq; ++i) {
          Matrix one(kF32, 1, dim);
          one.copy_row(0, q, i);
          Results alone;
          ASSERT_OK(mt::store_search(s.get(), one, k, nullptr, &alone));
          for (size_t j = 0; j < k; ++j) {
            const std::string at =
                mt::case_name(dt, me, dim) + " query " + std::to_string(i) + " rank " + std::to_string(j);
            ASSERT_EQ(batch.row_ids(i)[j], alone.row_ids(0)[j]) << at;
            uint32_t a, b;
            std::memcpy(&a, batch.row_scores(i) + j, 4);
            std::memcpy(&b, alone.row_scores(0) + j, 4);
            ASSERT_EQ(a, b) << at << ": " << batch.row_scores(i)[j] << " against " << alone.row_scores(0)[j];
          }
        }
      }
}

// EXACT: the tensor-core scan (16-bit and f32 rows, k <= 256, up to four
// queries a pass) only filters with its MMA keys, so its answer is the prefix of
// the answer that scores every row exactly (k = 1000: the score pass and
// the radix selection), ids and score bits, even where thousands of rows
// lie within the MMA keys' error of each other: rows one 16-bit step apart
// around a shared base, queries near it.
TEST(GpuSearchBits, TensorCoreScanKeepsNearTies) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  const size_t n = 20011;
  for (const int32_t dt : {kF16, kBF16, kF32})
    for (const int32_t me : {kCos, kDot, kL2})
      for (const size_t dim : {size_t{24}, size_t{64}, size_t{200}, size_t{1000}}) {
        auto s = mt::make_store(dim, dt, me, gpu.get());
        ASSERT_TRUE(s);
        const Matrix base = mt::random_matrix(rng, kF32, 1, dim, true);
        Matrix rows(kF32, n, dim);
        for (size_t i = 0; i < n; ++i)
          for (size_t j = 0; j < dim; ++j) {
            // A few elements moved by about one step of the MMA's input
            // (f16 and TF32: 2^-10, bf16: 2^-7).
            const double b = base.row(0)[j];
            const double step = (dt == kBF16 ? 1.0 / 128 : 1.0 / 1024) * std::abs(b);
            const double moved = mt::rand_below(rng, 8) == 0 ? (mt::rand_below(rng, 3) - 1.0) * step : 0.0;
            rows.set(i, j, static_cast<float>(b + moved));
          }
        ASSERT_OK(mt::store_add(s.get(), mt::distinct_ids(rng, n), rows));
        for (const size_t nq : {size_t{1}, size_t{3}}) {
          Matrix q(kF32, nq, dim);
          for (size_t i = 0; i < nq; ++i)
            for (size_t j = 0; j < dim; ++j)
              q.set(i, j, static_cast<float>(base.row(0)[j] * (1.0 + 1e-3 * mt::rand_nonzero(rng))));
          Results all;
          ASSERT_OK(mt::store_search(s.get(), q, 1000, nullptr, &all));
          for (const size_t k : {size_t{10}, size_t{32}, size_t{100}, size_t{256}}) {
            Results r;
            ASSERT_OK(mt::store_search(s.get(), q, k, nullptr, &r));
            for (size_t i = 0; i < nq; ++i)
              for (size_t j = 0; j < k; ++j) {
                const std::string at = mt::case_name(dt, me, dim) + " nq " + std::to_string(nq) + " k " +
                                       std::to_string(k) + " query " + std::to_string(i) + " rank " + std::to_string(j);
                ASSERT_EQ(r.row_ids(i)[j], all.row_ids(i)[j]) << at;
                uint32_t a, b;
                std::memcpy(&a, r.row_scores(i) + j, 4);
                std::memcpy(&b, all.row_scores(i) + j, 4);
                ASSERT_EQ(a, b) << at;
              }
          }
        }
      }
}

// EXACT at the ends of the range: the tensor-core scan's one-FMA filter of
// plain keys still offers every row the exact scan would keep. Zero rows
// (cosine key 0), rows whose norm underflows (bf16 and f32 values near
// 1e-30), large rows; a zero query, one whose norm underflows, a huge
// one and an ordinary one, alone and as one pass of four queries, each
// answer the prefix of the answer that scores every row exactly (k = 1000).
TEST(GpuSearchBits, TensorCoreScanAtTheEndsOfTheRange) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  const size_t n = 9001;
  for (const int32_t dt : {kF16, kBF16, kF32})
    for (const int32_t me : {kCos, kDot, kL2})
      for (const size_t dim : {size_t{32}, size_t{64}, size_t{136}}) {
        auto s = mt::make_store(dim, dt, me, gpu.get());
        ASSERT_TRUE(s);
        Matrix rows = mt::random_matrix(rng, kF32, n, dim);
        for (size_t i = 0; i < n; ++i) {
          const double scale = i % 7 == 0 ? 0.0 : i % 11 == 0 ? (dt == kF16 ? 1e-3 : 1e-30) : i % 13 == 0 ? 300.0 : 1.0;
          for (size_t j = 0; j < dim; ++j) rows.set(i, j, static_cast<float>(rows.row(i)[j] * scale));
        }
        ASSERT_OK(mt::store_add(s.get(), mt::distinct_ids(rng, n), rows));
        const Matrix base = mt::random_matrix(rng, kF32, 4, dim);
        Matrix q(kF32, 4, dim);
        const double scales[4] = {0.0, 1e-24, 1e18, 1.0};
        for (size_t i = 0; i < 4; ++i)
          for (size_t j = 0; j < dim; ++j) q.set(i, j, static_cast<float>(base.row(i)[j] * scales[i]));
        Results all;
        ASSERT_OK(mt::store_search(s.get(), q, 1000, nullptr, &all));
        for (const size_t k : {size_t{10}, size_t{100}}) {
          Results four;
          ASSERT_OK(mt::store_search(s.get(), q, k, nullptr, &four));
          for (size_t i = 0; i < 4; ++i) {
            Matrix one(kF32, 1, dim);
            one.copy_row(0, q, i);
            Results alone;
            ASSERT_OK(mt::store_search(s.get(), one, k, nullptr, &alone));
            for (size_t j = 0; j < k; ++j) {
              const std::string at = mt::case_name(dt, me, dim) + " k " + std::to_string(k) + " query " +
                                     std::to_string(i) + " rank " + std::to_string(j);
              uint32_t a, b, c;
              std::memcpy(&a, four.row_scores(i) + j, 4);
              std::memcpy(&b, alone.row_scores(0) + j, 4);
              std::memcpy(&c, all.row_scores(i) + j, 4);
              ASSERT_EQ(four.row_ids(i)[j], all.row_ids(i)[j]) << at << " (pass of four)";
              ASSERT_EQ(alone.row_ids(0)[j], all.row_ids(i)[j]) << at << " (alone)";
              ASSERT_EQ(a, c) << at << " (pass of four)";
              ASSERT_EQ(b, c) << at << " (alone)";
            }
          }
        }
      }
}

// The resident copy follows every write.
TEST(GpuStore, UpdatesReachTheDevice) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  const size_t dim = 40;
  auto s = mt::make_store(dim, kBF16, kL2, gpu.get());
  StoreModel model(dim, kBF16, kL2);
  std::vector<uint64_t> all;
  for (int round = 0; round < 6; ++round) {
    const auto ids = mt::distinct_ids(rng, 700);
    const Matrix m = mt::random_matrix(rng, kF32, ids.size(), dim);
    ASSERT_OK(mt::store_add(s.get(), ids, m));
    model.add(ids, m);
    all.insert(all.end(), ids.begin(), ids.end());
    // Remove a third: crosses the compaction threshold every other round.
    std::vector<uint64_t> gone(all.begin() + static_cast<long>(all.size() / 3 * (round % 2)),
                               all.begin() + static_cast<long>(all.size() / 3 * (round % 2) + all.size() / 3));
    ASSERT_OK(mt::store_remove(s.get(), gone, nullptr));
    model.remove(gone);
    const Matrix q = mt::random_matrix(rng, kF32, 3, dim);
    Results r;
    ASSERT_OK(mt::store_search(s.get(), q, 20, nullptr, &r));
    mt::expect_results(model, q, r, false);
  }
}

TEST(GpuStore, ConcurrentSearchesAgree) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  auto s = mt::make_store(128, kF16, kCos, gpu.get());
  const auto ids = mt::distinct_ids(rng, 20000);
  const Matrix m = mt::random_matrix(rng, kF32, ids.size(), 128);
  ASSERT_OK(mt::store_add(s.get(), ids, m));
  const Matrix q = mt::random_matrix(rng, kF32, 20, 128);
  Results base;
  ASSERT_OK(mt::store_search(s.get(), q, 50, nullptr, &base));
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        Results r;
        if (mt::store_search(s.get(), q, 50, nullptr, &r) != MNEMO_OK || !mt::same_results(r, base)) ++bad;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// The similarity matrix on the GPU against the reference, EXACT and FAST.
TEST(GpuSimilarity, MatchesReference) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  for (const int32_t precision : {kExact, kFast})
    for (int32_t dt : {kF32, kF16, kBF16})
      for (int32_t me : {kCos, kDot, kL2})
        for (const size_t nq : {size_t{3}, size_t{20}}) {
          auto rt = cuda_runtime(precision);
          const size_t n = 777, dim = 131;
          const bool unit = me == kDot;
          const Matrix t = mt::random_matrix(rng, dt, n, dim, unit);
          const Matrix q = mt::random_matrix(rng, kF32, nq, dim, unit);
          mt::Buf<float> out(nq * n);
          mt::poison_f32(out.data(), nq * n);
          ASSERT_OK(mnemo_similarity(rt.get(), me, static_cast<const float*>(q.data()), nq, t.data(), dt, n, dim,
                                     out.data()));
          // FAST dot/cosine come straight from tensor cores: the 2e-3 bound.
          const bool reduced = precision == kFast && me != kL2 && nq >= 16;
          for (size_t i = 0; i < nq; ++i)
            for (size_t j = 0; j < n; ++j) {
              const double want = ref::score(me, q.row(i), t.row(j), dim);
              const double tol =
                  reduced ? 2e-3 * std::max(1.0, std::fabs(want)) : ref::score_tol(me, q.row(i), t.row(j), dim, want);
              ASSERT_NEAR(out[i * n + j], want, tol) << mt::case_name(dt, me, dim) << " q" << i << " t" << j;
            }
        }
}

// FAST similarity over bf16 targets stays within 2e-3 where rounding the
// queries to bf16 alone would not: entries a third of a bf16 step off a bf16
// value (about 1.3e-3 of each product, the same sign throughout), few
// dimensions.
TEST(GpuSimilarity, FastBf16QueriesKeepTheBound) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  auto rt = cuda_runtime(kFast);
  for (const size_t dim : {size_t{1}, size_t{3}, size_t{64}})
    for (const int32_t me : {kCos, kDot}) {
      const size_t nq = 20, n = 50;
      const Matrix t = mt::random_matrix(rng, kBF16, n, dim, false);
      Matrix q(kF32, nq, dim);
      for (size_t i = 0; i < nq; ++i)
        for (size_t d = 0; d < dim; ++d) {
          const float step = 0x1p-7f;  // a bf16 ulp in [1, 2)
          q.set(i, d, (1.0f + step * static_cast<float>(mt::rand_below(rng, 100)) + step / 3) * (d % 2 ? -1.0f : 1.0f));
        }
      mt::Buf<float> out(nq * n);
      mt::poison_f32(out.data(), nq * n);
      ASSERT_OK(
          mnemo_similarity(rt.get(), me, static_cast<const float*>(q.data()), nq, t.data(), kBF16, n, dim, out.data()));
      for (size_t i = 0; i < nq; ++i)
        for (size_t j = 0; j < n; ++j) {
          const double want = ref::score(me, q.row(i), t.row(j), dim);
          double tol = 2e-3;
          if (me == kDot) {
            double nqv = 0, ntv = 0;
            for (size_t d = 0; d < dim; ++d) nqv += q.row(i)[d] * q.row(i)[d], ntv += t.row(j)[d] * t.row(j)[d];
            tol *= std::sqrt(nqv * ntv);
          }
          ASSERT_NEAR(out[i * n + j], want, tol) << mt::case_name(kBF16, me, dim) << " q" << i << " t" << j;
        }
    }
}

}  // namespace
namespace {

// mnemo_store_stats on a CUDA store counts the resident copy.
TEST(GpuStore, StatsCountDeviceBytes) {
  REQUIRE_CUDA(rt);
  auto rng = mt::rng_for_test();
  const size_t n = 3000, dim = 100;
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F16, n, dim);
  mt::Buf<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = i * 7 + 1;
  auto st = mt::make_store(dim, MNEMO_DTYPE_F16, MNEMO_METRIC_COSINE, rt.get());
  ASSERT_TRUE(st);
  mnemo_store_statistics s{};
  s.struct_size = sizeof s;
  ASSERT_OK(mnemo_store_stats(st.get(), &s));
  const uint64_t empty = s.device_bytes;
  ASSERT_OK(mnemo_store_add(st.get(), ids.data(), m.data(), MNEMO_DTYPE_F16, n));
  ASSERT_OK(mnemo_store_stats(st.get(), &s));
  EXPECT_EQ(s.vectors, n);
  // At least the padded rows (104 halves each), ids, norms and biases.
  EXPECT_GE(s.device_bytes, n * (104 * 2 + 8 + 4 + 4));
  EXPECT_GT(s.device_bytes, empty);
  EXPECT_GE(s.host_bytes, n * dim * 2);
}

}  // namespace
