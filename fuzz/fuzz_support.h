// Shared pieces of the fuzz harnesses: aligned scratch buffers with room for
// misaligned views, the runtimes under test, values drawn to hurt, and the
// failure report (abort, so libFuzzer keeps the input as a crash file).
#pragma once

#include <FuzzedDataProvider.h>
#include <mnemo.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace fz {

// Prints "mnemo fuzz: <what>" and aborts: libFuzzer saves the input, the
// replay main has already named the file.
[[noreturn]] void fail(const std::string& what);
#define FZ_CHECK(cond, msg)                                                                                  \
  do {                                                                                                       \
    if (!(cond)) ::fz::fail(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " #cond ": " + (msg)); \
  } while (0)

// True for the pinned mnemo_status values.
bool defined_status(mnemo_status s);
std::string status_text(mnemo_status s);  // "5 (MNEMO_E_OUT_OF_RANGE): <last error>"

// A MNEMO_ALIGNMENT-aligned byte buffer of `bytes` plus slack past the end, so
// a view shifted by a few bytes still lies inside the allocation.
class Buf {
 public:
  Buf() = default;
  explicit Buf(size_t bytes, unsigned char fill = 0xA5);
  ~Buf() { std::free(p_); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  Buf(Buf&& o) noexcept { swap(o); }
  Buf& operator=(Buf&& o) noexcept {
    swap(o);
    return *this;
  }
  unsigned char* data() { return p_; }
  const unsigned char* data() const { return p_; }
  template <class T>
  T* as() {
    return reinterpret_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }
  // Every byte of the allocation, slack included.
  std::vector<unsigned char> snapshot() const { return std::vector<unsigned char>(p_, p_ + alloc_); }
  bool same_as(const std::vector<unsigned char>& s) const {
    return s.size() == alloc_ && (alloc_ == 0 || std::memcmp(s.data(), p_, alloc_) == 0);
  }

 private:
  void swap(Buf& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    std::swap(alloc_, o.alloc_);
  }
  unsigned char* p_ = nullptr;
  size_t bytes_ = 0, alloc_ = 0;
};

// How a harness passes a data pointer: the real one, NULL, or shifted off the
// 16-byte alignment by `shift` (a multiple of the element size, so the view
// stays naturally aligned for its type).
enum class PtrMode { good, null, misaligned };
PtrMode pick_mode(FuzzedDataProvider& fdp, int bad_percent);
template <class T>
T* view(Buf& b, PtrMode m) {
  if (m == PtrMode::null) return nullptr;
  const size_t shift = m == PtrMode::misaligned ? (sizeof(T) >= 8 ? 8 : sizeof(T) == 4 ? 4 : 2) : 0;
  return reinterpret_cast<T*>(b.data() + shift);
}

// ---- runtimes ----------------------------------------------------------------

// A CPU runtime (validation on or off), one per process. MNEMO_FUZZ_THREADS
// sets its thread count (default 1: fuzzing runs one process per core).
mnemo_runtime* cpu_runtime(bool validate = true);
// A CUDA runtime of the given precision, or null where the CUDA backend does
// not load; with MNEMO_FUZZ_REQUIRE_CUDA=1 a missing backend is fatal.
mnemo_runtime* cuda_runtime(int32_t precision);
// Every runtime to check numerics on: CPU, then CUDA EXACT and FAST if present.
struct Backend {
  const char* name;
  mnemo_runtime* rt;
  bool fast;
};
const std::vector<Backend>& backends();

// ---- values ------------------------------------------------------------------

// A finite float drawn to hurt: huge and tiny magnitudes, subnormals, values
// at f16/bf16 rounding boundaries, exact small integers, ordinary [-1, 1].
float hurt_float(FuzzedDataProvider& fdp);
// A float that may also be NaN or +-Inf (about one in `odds`).
float maybe_non_finite(FuzzedDataProvider& fdp, int odds);
// f32 bit patterns of the storage dtypes; `v` is rounded to the dtype.
uint16_t to_f16(float v);
uint16_t to_bf16(float v);
size_t dtype_bytes(int32_t dtype);  // 0 for an unknown dtype
// A dtype argument: usually valid for the role, sometimes any int32.
int32_t pick_dtype(FuzzedDataProvider& fdp, const std::vector<int32_t>& valid, int bad_percent);
int32_t pick_metric(FuzzedDataProvider& fdp, int bad_percent);

// Writes element i of a storage-dtype array from a float (rounded).
void put_elem(void* base, int32_t dtype, size_t i, float v);
// Element i of an array of `dtype` (F32, F16, BF16, F64) as a double.
double get_elem(const void* base, int32_t dtype, size_t i);

// Where scratch files go: $TMPDIR or /tmp, one folder per process.
const std::string& scratch_dir();

}  // namespace fz
