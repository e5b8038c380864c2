// Every SIMD target the CPU kernels were compiled for, forced one at a time
// through Highway's target mask, against the float64 reference: search on
// both the streaming and the sgemm path (which must also agree bit for bit),
// similarity, pairs, f32 normalisation, LayerNorm and resampling.
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "reference.h"
#include "support.h"
#include "topk_check.h"

namespace {

using mt::Buf;
using mt::Matrix;

// Forces one target for the scope, and checks the library reports it.
class ForcedTarget {
 public:
  explicit ForcedTarget(int64_t t) { hwy::SetSupportedTargetsForTest(t); }
  ~ForcedTarget() { hwy::SetSupportedTargetsForTest(0); }
  ForcedTarget(const ForcedTarget&) = delete;
  ForcedTarget& operator=(const ForcedTarget&) = delete;
};

std::string device_name(mnemo_runtime* rt) {
  mnemo_runtime_report r;
  r.struct_size = sizeof(r);
  EXPECT_OK(mnemo_runtime_info(rt, &r));
  return r.device_name;
}

// A CPU runtime whose search path is fixed: sgemm from `gemm_min` queries.
mt::RuntimePtr cpu_runtime(const char* gemm_min, uint32_t threads) {
  setenv("MNEMO_CPU_GEMM_MIN_QUERIES", gemm_min, 1);
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CPU;
  o.num_threads = threads;
  mt::RuntimePtr rt = mt::make_runtime(o);
  unsetenv("MNEMO_CPU_GEMM_MIN_QUERIES");
  return rt;
}

class SimdTarget : public ::testing::TestWithParam<int64_t> {};

std::vector<int64_t> targets() { return hwy::SupportedAndGeneratedTargets(); }

TEST(SimdTargets, SeveralCompiledAndRunnable) {
  // AVX2 and SSE4 at least on any x86-64 machine able to run AVX2; the
  // portable fallback is always there.
  ASSERT_GE(targets().size(), 2u);
  // Unforced, the best of them runs, and the build text names it.
  const std::string info = mnemo_build_info();
  EXPECT_NE(info.find(std::string("running ") + hwy::TargetName(targets().front())), std::string::npos) << info;
}

TEST_P(SimdTarget, SearchBothPathsMatchReferenceAndEachOther) {
  const int64_t target = GetParam();
  ForcedTarget forced(target);
  auto rng = mt::rng_for_test();
  struct Case {
    size_t n, dim, nq, k;
  };
  // 3001 slots reach the sgemm path; 17000 the slot-split streaming path.
  for (const Case c : {Case{3001, 127, 9, 7}, Case{3001, 768, 6, 33}, Case{17000, 19, 5, 3}}) {
    for (const uint32_t threads : {1u, 3u}) {
      mt::RuntimePtr stream_rt = cpu_runtime("1000000000", threads), gemm_rt = cpu_runtime("1", threads);
      ASSERT_NE(device_name(stream_rt.get()).find(hwy::TargetName(target)), std::string::npos)
          << device_name(stream_rt.get());
      for (const int32_t dtype : mt::storage_dtypes())
        for (const int32_t metric : mt::metrics()) {
          SCOPED_TRACE(mt::case_name(dtype, metric, c.dim) + " n" + std::to_string(c.n) + " threads " +
                       std::to_string(threads));
          const Matrix x = mt::random_matrix(rng, dtype, c.n, c.dim, metric != MNEMO_METRIC_L2SQ);
          const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, c.nq, c.dim, metric != MNEMO_METRIC_L2SQ);
          Buf<uint64_t> ids(c.n);
          for (size_t i = 0; i < c.n; ++i) ids[i] = 1000 + 7 * i;
          mt::StorePtr ss = mt::make_store(c.dim, dtype, metric, stream_rt.get());
          mt::StorePtr gs = mt::make_store(c.dim, dtype, metric, gemm_rt.get());
          ASSERT_TRUE(ss && gs);
          ASSERT_OK(mnemo_store_add(ss.get(), ids.data(), x.data(), dtype, c.n));
          ASSERT_OK(mnemo_store_add(gs.get(), ids.data(), x.data(), dtype, c.n));
          Buf<uint64_t> sid(c.nq * c.k), gid(c.nq * c.k);
          Buf<float> ssc(c.nq * c.k), gsc(c.nq * c.k);
          mt::poison_f32(ssc.data(), c.nq * c.k);
          mt::poison_f32(gsc.data(), c.nq * c.k);
          ASSERT_OK(mnemo_store_search(ss.get(), static_cast<const float*>(q.data()), c.nq, c.k, nullptr, sid.data(),
                                       ssc.data()));
          ASSERT_OK(mnemo_store_search(gs.get(), static_cast<const float*>(q.data()), c.nq, c.k, nullptr, gid.data(),
                                       gsc.data()));
          for (size_t i = 0; i < c.nq; ++i) {
            std::vector<ref::Candidate> cands;
            for (size_t j = 0; j < c.n; ++j) {
              const double r = ref::score(metric, q.row(i), x.row(j), c.dim);
              cands.push_back({ids[j], r, ref::score_tol(metric, q.row(i), x.row(j), c.dim, r)});
            }
            EXPECT_TRUE(mt::check_topk(metric, cands, c.k, sid.data() + i * c.k, ssc.data() + i * c.k))
                << "streaming, query " << i;
            EXPECT_TRUE(mt::check_topk(metric, cands, c.k, gid.data() + i * c.k, gsc.data() + i * c.k))
                << "sgemm, query " << i;
          }
          EXPECT_EQ(std::memcmp(sid.data(), gid.data(), c.nq * c.k * sizeof(uint64_t)), 0) << "ids differ by path";
          EXPECT_EQ(std::memcmp(ssc.data(), gsc.data(), c.nq * c.k * sizeof(float)), 0) << "scores differ by path";
        }
    }
  }
}

