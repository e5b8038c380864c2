// Pair scoring, resampling and normalisation on the CUDA backend: against
// the float64 reference, against the CPU backend on identical inputs (both
// kernels of pair scoring, the shared-memory and global-memory paths of
// resampling, the warp and block paths of normalisation), and through the
// _device entry points on device buffers and a caller's stream. Skips,
// saying why, where no CUDA backend can be created.
#include <cmath>
#include <cstring>
#include <memory>
#include <tuple>

#include "../reference.h"
#include "../support.h"

#ifdef MNEMO_TEST_HAVE_CUDART
#include "dev_buf.h"
#endif

namespace {

using mt::Buf;
using mt::Matrix;

mt::RuntimePtr runtime_on(int32_t backend, bool validate = true) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = backend;
  o.validate = validate ? 1 : 0;
  mnemo_runtime* rt = nullptr;
  if (mnemo_runtime_create(&o, &rt) != MNEMO_OK) return nullptr;
  return mt::RuntimePtr(rt);
}

#define REQUIRE_CUDA(name)                                                              \
  auto name = runtime_on(MNEMO_BACKEND_CUDA);                                           \
  if (!name) GTEST_SKIP() << "no CUDA backend on this machine: " << mnemo_last_error(); \
  auto cpu = runtime_on(MNEMO_BACKEND_CPU);                                             \
  ASSERT_TRUE(cpu)

// ---- pair scoring ----------------------------------------------------------

struct PairSet {
  std::vector<uint64_t> src, tgt;
  Buf<unsigned char> s, t;
  int32_t dtype;
  PairSet(int32_t dt, std::vector<uint64_t> a, std::vector<uint64_t> b)
      : src(std::move(a)), tgt(std::move(b)), s(src.size() * 8), t(tgt.size() * 8), dtype(dt) {
    for (size_t p = 0; p < src.size(); ++p) {
      if (dt == MNEMO_DTYPE_U32) {
        const uint32_t x = static_cast<uint32_t>(src[p]), y = static_cast<uint32_t>(tgt[p]);
        std::memcpy(s.data() + 4 * p, &x, 4);
        std::memcpy(t.data() + 4 * p, &y, 4);
      } else {
        std::memcpy(s.data() + 8 * p, &src[p], 8);
        std::memcpy(t.data() + 8 * p, &tgt[p], 8);
      }
    }
  }
  size_t size() const { return src.size(); }
};

// Random pairs with the awkward kinds mixed in: a hot source named by a
// quarter of the pairs, duplicates, src == tgt, both ends of the table.
PairSet make_pairs(std::mt19937_64& rng, int32_t index_dtype, size_t n_items, size_t n) {
  std::vector<uint64_t> s(n), t(n);
  const uint64_t hot = mt::rand_below(rng, n_items);
  for (size_t p = 0; p < n; ++p) {
    s[p] = (p % 4 == 1) ? hot : mt::rand_below(rng, n_items);
    t[p] = mt::rand_below(rng, n_items);
  }
  if (n >= 8) {
    s[5] = s[3], t[5] = t[3];
    t[6] = s[6];
    s[0] = 0, t[0] = n_items - 1;
  }
  return PairSet(index_dtype, std::move(s), std::move(t));
}

void expect_pairs_match(int32_t metric, const Matrix& table, const PairSet& ps, const float* gpu, const float* cpu) {
  size_t bad = 0;
  for (size_t p = 0; p < ps.size(); ++p) {
    const double* x = table.row(ps.src[p]);
    const double* y = table.row(ps.tgt[p]);
    const double r = ref::score(metric, x, y, table.dim), tol = ref::score_tol(metric, x, y, table.dim, r);
    if (!(std::fabs(gpu[p] - r) <= tol) && bad++ < 5)
      ADD_FAILURE() << "pair " << p << " (" << ps.src[p] << ", " << ps.tgt[p] << "): GPU " << gpu[p] << ", reference "
                    << r << " (tolerance " << tol << ")";
    if (!(std::fabs(gpu[p] - cpu[p]) <= 2 * tol) && bad++ < 5)
      ADD_FAILURE() << "pair " << p << ": GPU " << gpu[p] << ", CPU " << cpu[p];
  }
  EXPECT_EQ(bad, 0u);
}

struct PairCase {
  int32_t dtype, metric;
  size_t n_items, dim, n_pairs;
  int32_t index_dtype;
};

