// Library information, memory, status names, last-error rules and runtimes:
// creation options, backends, reports, and validation switched off.
#include <cmath>
#include <limits>
#include <thread>

#include "store_model.h"
#include "support.h"

namespace {

using mt::Buf;
using mt::Matrix;

TEST(Info, VersionsAgreeWithHeader) {
  const std::string v = std::to_string(MNEMO_VERSION_MAJOR) + "." + std::to_string(MNEMO_VERSION_MINOR) + "." +
                        std::to_string(MNEMO_VERSION_PATCH);
  ASSERT_NE(mnemo_version(), nullptr);
  EXPECT_EQ(std::string(mnemo_version()), v);
  EXPECT_EQ(mnemo_abi_version(), static_cast<uint32_t>(MNEMO_ABI_VERSION));
}

TEST(Info, BuildInfoIsOneLineWithTheVersion) {
  const char* b = mnemo_build_info();
  ASSERT_NE(b, nullptr);
  const std::string s = b;
  EXPECT_FALSE(s.empty());
  EXPECT_EQ(s.find('\n'), std::string::npos) << s;
  EXPECT_NE(s.find(mnemo_version()), std::string::npos) << s;
  EXPECT_EQ(mnemo_build_info(), b);  // static text
}

TEST(Info, StatusNames) {
  const char* names[] = {"MNEMO_OK",           "MNEMO_E_INVALID_ARGUMENT", "MNEMO_E_NULL_POINTER",
                         "MNEMO_E_MISALIGNED", "MNEMO_E_OVERFLOW",         "MNEMO_E_OUT_OF_RANGE",
                         "MNEMO_E_NON_FINITE", "MNEMO_E_NOT_SORTED",       "MNEMO_E_DTYPE",
                         "MNEMO_E_SHAPE",      "MNEMO_E_OUT_OF_MEMORY",    "MNEMO_E_BACKEND_UNAVAILABLE",
                         "MNEMO_E_BACKEND",    "MNEMO_E_NOT_FOUND",        "MNEMO_E_IO",
                         "MNEMO_E_CORRUPT",    "MNEMO_E_UNSUPPORTED",      "MNEMO_E_INTERNAL"};
  static_assert(MNEMO_E_INTERNAL == 17, "codes are pinned");
  for (int32_t s = 0; s <= MNEMO_E_INTERNAL; ++s) {
    ASSERT_NE(mnemo_status_name(s), nullptr);
    EXPECT_STREQ(mnemo_status_name(s), names[s]);
  }
  for (const int32_t s : {-1, 18, 1000, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()}) {
    ASSERT_NE(mnemo_status_name(s), nullptr);
    EXPECT_STREQ(mnemo_status_name(s), "MNEMO_E_UNKNOWN") << s;
  }
}

TEST(Memory, AllocIsAligned) {
  for (const uint64_t bytes :
       {uint64_t{1}, uint64_t{3}, uint64_t{16}, uint64_t{17}, uint64_t{4096}, uint64_t{1} << 20}) {
    void* p = nullptr;
    ASSERT_OK(mnemo_alloc(bytes, &p));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % MNEMO_ALIGNMENT, 0u) << bytes;
    std::memset(p, 0x5A, bytes);  // the whole size is usable
    mnemo_free(p);
  }
  mnemo_free(nullptr);
}