TEST_P(SimdTarget, SimilarityAndPairsMatchReference) {
  const int64_t target = GetParam();
  ForcedTarget forced(target);
  auto rng = mt::rng_for_test();
  mt::RuntimePtr rt = cpu_runtime("8", 2);
  ASSERT_NE(device_name(rt.get()).find(hwy::TargetName(target)), std::string::npos);
  for (const size_t dim : mt::awkward_dims())
    for (const int32_t dtype : mt::storage_dtypes())
      for (const int32_t metric : mt::metrics()) {
        SCOPED_TRACE(mt::case_name(dtype, metric, dim));
        const size_t n = 37, nq = 7, P = 301;
        const Matrix t = mt::random_matrix(rng, dtype, n, dim, metric != MNEMO_METRIC_L2SQ);
        const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, nq, dim, metric != MNEMO_METRIC_L2SQ);
        Buf<float> sc(nq * n);
        mt::poison_f32(sc.data(), nq * n);
        ASSERT_OK(mnemo_similarity(rt.get(), metric, static_cast<const float*>(q.data()), nq, t.data(), dtype, n, dim,
                                   sc.data()));
        size_t bad = 0;
        for (size_t i = 0; i < nq; ++i)
          for (size_t j = 0; j < n; ++j) {
            const double r = ref::score(metric, q.row(i), t.row(j), dim);
            if (!(std::fabs(sc[i * n + j] - r) <= ref::score_tol(metric, q.row(i), t.row(j), dim, r)) && bad++ < 3)
              ADD_FAILURE() << "similarity [" << i << ", " << j << "] = " << sc[i * n + j] << ", reference " << r;
          }
        Buf<uint64_t> src(P), tgt(P);
        for (size_t p = 0; p < P; ++p) {
          src[p] = mt::rand_below(rng, n);
          tgt[p] = mt::rand_below(rng, n);
        }
        Buf<float> ps(P);
        mt::poison_f32(ps.data(), P);
        ASSERT_OK(mnemo_score_pairs(rt.get(), metric, t.data(), dtype, n, dim, src.data(), tgt.data(), MNEMO_DTYPE_U64,
                                    P, ps.data()));
        for (size_t p = 0; p < P; ++p) {
          const double r = ref::score(metric, t.row(src[p]), t.row(tgt[p]), dim);
          if (!(std::fabs(ps[p] - r) <= ref::score_tol(metric, t.row(src[p]), t.row(tgt[p]), dim, r)) && bad++ < 3)
            ADD_FAILURE() << "pair " << p << " = " << ps[p] << ", reference " << r;
        }
        EXPECT_EQ(bad, 0u);
      }
}