class GpuPairs : public ::testing::TestWithParam<PairCase> {};

TEST_P(GpuPairs, MatchReferenceAndCpu) {
  REQUIRE_CUDA(gpu);
  const PairCase c = GetParam();
  auto rng = mt::rng_for_test();
  const Matrix table = mt::random_matrix(rng, c.dtype, c.n_items, c.dim, c.metric != MNEMO_METRIC_L2SQ);
  const PairSet ps = make_pairs(rng, c.index_dtype, c.n_items, c.n_pairs);
  Buf<float> g(c.n_pairs), h(c.n_pairs);
  mt::poison_f32(g.data(), c.n_pairs);
  ASSERT_OK(mnemo_score_pairs(gpu.get(), c.metric, table.data(), c.dtype, c.n_items, c.dim, ps.s.data(), ps.t.data(),
                              c.index_dtype, c.n_pairs, g.data()));
  ASSERT_OK(mnemo_score_pairs(cpu.get(), c.metric, table.data(), c.dtype, c.n_items, c.dim, ps.s.data(), ps.t.data(),
                              c.index_dtype, c.n_pairs, h.data()));
  expect_pairs_match(c.metric, table, ps, g.data(), h.data());
}

std::vector<PairCase> pair_cases() {
  std::vector<PairCase> v;
  for (int32_t dt : mt::storage_dtypes())
    for (int32_t m : mt::metrics())
      for (size_t dim : {size_t{1}, size_t{3}, size_t{5}, size_t{127}, size_t{768}, size_t{1024}})
        v.push_back({dt, m, 300, dim, dim == 1024 ? 5000u : 777u, MNEMO_DTYPE_U32});
  // Tables past the sort threshold (>= 64 MiB): the source-sorted kernel,
  // u32 and u64 indices, rows of 16-byte multiples and not.
  v.push_back({MNEMO_DTYPE_F16, MNEMO_METRIC_COSINE, 40000, 1024, 200000, MNEMO_DTYPE_U32});
  v.push_back({MNEMO_DTYPE_BF16, MNEMO_METRIC_DOT, 40000, 1000, 150000, MNEMO_DTYPE_U64});
  v.push_back({MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ, 25000, 771, 100000, MNEMO_DTYPE_U32});
  v.push_back({MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, 17000, 1024, 70000, MNEMO_DTYPE_U64});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuPairs, ::testing::ValuesIn(pair_cases()), [](const auto& info) {
  const PairCase& c = info.param;
  return mt::case_name(c.dtype, c.metric, c.dim) + "_n" + std::to_string(c.n_items) + "_p" + std::to_string(c.n_pairs) +
         (c.index_dtype == MNEMO_DTYPE_U64 ? "_u64" : "_u32");
});

TEST(GpuPairsRules, OutOfRangeWritesNothing) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  const Matrix table = mt::random_matrix(rng, MNEMO_DTYPE_F32, 50, 8);
  PairSet ps = make_pairs(rng, MNEMO_DTYPE_U32, 50, 100);
  const uint32_t bad = 50;
  std::memcpy(ps.t.data() + 4 * 77, &bad, 4);
  Buf<float> out(100);
  mt::poison_f32(out.data(), 100);
  const auto before = out.snapshot();
  EXPECT_TRUE(mt::failed_with(mnemo_score_pairs(gpu.get(), MNEMO_METRIC_DOT, table.data(), MNEMO_DTYPE_F32, 50, 8,
                                                ps.s.data(), ps.t.data(), MNEMO_DTYPE_U32, 100, out.data()),
                              MNEMO_E_OUT_OF_RANGE, "tgt"));
  EXPECT_TRUE(mt::names_number(mt::last_error(), 77));
  EXPECT_TRUE(out.same_as(before));
}

// ---- resampling --------------------------------------------------------------

struct ResampleCase {
  int32_t dtype, time_dtype;
  size_t batch, n_src, dim, n_tgt;
  bool lengths;
};

class GpuResample : public ::testing::TestWithParam<ResampleCase> {};

// Source times with repeats; targets spread past both ends, some on sample
// times exactly. Written in the time dtype.
struct Times {
  Buf<unsigned char> src, tgt;
  std::vector<uint64_t> src_len, tgt_len;
};