// Messages are per thread; successful calls leave them alone.
TEST(LastError, PerThreadAndKeptBySuccess) {
  EXPECT_NE(mnemo_store_count(nullptr, nullptr), MNEMO_OK);
  const std::string mine = mt::last_error();
  ASSERT_FALSE(mine.empty());

  std::string fresh = "unset", other;
  std::thread t([&] {
    fresh = mt::last_error();  // nothing failed on this thread yet
    void* p = nullptr;
    EXPECT_EQ(mnemo_alloc(0, &p), MNEMO_E_INVALID_ARGUMENT);
    other = mt::last_error();
  });
  t.join();
  EXPECT_EQ(fresh, "");
  EXPECT_FALSE(other.empty());
  EXPECT_EQ(mt::last_error(), mine);

  // Successful calls do not clear it.
  void* p = nullptr;
  ASSERT_OK(mnemo_alloc(32, &p));
  mnemo_free(p);
  (void)mnemo_version();
  uint64_t n = 0;
  auto s = mt::make_store(3, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
  ASSERT_TRUE(s);
  EXPECT_OK(mnemo_store_count(s.get(), &n));
  EXPECT_EQ(mt::last_error(), mine);
}

// ---- runtime options and creation -------------------------------------------------

TEST(Runtime, OptionsDefaults) {
  const mnemo_runtime_options o = mnemo_runtime_options_default();
  EXPECT_EQ(o.struct_size, sizeof(mnemo_runtime_options));
  EXPECT_EQ(o.backend, MNEMO_BACKEND_AUTO);
  EXPECT_EQ(o.precision, MNEMO_PRECISION_EXACT);
  EXPECT_EQ(o.device_id, 0);
  EXPECT_EQ(o.num_threads, 0u);
  EXPECT_EQ(o.validate, 1u);
  EXPECT_EQ(o.workspace_bytes, 0u);
}

mnemo_runtime_report report_of(const mnemo_runtime* r) {
  mnemo_runtime_report info;
  std::memset(&info, 0xAB, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(mnemo_runtime_info(r, &info));
  return info;
}

bool terminated(const char* s, size_t cap) { return std::memchr(s, '\0', cap) != nullptr; }

// Fields every report must satisfy.
void expect_sane_report(const mnemo_runtime_report& i) {
  EXPECT_EQ(i.struct_size, sizeof(mnemo_runtime_report));
  EXPECT_TRUE(i.backend_active == MNEMO_BACKEND_CPU || i.backend_active == MNEMO_BACKEND_CUDA) << i.backend_active;
  EXPECT_TRUE(i.precision == MNEMO_PRECISION_EXACT || i.precision == MNEMO_PRECISION_FAST);
  EXPECT_GE(i.num_threads, 1u);
  EXPECT_TRUE(i.cuda_available == 0 || i.cuda_available == 1);
  EXPECT_EQ(i.reserved0, 0u);
  ASSERT_TRUE(terminated(i.device_name, sizeof i.device_name));
  ASSERT_TRUE(terminated(i.reason, sizeof i.reason));
  EXPECT_GT(std::strlen(i.device_name), 0u);
  EXPECT_GT(std::strlen(i.reason), 0u);
  if (i.backend_active == MNEMO_BACKEND_CPU) {
    EXPECT_EQ(i.device_id, -1);
  } else {
    EXPECT_GE(i.device_id, 0);
  }
}

TEST(Runtime, CreateWithNullOptions) {
  mnemo_runtime* r = nullptr;
  ASSERT_OK(mnemo_runtime_create(nullptr, &r));
  mt::RuntimePtr rt(r);
  const mnemo_runtime_report i = report_of(rt.get());
  expect_sane_report(i);
  EXPECT_EQ(i.backend_requested, MNEMO_BACKEND_AUTO);
  EXPECT_EQ(i.precision, MNEMO_PRECISION_EXACT);
  mnemo_runtime_destroy(nullptr);
}

TEST(Runtime, CpuBackendWorks) {
  auto rng = mt::rng_for_test();
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CPU;
  o.num_threads = 1;
  mt::RuntimePtr rt = mt::make_runtime(o);
  ASSERT_TRUE(rt);
  const mnemo_runtime_report i = report_of(rt.get());
  expect_sane_report(i);
  EXPECT_EQ(i.backend_requested, MNEMO_BACKEND_CPU);
  EXPECT_EQ(i.backend_active, MNEMO_BACKEND_CPU);
  EXPECT_EQ(i.num_threads, 1u);

  const Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 5);
  Buf<float> s(4);
  ASSERT_OK(mnemo_similarity(rt.get(), MNEMO_METRIC_COSINE, static_cast<const float*>(q.data()), 2, q.data(),
                             MNEMO_DTYPE_F32, 2, 5, s.data()));
  EXPECT_NEAR(s[0], 1.0f, 1e-5f);
  EXPECT_NEAR(s[3], 1.0f, 1e-5f);
}

// CUDA is an error where no GPU is usable (never a silent fallback), and
// works where one is.
TEST(Runtime, CudaBackendAvailableOrClearlyRefused) {
  mnemo_runtime* probe = nullptr;
  ASSERT_OK(mnemo_runtime_create(nullptr, &probe));
  const bool gpu = report_of(probe).cuda_available == 1;
  mnemo_runtime_destroy(probe);

  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CUDA;
  mnemo_runtime* const sentinel = reinterpret_cast<mnemo_runtime*>(uintptr_t{0x5EED});
  mnemo_runtime* r = sentinel;
  const mnemo_status st = mnemo_runtime_create(&o, &r);
  if (!gpu) {
    EXPECT_TRUE(mt::failed_with(st, MNEMO_E_BACKEND_UNAVAILABLE));
    EXPECT_EQ(r, sentinel);
    return;
  }
  ASSERT_EQ(st, MNEMO_OK) << mt::last_error();
  mt::RuntimePtr rt(r);
  const mnemo_runtime_report i = report_of(rt.get());
  expect_sane_report(i);
  EXPECT_EQ(i.backend_active, MNEMO_BACKEND_CUDA);
  // A device that does not exist.
  o.device_id = 4096;
  mnemo_runtime* bad = sentinel;
  EXPECT_TRUE(mt::failed_with(mnemo_runtime_create(&o, &bad), MNEMO_E_OUT_OF_RANGE, "device_id"));
  EXPECT_EQ(bad, sentinel);
}

// AUTO without a usable GPU runs on the CPU and says why.
TEST(Runtime, AutoReportsItsChoice) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_AUTO;
  mt::RuntimePtr rt = mt::make_runtime(o);
  ASSERT_TRUE(rt);
  const mnemo_runtime_report i = report_of(rt.get());
  expect_sane_report(i);
  EXPECT_EQ(i.backend_requested, MNEMO_BACKEND_AUTO);
  if (i.cuda_available == 0) {
    EXPECT_EQ(i.backend_active, MNEMO_BACKEND_CPU);
  }
}