TEST_P(SimdTarget, NormalisationAndResamplingMatchReference) {
  const int64_t target = GetParam();
  ForcedTarget forced(target);
  auto rng = mt::rng_for_test();
  mt::RuntimePtr rt = cpu_runtime("8", 2);
  ASSERT_NE(device_name(rt.get()).find(hwy::TargetName(target)), std::string::npos);
  for (const size_t dim : mt::awkward_dims()) {
    SCOPED_TRACE("d" + std::to_string(dim));
    const size_t rows = 13;
    const Matrix in = mt::random_matrix(rng, MNEMO_DTYPE_F32, rows, dim);
    Buf<float> out(rows * dim), gamma(dim), beta(dim);
    for (size_t j = 0; j < dim; ++j) {
      gamma[j] = 2.0f * mt::rand_nonzero(rng);
      beta[j] = mt::rand_nonzero(rng);
    }
    size_t bad = 0;
    mt::poison_f32(out.data(), rows * dim);
    ASSERT_OK(mnemo_normalize_rows(rt.get(), in.data(), out.data(), MNEMO_DTYPE_F32, rows, dim));
    const std::vector<double> nw = ref::normalize_rows(in.val, rows, dim);
    for (size_t i = 0; i < rows * dim; ++i) {
      const double tol = 1e-5 * std::fabs(nw[i]) + 1e-9 + ref::rounding_tol(MNEMO_DTYPE_F32, nw[i]);
      if (!(std::fabs(out[i] - nw[i]) <= tol) && bad++ < 3)
        ADD_FAILURE() << "normalize " << i << ": " << out[i] << ", reference " << nw[i];
    }
    mt::poison_f32(out.data(), rows * dim);
    ASSERT_OK(mnemo_layer_norm(rt.get(), in.data(), out.data(), MNEMO_DTYPE_F32, rows, dim, gamma.data(), beta.data(),
                               1e-5f));
    std::vector<double> tol;
    const std::vector<double> lw =
        ref::layer_norm(in.val, rows, dim, gamma.data(), beta.data(), 1e-5, MNEMO_DTYPE_F32, &tol);
    for (size_t i = 0; i < rows * dim; ++i)
      if (!(std::fabs(out[i] - lw[i]) <= tol[i]) && bad++ < 3)
        ADD_FAILURE() << "layer_norm " << i << ": " << out[i] << ", reference " << lw[i];

    // Resampling: 3 rows of 11 samples at 17 targets in and around the range.
    const size_t B = 3, S = 11, T = 17;
    const Matrix data = mt::random_matrix(rng, MNEMO_DTYPE_F32, B * S, dim);
    Buf<float> st(B * S), tt(B * T), ro(B * T * dim);
    std::vector<double> std_(B * S), ttd(B * T);
    for (size_t b = 0; b < B; ++b) {
      float tm = 0.0f;
      for (size_t i = 0; i < S; ++i) st[b * S + i] = (tm += 0.25f + std::fabs(mt::rand_nonzero(rng)));
      for (size_t j = 0; j < T; ++j) tt[b * T + j] = (mt::rand_nonzero(rng) * 0.6f + 0.5f) * tm;
    }
    for (size_t i = 0; i < B * S; ++i) std_[i] = st[i];
    for (size_t i = 0; i < B * T; ++i) ttd[i] = tt[i];
    mt::poison_f32(ro.data(), B * T * dim);
    ASSERT_OK(mnemo_resample(rt.get(), data.data(), MNEMO_DTYPE_F32, B, S, dim, st.data(), tt.data(), MNEMO_DTYPE_F32,
                             T, nullptr, ro.data()));
    const std::vector<ref::ResampleTarget> plan = ref::resample_plan(std_, ttd, B, S, T, {}, {});
    for (size_t b = 0; b < B; ++b)
      for (size_t j = 0; j < T; ++j) {
        const ref::ResampleTarget& p = plan[b * T + j];
        for (size_t d = 0; d < dim; ++d) {
          const double g = ro[(b * T + j) * dim + d];
          const double a = data.row(b * S + p.i)[d];
          if (p.kind == ref::ResampleTarget::kSample) {
            if (g != a && bad++ < 3) ADD_FAILURE() << "resample copy " << b << "," << j << "," << d;
          } else if (p.kind == ref::ResampleTarget::kInterp) {
            const double bb = data.row(b * S + p.i + 1)[d], v = a + p.w * (bb - a);
            if (!(std::fabs(g - v) <= ref::interp_tol(MNEMO_DTYPE_F32, a, bb, v)) && bad++ < 3)
              ADD_FAILURE() << "resample " << b << "," << j << "," << d << ": " << g << ", reference " << v;
          }
        }
      }
    EXPECT_EQ(bad, 0u);
  }
}