Times make_times(std::mt19937_64& rng, const ResampleCase& c) {
  Times t{Buf<unsigned char>(c.batch * c.n_src * 8), Buf<unsigned char>(c.batch * c.n_tgt * 8), {}, {}};
  auto put = [&](Buf<unsigned char>& b, size_t i, double v) {
    if (c.time_dtype == MNEMO_DTYPE_F64)
      std::memcpy(b.data() + 8 * i, &v, 8);
    else {
      const float f = static_cast<float>(v);
      std::memcpy(b.data() + 4 * i, &f, 4);
    }
  };
  std::vector<double> row(c.n_src);
  for (size_t b = 0; b < c.batch; ++b) {
    double x = -1.0 + static_cast<double>(mt::rand_below(rng, 100)) / 50.0;
    for (size_t i = 0; i < c.n_src; ++i) {
      if (i > 0 && mt::rand_below(rng, 8) != 0) x += 0.01 + static_cast<double>(mt::rand_below(rng, 1000)) / 997.0;
      row[i] = static_cast<float>(x);  // exact in both time dtypes
      put(t.src, b * c.n_src + i, row[i]);
    }
    for (size_t j = 0; j < c.n_tgt; ++j) {
      const double lo = row.front() - 0.5, hi = row.back() + 0.5;
      double v = lo + (hi - lo) * static_cast<double>(mt::rand_below(rng, 1u << 20)) / (1u << 20);
      if (j % 5 == 2) v = row[mt::rand_below(rng, c.n_src)];
      put(t.tgt, b * c.n_tgt + j, v);
    }
    if (c.lengths) {
      t.src_len.push_back(1 + mt::rand_below(rng, c.n_src));
      t.tgt_len.push_back(mt::rand_below(rng, c.n_tgt + 1));
    }
  }
  return t;
}

TEST_P(GpuResample, BitIdenticalToCpu) {
  REQUIRE_CUDA(gpu);
  const ResampleCase c = GetParam();
  auto rng = mt::rng_for_test();
  const Matrix data = mt::random_matrix(rng, c.dtype, c.batch * c.n_src, c.dim);
  Times t = make_times(rng, c);
  mnemo_resample_options o = mnemo_resample_options_default();
  Buf<uint64_t> sl(c.batch), tl(c.batch);
  if (c.lengths) {
    std::memcpy(sl.data(), t.src_len.data(), c.batch * 8);
    std::memcpy(tl.data(), t.tgt_len.data(), c.batch * 8);
    o.src_lengths = sl.data();
    o.tgt_lengths = tl.data();
  }
  const size_t n_out = c.batch * c.n_tgt * c.dim, es = mt::dtype_size(c.dtype);
  Buf<unsigned char> g(n_out * es), h(n_out * es);
  mt::poison(g.data(), c.dtype, n_out);
  ASSERT_OK(mnemo_resample(gpu.get(), data.data(), c.dtype, c.batch, c.n_src, c.dim, t.src.data(), t.tgt.data(),
                           c.time_dtype, c.n_tgt, &o, g.data()));
  ASSERT_OK(mnemo_resample(cpu.get(), data.data(), c.dtype, c.batch, c.n_src, c.dim, t.src.data(), t.tgt.data(),
                           c.time_dtype, c.n_tgt, &o, h.data()));
  // The same f32 arithmetic on both sides: every output bit agrees.
  size_t bad = 0;
  for (size_t i = 0; i < n_out; ++i)
    if (std::memcmp(g.data() + i * es, h.data() + i * es, es) != 0 && bad++ < 5)
      ADD_FAILURE() << "element " << i << " (row " << i / (c.n_tgt * c.dim) << ", target " << i / c.dim % c.n_tgt
                    << "): GPU " << ref::load(g.data(), c.dtype, i) << ", CPU " << ref::load(h.data(), c.dtype, i);
  EXPECT_EQ(bad, 0u);
}