TEST(Runtime, InfoWritesOnlyTheKnownPrefix) {
  // A caller built against a newer header passes a larger struct.
  struct Bigger {
    mnemo_runtime_report r;
    unsigned char tail[64];
  } big;
  std::memset(&big, 0xCD, sizeof big);
  big.r.struct_size = sizeof big;
  ASSERT_OK(mnemo_runtime_info(mt::rt(), &big.r));
  for (size_t i = 0; i < sizeof big.tail; ++i) ASSERT_EQ(big.tail[i], 0xCD) << i;
  EXPECT_GT(std::strlen(big.r.reason), 0u);
}

TEST(Runtime, BadOptionsRefused) {
  mnemo_runtime* const sentinel = reinterpret_cast<mnemo_runtime*>(uintptr_t{0x5EED});
  auto refused = [&](const mnemo_runtime_options& o, const char* arg) {
    mnemo_runtime* r = sentinel;
    EXPECT_TRUE(mt::failed_with(mnemo_runtime_create(&o, &r), MNEMO_E_INVALID_ARGUMENT, arg));
    EXPECT_EQ(r, sentinel);
  };
  const mnemo_runtime_options d = mnemo_runtime_options_default();
  for (const uint32_t size : {0u, 4u, 12u}) {
    mnemo_runtime_options o = d;
    o.struct_size = size;
    refused(o, "struct_size");
  }
  for (const int32_t b : {-1, 3, 77}) {
    mnemo_runtime_options o = d;
    o.backend = b;
    refused(o, "backend");
  }
  for (const int32_t p : {-1, 2, 9}) {
    mnemo_runtime_options o = d;
    o.precision = p;
    refused(o, "precision");
  }
  for (const uint32_t v : {2u, 0xFFFFFFFFu}) {
    mnemo_runtime_options o = d;
    o.validate = v;
    refused(o, "validate");
  }
  EXPECT_TRUE(mt::failed_with(mnemo_runtime_create(&d, nullptr), MNEMO_E_NULL_POINTER, "out"));
}