// Outputs of 64 MiB and more are written with non-temporal stores after a
// scalar head that aligns them: odd dims and an output 16 bytes past a
// 64-byte boundary put every row at a different alignment.
TEST_P(SimdTarget, LargeOutputsMatchReference) {
  const int64_t target = GetParam();
  ForcedTarget forced(target);
  auto rng = mt::rng_for_test();
  mt::RuntimePtr rt = cpu_runtime("8", 2);
  const size_t rows = 22000, dim = 769, n = rows * dim;  // 67.7 MB
  Buf<float> in(n), out(n + 16);
  for (size_t i = 0; i < n; ++i) in[i] = mt::rand_nonzero(rng);
  float* o = out.data() + 4;  // 16 bytes past the 64-byte aligned base
  Buf<float> gamma(dim), beta(dim);
  for (size_t j = 0; j < dim; ++j) {
    gamma[j] = 2.0f * mt::rand_nonzero(rng);
    beta[j] = mt::rand_nonzero(rng);
  }
  size_t bad = 0;
  for (const bool layer : {false, true}) {
    mt::poison_f32(o, n);
    if (layer)
      ASSERT_OK(mnemo_layer_norm(rt.get(), in.data(), o, MNEMO_DTYPE_F32, rows, dim, gamma.data(), beta.data(), 1e-5f));
    else
      ASSERT_OK(mnemo_normalize_rows(rt.get(), in.data(), o, MNEMO_DTYPE_F32, rows, dim));
    // Every row is written; the reference is checked on a sample of rows.
    for (size_t i = 0; i < n; ++i)
      if (std::isnan(o[i]) && bad++ < 3) ADD_FAILURE() << "element " << i << " not written";
    for (size_t r = 0; r < rows; r += 97) {
      const std::vector<double> x(in.data() + r * dim, in.data() + (r + 1) * dim);
      std::vector<double> tol;
      const std::vector<double> want =
          layer ? ref::layer_norm(x, 1, dim, gamma.data(), beta.data(), 1e-5, MNEMO_DTYPE_F32, &tol)
                : ref::normalize_rows(x, 1, dim);
      for (size_t j = 0; j < dim; ++j) {
        const double t = layer ? tol[j] : 1e-5 * std::fabs(want[j]) + 1e-9;
        if (!(std::fabs(o[r * dim + j] - want[j]) <= t) && bad++ < 3)
          ADD_FAILURE() << (layer ? "layer_norm" : "normalize") << " row " << r << " [" << j << "] " << o[r * dim + j]
                        << ", reference " << want[j];
      }
    }
  }
  // Resampling to a 64 MiB output: 2 rows of 3 samples at 1 time each.
  const size_t B = 2, S = 3, T = 11000, D = 769;
  Buf<float> data(B * S * D), st(B * S), tt(B * T);
  for (size_t i = 0; i < B * S * D; ++i) data[i] = mt::rand_nonzero(rng);
  for (size_t b = 0; b < B; ++b) {
    for (size_t i = 0; i < S; ++i) st[b * S + i] = static_cast<float>(i);
    for (size_t j = 0; j < T; ++j) tt[b * T + j] = 1.0f + mt::rand_nonzero(rng) * 0.999f;
  }
  mt::poison_f32(o, B * T * D);
  ASSERT_OK(mnemo_resample(rt.get(), data.data(), MNEMO_DTYPE_F32, B, S, D, st.data(), tt.data(), MNEMO_DTYPE_F32, T,
                           nullptr, o));
  for (size_t b = 0; b < B; ++b)
    for (size_t j = 0; j < T; ++j) {
      const double t = tt[b * T + j];
      const size_t i = t < 1.0 ? 0 : 1;
      const double w = t - static_cast<double>(i);
      for (size_t d = 0; d < D; ++d) {
        const double a = data[(b * S + i) * D + d], c = data[(b * S + i + 1) * D + d], v = a + w * (c - a);
        const double g = o[(b * T + j) * D + d];
        if (!(std::fabs(g - v) <= ref::interp_tol(MNEMO_DTYPE_F32, a, c, v)) && bad++ < 3)
          ADD_FAILURE() << "resample " << b << "," << j << "," << d << ": " << g << ", reference " << v;
      }
    }
  EXPECT_EQ(bad, 0u);
}