std::vector<ResampleCase> resample_cases() {
  std::vector<ResampleCase> v;
  for (int32_t dt : mt::storage_dtypes())
    for (int32_t tt : {MNEMO_DTYPE_F32, MNEMO_DTYPE_F64})
      for (size_t dim : {size_t{1}, size_t{3}, size_t{8}, size_t{64}, size_t{127}}) {
        v.push_back({dt, tt, 7, 33, dim, 50, false});
        v.push_back({dt, tt, 5, 29, dim, 41, true});
      }
  v.push_back({MNEMO_DTYPE_F32, MNEMO_DTYPE_F32, 3, 1, 16, 9, false});       // S = 1
  v.push_back({MNEMO_DTYPE_F32, MNEMO_DTYPE_F32, 2, 20000, 4, 300, false});  // times past shared memory
  v.push_back({MNEMO_DTYPE_BF16, MNEMO_DTYPE_F64, 2, 9000, 8, 200, true});   // f64 times past shared memory
  v.push_back({MNEMO_DTYPE_F16, MNEMO_DTYPE_F32, 64, 512, 64, 256, false});  // the benchmark's shape, smaller
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuResample, ::testing::ValuesIn(resample_cases()), [](const auto& info) {
  const ResampleCase& c = info.param;
  return std::string(mt::dtype_name(c.dtype)) + (c.time_dtype == MNEMO_DTYPE_F64 ? "_t64" : "_t32") + "_b" +
         std::to_string(c.batch) + "_s" + std::to_string(c.n_src) + "_d" + std::to_string(c.dim) + "_t" +
         std::to_string(c.n_tgt) + (c.lengths ? "_lengths" : "");
});

// ---- normalisation -------------------------------------------------------------

struct NormCase {
  int32_t dtype;
  size_t rows, dim;
};

class GpuNorm : public ::testing::TestWithParam<NormCase> {};

// Random rows with a zero row, a constant row and rows scaled to the edges
// of f32 (sums of squares that overflow or underflow).
Matrix norm_input(std::mt19937_64& rng, const NormCase& c) {
  Matrix m = mt::random_matrix(rng, c.dtype, c.rows, c.dim);
  for (size_t j = 0; j < c.dim; ++j) {
    m.set(0, j, 0.0f);
    if (c.rows > 1) m.set(1, j, 0.75f);
    if (c.dtype != MNEMO_DTYPE_F16 && c.rows > 3) {
      m.set(2, j, mt::rand_nonzero(rng) * 3e37f);
      m.set(3, j, mt::rand_nonzero(rng) * 1e-25f);
    }
    // A narrow row far from 0 (mean 1e5 times the spread): layer_norm must
    // centre it to the bound.
    if (c.rows > 4) m.set(4, j, static_cast<float>(1000.0 + 1e-2 * m.row(4)[j]));
  }
  return m;
}

void expect_close(const void* got, const void* cpu, int32_t dtype, const std::vector<double>& want,
                  const std::vector<double>& tol, const char* what) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = ref::load(got, dtype, i), h = ref::load(cpu, dtype, i);
    if (!(std::fabs(g - want[i]) <= tol[i]) && bad++ < 5)
      ADD_FAILURE() << what << " element " << i << ": GPU " << g << ", reference " << want[i] << " (tolerance "
                    << tol[i] << ")";
    if (!(std::fabs(g - h) <= 2 * tol[i]) && bad++ < 5)
      ADD_FAILURE() << what << " element " << i << ": GPU " << g << ", CPU " << h;
  }
  EXPECT_EQ(bad, 0u) << what;
}

TEST_P(GpuNorm, NormalizeMatchesReferenceAndCpu) {
  REQUIRE_CUDA(gpu);
  const NormCase c = GetParam();
  auto rng = mt::rng_for_test();
  Matrix in = norm_input(rng, c);
  const size_t n = c.rows * c.dim, es = mt::dtype_size(c.dtype);
  Buf<unsigned char> g(n * es), h(n * es);
  mt::poison(g.data(), c.dtype, n);
  ASSERT_OK(mnemo_normalize_rows(gpu.get(), in.data(), g.data(), c.dtype, c.rows, c.dim));
  ASSERT_OK(mnemo_normalize_rows(cpu.get(), in.data(), h.data(), c.dtype, c.rows, c.dim));
  const std::vector<double> want = ref::normalize_rows(in.val, c.rows, c.dim);
  std::vector<double> tol(n);
  for (size_t i = 0; i < n; ++i) tol[i] = 1e-5 * std::fabs(want[i]) + 1e-9 + ref::rounding_tol(c.dtype, want[i]);
  expect_close(g.data(), h.data(), c.dtype, want, tol, "normalize");
  // In place gives the same bits.
  ASSERT_OK(mnemo_normalize_rows(gpu.get(), in.data(), in.data(), c.dtype, c.rows, c.dim));
  EXPECT_EQ(std::memcmp(in.data(), g.data(), n * es), 0);
}