// validate = 0 lets NaN in, but a search never returns a NaN score: vectors
// scoring NaN are skipped and the slots they would take are padding.
TEST(Runtime, ValidationOffNeverReturnsNaNScores) {
  auto rng = mt::rng_for_test();
  mnemo_runtime_options o = mt::test_options();
  o.validate = 0;
  mt::RuntimePtr rt = mt::make_runtime(o);
  ASSERT_TRUE(rt);
  const float nan = std::numeric_limits<float>::quiet_NaN();

  for (const int32_t metric : mt::metrics()) {
    auto s = mt::make_store(5, MNEMO_DTYPE_F32, metric, rt.get());
    ASSERT_TRUE(s);
    Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 6, 5);
    m.set(2, 3, nan);  // id 12 scores NaN against anything
    ASSERT_OK(mt::store_add(s.get(), {10, 11, 12, 13, 14, 15}, m));

    Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 5);
    q.set(1, 0, nan);  // every score of query 1 is NaN
    mt::Results r;
    ASSERT_OK(mt::store_search(s.get(), q, 6, nullptr, &r));
    for (size_t j = 0; j < 6; ++j) {
      const uint64_t id = r.row_ids(0)[j];
      const float sc = r.row_scores(0)[j];
      if (j < 5) {
        EXPECT_NE(id, 12u);
        EXPECT_NE(id, MNEMO_NO_ID);
        EXPECT_FALSE(std::isnan(sc)) << "slot " << j;
      } else {
        EXPECT_EQ(id, MNEMO_NO_ID);
        EXPECT_TRUE(std::isnan(sc));
      }
      EXPECT_EQ(r.row_ids(1)[j], MNEMO_NO_ID) << "query of NaN, slot " << j;
      EXPECT_TRUE(std::isnan(r.row_scores(1)[j]));
    }
  }

  // The raw matrix and normalisation accept NaN without validation.
  Matrix q = mt::random_matrix(rng, MNEMO_DTYPE_F32, 2, 3);
  q.set(0, 1, nan);
  Buf<float> sc(4);
  EXPECT_OK(mnemo_similarity(rt.get(), MNEMO_METRIC_DOT, static_cast<const float*>(q.data()), 2, q.data(),
                             MNEMO_DTYPE_F32, 2, 3, sc.data()));
  EXPECT_FALSE(std::isnan(sc[3]));  // the finite pair is still right
  Buf<float> out(6);
  EXPECT_OK(mnemo_normalize_rows(rt.get(), q.data(), out.data(), MNEMO_DTYPE_F32, 2, 3));
}

// Two runtimes side by side, each with its own stores.
TEST(Runtime, SeveralRuntimesCoexist) {
  auto rng = mt::rng_for_test();
  mt::RuntimePtr a = mt::make_runtime(mt::test_options());
  mt::RuntimePtr b = mt::make_runtime(mt::test_options());
  ASSERT_TRUE(a && b);
  auto sa = mt::make_store(5, MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ, a.get());
  auto sb = mt::make_store(5, MNEMO_DTYPE_F32, MNEMO_METRIC_L2SQ, b.get());
  ASSERT_TRUE(sa && sb);
  const Matrix m = mt::random_matrix(rng, MNEMO_DTYPE_F32, 4, 5);
  ASSERT_OK(mt::store_add(sa.get(), {1, 2, 3, 4}, m));
  ASSERT_OK(mt::store_add(sb.get(), {1, 2, 3, 4}, m));
  mt::Results ra, rb;
  ASSERT_OK(mt::store_search(sa.get(), m, 4, nullptr, &ra));
  ASSERT_OK(mt::store_search(sb.get(), m, 4, nullptr, &rb));
  EXPECT_TRUE(mt::same_results(ra, rb));
}

}  // namespace