// The non-finite check of large inputs runs in parts on several threads and
// must still name the first offending element, in every dtype, at the size
// of a store's block and of a batch of queries.
TEST_P(SimdTarget, NonFiniteCheckNamesTheFirstInLargeInputs) {
  ForcedTarget forced(GetParam());
  mt::RuntimePtr rt = cpu_runtime("8", 2);
  constexpr size_t dim = 768;
  struct Bad {
    size_t at;
    double v;
  };
  // rows of finite values with `bad` written in; the first of them is named.
  auto expect_first = [&](size_t rows, const std::vector<Bad>& bad, size_t first) {
    const size_t n = rows * dim;
    for (const int32_t dtype : mt::storage_dtypes()) {
      SCOPED_TRACE(mt::dtype_name(dtype) + std::string(", rows ") + std::to_string(rows));
      const size_t es = mt::dtype_size(dtype);
      Buf<unsigned char> in(n * es), out(n * es);
      for (size_t i = 0; i < n; ++i) ref::store(in.data(), dtype, i, 0.5 + static_cast<double>(i % 7));
      for (const Bad& b : bad) ref::store(in.data(), dtype, b.at, b.v);
      out.fill_bytes(0x5A);
      const std::vector<unsigned char> before = out.snapshot();
      EXPECT_TRUE(mt::failed_with(mnemo_normalize_rows(rt.get(), in.data(), out.data(), dtype, rows, dim),
                                  MNEMO_E_NON_FINITE, "in"));
      EXPECT_TRUE(mt::names_number(mt::last_error(), first)) << mt::last_error();
      EXPECT_TRUE(out.same_as(before)) << "output written despite the error";
    }
  };
  // A store's block: above 2^22 elements.
  const size_t rows = 5463;
  expect_first(rows, {{3000001, std::nan("")}, {2100003, HUGE_VAL}, {rows * dim - 1, -HUGE_VAL}}, 2100003);
  // A batch of queries (1.5-3 MB, split in parts from 1 MB), the later
  // offender in a later part.
  expect_first(1000, {{700001, std::nan("")}, {300007, -HUGE_VAL}}, 300007);
}

INSTANTIATE_TEST_SUITE_P(Compiled, SimdTarget, ::testing::ValuesIn(targets()),
                         [](const ::testing::TestParamInfo<int64_t>& i) {
                           return std::string(hwy::TargetName(i.param));
                         });

}  // namespace