TEST_P(GpuNorm, LayerNormMatchesReferenceAndCpu) {
  REQUIRE_CUDA(gpu);
  const NormCase c = GetParam();
  auto rng = mt::rng_for_test();
  Matrix in = norm_input(rng, c);
  Buf<float> gamma(c.dim), beta(c.dim);
  for (size_t j = 0; j < c.dim; ++j) gamma[j] = 0.5f + mt::rand_nonzero(rng), beta[j] = mt::rand_nonzero(rng);
  const size_t n = c.rows * c.dim, es = mt::dtype_size(c.dtype);
  for (const float eps : {1e-5f, 0.0f}) {
    Buf<unsigned char> g(n * es), h(n * es);
    mt::poison(g.data(), c.dtype, n);
    ASSERT_OK(mnemo_layer_norm(gpu.get(), in.data(), g.data(), c.dtype, c.rows, c.dim, gamma.data(), beta.data(), eps));
    ASSERT_OK(mnemo_layer_norm(cpu.get(), in.data(), h.data(), c.dtype, c.rows, c.dim, gamma.data(), beta.data(), eps));
    std::vector<double> tol;
    const std::vector<double> want =
        ref::layer_norm(in.val, c.rows, c.dim, gamma.data(), beta.data(), eps, c.dtype, &tol);
    expect_close(g.data(), h.data(), c.dtype, want, tol, eps == 0.0f ? "layer_norm eps 0" : "layer_norm");
  }
}

std::vector<NormCase> norm_cases() {
  std::vector<NormCase> v;
  for (int32_t dt : mt::storage_dtypes())
    for (size_t dim :
         {size_t{1}, size_t{3}, size_t{8}, size_t{127}, size_t{768}, size_t{1000}, size_t{2048}, size_t{4097}})
      v.push_back({dt, dim >= 2048 ? size_t{9} : size_t{37}, dim});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuNorm, ::testing::ValuesIn(norm_cases()), [](const auto& info) {
  return std::string(mt::dtype_name(info.param.dtype)) + "_r" + std::to_string(info.param.rows) + "_d" +
         std::to_string(info.param.dim);
});

// FAST mode multiplies f16 copies of the queries on f16 storage: queries
// beyond f16's range (or far below its normal range) must still give the
// contract's scores, not infinities or zeros.
TEST(GpuFastRange, F16StorageWithExtremeQueries) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CUDA;
  o.precision = MNEMO_PRECISION_FAST;
  mnemo_runtime* raw = nullptr;
  if (mnemo_runtime_create(&o, &raw) != MNEMO_OK)
    GTEST_SKIP() << "no CUDA backend on this machine: " << mnemo_last_error();
  mt::RuntimePtr fast(raw);
  auto rng = mt::rng_for_test();
  const size_t n = 700, dim = 40, nq = 20;
  const Matrix targets = mt::random_matrix(rng, MNEMO_DTYPE_F16, n, dim, true);
  for (const float scale : {1e6f, 1e-6f}) {
    Buf<float> q(nq * dim);
    for (size_t i = 0; i < nq * dim; ++i) q[i] = mt::rand_nonzero(rng) * scale;
    Buf<float> out(nq * n);
    mt::poison_f32(out.data(), nq * n);
    ASSERT_OK(mnemo_similarity(fast.get(), MNEMO_METRIC_COSINE, q.data(), nq, targets.data(), MNEMO_DTYPE_F16, n, dim,
                               out.data()));
    size_t bad = 0;
    std::vector<double> qd(dim);
    for (size_t i = 0; i < nq; ++i) {
      for (size_t d = 0; d < dim; ++d) qd[d] = q[i * dim + d];
      for (size_t j = 0; j < n; ++j) {
        const double r = ref::score(MNEMO_METRIC_COSINE, qd.data(), targets.row(j), dim);
        if (!(std::fabs(out[i * n + j] - r) <= 2e-3) && bad++ < 5)
          ADD_FAILURE() << "scale " << scale << " query " << i << " target " << j << ": " << out[i * n + j]
                        << ", reference " << r;
      }
    }
    EXPECT_EQ(bad, 0u) << "scale " << scale;
  }
}

// ---- device pointers -------------------------------------------------------------

#ifdef MNEMO_TEST_HAVE_CUDART

using mt::DevBuf;
using mt::Stream;

