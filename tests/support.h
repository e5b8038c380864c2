// Shared helpers of the mnemo test suite: aligned buffers, runtimes, seeded
// random inputs and status expectations.
#pragma once

#include <gtest/gtest.h>
#include <mnemo.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace mt {

// Aligned host buffer. It holds 16 spare bytes past the last element so that a
// misaligned view (base + 4 bytes) still covers every element: a failing call
// on that view must not read or write out of bounds either.
template <class T>
class Buf {
 public:
  Buf() = default;
  explicit Buf(size_t n, unsigned char fill = 0xAB) : n_(n) {
    bytes_ = ((n * sizeof(T) + 16) + 63) / 64 * 64;
    p_ = static_cast<T*>(std::aligned_alloc(64, bytes_));
    if (p_ == nullptr) throw std::bad_alloc();
    std::memset(static_cast<void*>(p_), fill, bytes_);
  }
  ~Buf() { std::free(p_); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  Buf(Buf&& o) noexcept : p_(o.p_), n_(o.n_), bytes_(o.bytes_) {
    o.p_ = nullptr;
    o.n_ = o.bytes_ = 0;
  }
  Buf& operator=(Buf&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  // The same memory shifted by 4 bytes: never MNEMO_ALIGNMENT aligned.
  T* misaligned() { return reinterpret_cast<T*>(reinterpret_cast<char*>(p_) + 4); }
  void fill_bytes(unsigned char b) { std::memset(static_cast<void*>(p_), b, bytes_); }
  // Every byte of the allocation, spare bytes included.
  std::vector<unsigned char> snapshot() const {
    const auto* b = reinterpret_cast<const unsigned char*>(p_);
    return std::vector<unsigned char>(b, b + bytes_);
  }
  bool same_as(const std::vector<unsigned char>& snap) const {
    return snap.size() == bytes_ && std::memcmp(snap.data(), p_, bytes_) == 0;
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
  size_t bytes_ = 0;
};

// ---- handles ---------------------------------------------------------------

struct RuntimeDeleter {
  void operator()(mnemo_runtime* rt) const { mnemo_runtime_destroy(rt); }
};
struct StoreDeleter {
  void operator()(mnemo_store* s) const { mnemo_store_destroy(s); }
};
using RuntimePtr = std::unique_ptr<mnemo_runtime, RuntimeDeleter>;
using StorePtr = std::unique_ptr<mnemo_store, StoreDeleter>;

// Backend of the shared test runtime: MNEMO_TEST_BACKEND = cpu | cuda | auto
// (default auto, which is the CPU on a machine without a usable GPU).
int32_t test_backend();
// Options of the shared runtime (backend from the environment).
mnemo_runtime_options test_options();
// One runtime per process, created on first use and destroyed at exit.
mnemo_runtime* rt();
// A fresh runtime with the given options; fails the test if creation fails.
RuntimePtr make_runtime(const mnemo_runtime_options& opts);
// A CUDA runtime with default options, or null with the reason in *why (for
// suites that skip where no GPU is usable).
RuntimePtr cuda_runtime_or_why(std::string* why);
// A store on rt(); fails the test (returns null) if creation fails.
StorePtr make_store(uint64_t dim, int32_t dtype, int32_t metric, mnemo_runtime* runtime = nullptr);

// ---- randomness ------------------------------------------------------------

// Generator seeded from the running test's full name, so each test draws its
// own inputs; MNEMO_TEST_SEED (an integer) perturbs every seed.
std::mt19937_64 rng_for_test();
// Uniform in [-1, 1] without exact zeros.
float rand_nonzero(std::mt19937_64& rng);
uint64_t rand_below(std::mt19937_64& rng, uint64_t n);
// n distinct random ids below 2^63, in the order drawn.
std::vector<uint64_t> distinct_ids(std::mt19937_64& rng, size_t n);

// ---- status expectations ---------------------------------------------------

std::string last_error();
std::string status_str(mnemo_status s);
// True when `name` occurs in `text` as a whole identifier (no identifier
// character on either side), so "src" is not found inside "src_times".
bool names_identifier(const std::string& text, const std::string& name);
// True when the decimal `value` occurs in `text` with no digit on either side.
bool names_number(const std::string& text, uint64_t value);

// Checks `got == want`, that mnemo_last_error() is non-empty, and when `arg`
// is given that the message names it as an identifier.
::testing::AssertionResult failed_with(mnemo_status got, mnemo_status want, const char* arg = nullptr);

#define EXPECT_OK(call)                                                                                 \
  do {                                                                                                  \
    const mnemo_status st_ = (call);                                                                    \
    EXPECT_EQ(st_, MNEMO_OK) << #call << " -> " << ::mt::status_str(st_) << ": " << ::mt::last_error(); \
  } while (0)
#define ASSERT_OK(call)                                                                                 \
  do {                                                                                                  \
    const mnemo_status st_ = (call);                                                                    \
    ASSERT_EQ(st_, MNEMO_OK) << #call << " -> " << ::mt::status_str(st_) << ": " << ::mt::last_error(); \
  } while (0)

// ---- dtypes ----------------------------------------------------------------

size_t dtype_size(int32_t dtype);
const char* dtype_name(int32_t dtype);
const char* metric_name(int32_t metric);

// A [rows x dim] matrix stored in `dtype` (F32, F16 or BF16) together with the
// float64 values of what is actually stored (after rounding to the dtype).
struct Matrix {
  int32_t dtype = MNEMO_DTYPE_F32;
  size_t rows = 0, dim = 0;
  Buf<unsigned char> raw;
  std::vector<double> val;

  Matrix() = default;
  Matrix(int32_t dtype, size_t rows, size_t dim);
  const void* data() const { return raw.data(); }
  void* data() { return raw.data(); }
  const double* row(size_t i) const { return val.data() + i * dim; }
  // Stores v rounded to nearest even in the dtype.
  void set(size_t i, size_t j, float v);
  // Copies row `from` of `src` (same dtype and dim) bit for bit into row `to`.
  void copy_row(size_t to, const Matrix& src, size_t from);
};

// Random rows with entries in [-1, 1] (never zero); unit rows are normalised
// in f32 before rounding to the dtype.
Matrix random_matrix(std::mt19937_64& rng, int32_t dtype, size_t rows, size_t dim, bool unit_rows = false);

// Quiet-NaN bit patterns used to poison outputs: an element still holding one
// after a successful call was never written.
constexpr uint32_t kPoisonF32 = 0x7FC0DEADu;
constexpr uint16_t kPoisonF16 = 0x7E5Au;
constexpr uint16_t kPoisonBF16 = 0x7FDAu;
void poison(void* data, int32_t dtype, size_t count);
void poison_f32(float* data, size_t count);

inline const std::vector<size_t>& awkward_dims() {
  static const std::vector<size_t> d = {1, 3, 5, 127, 768, 1536};
  return d;
}

}  // namespace mt

namespace mt {

// "F16_Cosine_d127": a readable gtest parameter name.
std::string case_name(int32_t dtype, int32_t metric, size_t dim);

inline const std::vector<int32_t>& storage_dtypes() {
  static const std::vector<int32_t> d = {MNEMO_DTYPE_F32, MNEMO_DTYPE_F16, MNEMO_DTYPE_BF16};
  return d;
}
inline const std::vector<int32_t>& metrics() {
  static const std::vector<int32_t> m = {MNEMO_METRIC_COSINE, MNEMO_METRIC_DOT, MNEMO_METRIC_L2SQ};
  return m;
}

}  // namespace mt