TEST(GpuDevicePointers, PairsMatchHostCall) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  for (const auto& [n_items, dim, n] : {std::tuple<size_t, size_t, size_t>{300, 96, 1000}, {40000, 1024, 100000}}) {
    const Matrix table = mt::random_matrix(rng, MNEMO_DTYPE_F16, n_items, dim, true);
    const PairSet ps = make_pairs(rng, MNEMO_DTYPE_U32, n_items, n);
    Buf<float> host(n);
    ASSERT_OK(mnemo_score_pairs(gpu.get(), MNEMO_METRIC_COSINE, table.data(), MNEMO_DTYPE_F16, n_items, dim,
                                ps.s.data(), ps.t.data(), MNEMO_DTYPE_U32, n, host.data()));
    DevBuf dt(table.data(), n_items * dim * 2), ds(ps.s.data(), n * 4), dg(ps.t.data(), n * 4), out(n * 4);
    ASSERT_TRUE(dt.get() && ds.get() && dg.get() && out.get());
    Stream st;
    ASSERT_OK(mnemo_score_pairs_device(gpu.get(), MNEMO_METRIC_COSINE, dt.get(), MNEMO_DTYPE_F16, n_items, dim,
                                       ds.get(), dg.get(), MNEMO_DTYPE_U32, n, static_cast<float*>(out.get()), st.s));
    ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
    const auto got = out.bytes();
    EXPECT_EQ(std::memcmp(got.data(), host.data(), n * 4), 0) << n << " pairs";
  }
}

TEST(GpuDevicePointers, PairsRejectBadIndicesAndValuesWritingNothing) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  Matrix table = mt::random_matrix(rng, MNEMO_DTYPE_F32, 64, 12);
  PairSet ps = make_pairs(rng, MNEMO_DTYPE_U64, 64, 500);
  const uint64_t bad = 64;
  std::memcpy(ps.s.data() + 8 * 321, &bad, 8);
  std::vector<float> poison(500);
  mt::poison_f32(poison.data(), 500);
  DevBuf dt(table.data(), 64 * 12 * 4), ds(ps.s.data(), 500 * 8), dg(ps.t.data(), 500 * 8), out(poison.data(), 2000);
  EXPECT_TRUE(
      mt::failed_with(mnemo_score_pairs_device(gpu.get(), MNEMO_METRIC_DOT, dt.get(), MNEMO_DTYPE_F32, 64, 12, ds.get(),
                                               dg.get(), MNEMO_DTYPE_U64, 500, static_cast<float*>(out.get()), nullptr),
                      MNEMO_E_OUT_OF_RANGE, "src"));
  EXPECT_TRUE(mt::names_number(mt::last_error(), 321));
  EXPECT_EQ(std::memcmp(out.bytes().data(), poison.data(), 2000), 0);
  // A NaN in the table (indices fixed).
  DevBuf ds_ok(ps.tgt.data(), 500 * 8);  // valid indices
  table.set(9, 4, std::nanf(""));
  DevBuf dnan(table.data(), 64 * 12 * 4);
  EXPECT_TRUE(mt::failed_with(
      mnemo_score_pairs_device(gpu.get(), MNEMO_METRIC_DOT, dnan.get(), MNEMO_DTYPE_F32, 64, 12, ds_ok.get(), dg.get(),
                               MNEMO_DTYPE_U64, 500, static_cast<float*>(out.get()), nullptr),
      MNEMO_E_NON_FINITE, "table"));
  EXPECT_TRUE(mt::names_number(mt::last_error(), 9 * 12 + 4));
  EXPECT_EQ(std::memcmp(out.bytes().data(), poison.data(), 2000), 0);
  // Pageable host memory is not device memory.
  Buf<float> host_out(500);
  EXPECT_TRUE(
      mt::failed_with(mnemo_score_pairs_device(gpu.get(), MNEMO_METRIC_DOT, dt.get(), MNEMO_DTYPE_F32, 64, 12,
                                               ds_ok.get(), dg.get(), MNEMO_DTYPE_U64, 500, host_out.data(), nullptr),
                      MNEMO_E_INVALID_ARGUMENT, "scores"));
  // A CPU runtime has no device to run on.
  EXPECT_TRUE(mt::failed_with(
      mnemo_score_pairs_device(cpu.get(), MNEMO_METRIC_DOT, dt.get(), MNEMO_DTYPE_F32, 64, 12, ds_ok.get(), dg.get(),
                               MNEMO_DTYPE_U64, 500, static_cast<float*>(out.get()), nullptr),
      MNEMO_E_BACKEND_UNAVAILABLE));
}

TEST(GpuDevicePointers, ResampleMatchesHostCallAndChecksTimes) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  const ResampleCase c{MNEMO_DTYPE_BF16, MNEMO_DTYPE_F32, 9, 70, 24, 33, true};
  const Matrix data = mt::random_matrix(rng, c.dtype, c.batch * c.n_src, c.dim);
  Times t = make_times(rng, c);
  Buf<uint64_t> sl(c.batch), tl(c.batch);
  std::memcpy(sl.data(), t.src_len.data(), c.batch * 8);
  std::memcpy(tl.data(), t.tgt_len.data(), c.batch * 8);
  mnemo_resample_options o = mnemo_resample_options_default();
  o.src_lengths = sl.data();
  o.tgt_lengths = tl.data();
  const size_t out_bytes = c.batch * c.n_tgt * c.dim * 2;
  Buf<unsigned char> host(out_bytes);
  ASSERT_OK(mnemo_resample(gpu.get(), data.data(), c.dtype, c.batch, c.n_src, c.dim, t.src.data(), t.tgt.data(),
                           c.time_dtype, c.n_tgt, &o, host.data()));
  DevBuf dd(data.data(), c.batch * c.n_src * c.dim * 2), ds(t.src.data(), c.batch * c.n_src * 4),
      dg(t.tgt.data(), c.batch * c.n_tgt * 4), dsl(sl.data(), c.batch * 8), dtl(tl.data(), c.batch * 8), out(out_bytes);
  mnemo_resample_options od = o;
  od.src_lengths = static_cast<const uint64_t*>(dsl.get());
  od.tgt_lengths = static_cast<const uint64_t*>(dtl.get());
  Stream st;
  ASSERT_OK(mnemo_resample_device(gpu.get(), dd.get(), c.dtype, c.batch, c.n_src, c.dim, ds.get(), dg.get(),
                                  c.time_dtype, c.n_tgt, &od, out.get(), st.s));
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  EXPECT_EQ(std::memcmp(out.bytes().data(), host.data(), out_bytes), 0);

  // Decreasing valid times in row 4 at index 2; a length past n_src in row 6.
  float* times = reinterpret_cast<float*>(t.src.data());
  sl[4] = c.n_src;
  times[4 * c.n_src + 2] = times[4 * c.n_src + 1] - 1.0f;
  DevBuf ds2(t.src.data(), c.batch * c.n_src * 4), dsl2(sl.data(), c.batch * 8);
  od.src_lengths = static_cast<const uint64_t*>(dsl2.get());
  EXPECT_TRUE(mt::failed_with(mnemo_resample_device(gpu.get(), dd.get(), c.dtype, c.batch, c.n_src, c.dim, ds2.get(),
                                                    dg.get(), c.time_dtype, c.n_tgt, &od, out.get(), st.s),
                              MNEMO_E_NOT_SORTED));
  EXPECT_TRUE(mt::names_number(mt::last_error(), 4));
  sl[6] = c.n_src + 1;
  DevBuf dsl3(sl.data(), c.batch * 8);
  od.src_lengths = static_cast<const uint64_t*>(dsl3.get());
  EXPECT_TRUE(mt::failed_with(mnemo_resample_device(gpu.get(), dd.get(), c.dtype, c.batch, c.n_src, c.dim, ds2.get(),
                                                    dg.get(), c.time_dtype, c.n_tgt, &od, out.get(), st.s),
                              MNEMO_E_INVALID_ARGUMENT, "src_lengths"));
  EXPECT_EQ(std::memcmp(out.bytes().data(), host.data(), out_bytes), 0) << "a failed call wrote its output";
}

TEST(GpuDevicePointers, NormalisationMatchesHostCallInPlaceOnAStream) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  const size_t rows = 1000, dim = 768, bytes = rows * dim * 2;
  const Matrix in = mt::random_matrix(rng, MNEMO_DTYPE_F16, rows, dim);
  Buf<float> gamma(dim), beta(dim);
  for (size_t j = 0; j < dim; ++j) gamma[j] = 1.0f + 0.5f * mt::rand_nonzero(rng), beta[j] = mt::rand_nonzero(rng);
  Buf<unsigned char> h1(bytes), h2(bytes);
  ASSERT_OK(mnemo_normalize_rows(gpu.get(), in.data(), h1.data(), MNEMO_DTYPE_F16, rows, dim));
  ASSERT_OK(
      mnemo_layer_norm(gpu.get(), in.data(), h2.data(), MNEMO_DTYPE_F16, rows, dim, gamma.data(), beta.data(), 1e-5f));
  DevBuf d1(in.data(), bytes), d2(in.data(), bytes), dgm(gamma.data(), dim * 4), dbt(beta.data(), dim * 4);
  Stream st;
  ASSERT_OK(mnemo_normalize_rows_device(gpu.get(), d1.get(), d1.get(), MNEMO_DTYPE_F16, rows, dim, st.s));
  ASSERT_OK(mnemo_layer_norm_device(gpu.get(), d2.get(), d2.get(), MNEMO_DTYPE_F16, rows, dim,
                                    static_cast<const float*>(dgm.get()), static_cast<const float*>(dbt.get()), 1e-5f,
                                    st.s));
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  EXPECT_EQ(std::memcmp(d1.bytes().data(), h1.data(), bytes), 0);
  EXPECT_EQ(std::memcmp(d2.bytes().data(), h2.data(), bytes), 0);
  // A NaN in gamma is refused before anything is written.
  gamma[100] = std::nanf("");
  DevBuf dbad(gamma.data(), dim * 4), d3(in.data(), bytes);
  EXPECT_TRUE(mt::failed_with(mnemo_layer_norm_device(gpu.get(), d3.get(), d3.get(), MNEMO_DTYPE_F16, rows, dim,
                                                      static_cast<const float*>(dbad.get()), nullptr, 1e-5f, st.s),
                              MNEMO_E_NON_FINITE, "gamma"));
  EXPECT_EQ(std::memcmp(d3.bytes().data(), in.data(), bytes), 0);
}

// Many calls queued back to back on one stream, sharing the backend's
// scratch: each result must still be its own.
TEST(GpuDevicePointers, QueuedCallsKeepTheirOwnResults) {
  REQUIRE_CUDA(gpu);
  auto rng = mt::rng_for_test();
  const size_t n_items = 40000, dim = 1024, n = 100000;
  const Matrix table = mt::random_matrix(rng, MNEMO_DTYPE_F16, n_items, dim, true);
  DevBuf dt(table.data(), n_items * dim * 2);
  std::vector<PairSet> sets;
  std::vector<std::unique_ptr<DevBuf>> bufs;
  std::vector<Buf<float>> want;
  for (int i = 0; i < 4; ++i) {
    sets.push_back(make_pairs(rng, MNEMO_DTYPE_U32, n_items, n));
    want.emplace_back(n);
    ASSERT_OK(mnemo_score_pairs(gpu.get(), MNEMO_METRIC_DOT, table.data(), MNEMO_DTYPE_F16, n_items, dim,
                                sets.back().s.data(), sets.back().t.data(), MNEMO_DTYPE_U32, n, want.back().data()));
  }
  auto fast = runtime_on(MNEMO_BACKEND_CUDA, false);
  ASSERT_TRUE(fast);
  Stream st[2];
  std::vector<std::unique_ptr<DevBuf>> outs;
  for (int i = 0; i < 4; ++i) {
    bufs.push_back(std::make_unique<DevBuf>(sets[i].s.data(), n * 4));
    bufs.push_back(std::make_unique<DevBuf>(sets[i].t.data(), n * 4));
    outs.push_back(std::make_unique<DevBuf>(n * 4));
  }
  for (int i = 0; i < 4; ++i) {
    // Alternate streams: the second call's sort reuses the scratch the
    // first call's kernels may still be reading on the other stream.
    ASSERT_OK(mnemo_score_pairs_device(fast.get(), MNEMO_METRIC_DOT, dt.get(), MNEMO_DTYPE_F16, n_items, dim,
                                       bufs[2 * i]->get(), bufs[2 * i + 1]->get(), MNEMO_DTYPE_U32, n,
                                       static_cast<float*>(outs[i]->get()), st[i % 2].s));
  }
  ASSERT_EQ(cudaStreamSynchronize(st[0].s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st[1].s), cudaSuccess);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(std::memcmp(outs[i]->bytes().data(), want[i].data(), n * 4), 0) << i;
}

#else

TEST(GpuDevicePointers, NeedTheCudaToolkit) {
  GTEST_SKIP() << "these tests were built without the CUDA runtime (no CUDA toolkit at build time)";
}

#endif

}  // namespace
