#include "fuzz_support.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "reference.h"

namespace fz {

void fail(const std::string& what) {
  std::fprintf(stderr, "mnemo fuzz: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

bool defined_status(mnemo_status s) { return s >= MNEMO_OK && s <= MNEMO_E_INTERNAL; }

std::string status_text(mnemo_status s) {
  const char* last = mnemo_last_error();
  return std::to_string(s) + " (" + mnemo_status_name(s) + "): " + (last ? last : "<NULL>");
}

Buf::Buf(size_t bytes, unsigned char fill) : bytes_(bytes) {
  alloc_ = (bytes + 16 + 63) / 64 * 64;
  p_ = static_cast<unsigned char*>(std::aligned_alloc(64, alloc_));
  if (p_ == nullptr) fail("out of host memory for a scratch buffer");
  std::memset(p_, fill, alloc_);
}

PtrMode pick_mode(FuzzedDataProvider& fdp, int bad_percent) {
  const int r = fdp.ConsumeIntegralInRange<int>(0, 99);
  if (r >= bad_percent) return PtrMode::good;
  return (r & 1) ? PtrMode::null : PtrMode::misaligned;
}

namespace {

struct RuntimeHolder {
  mnemo_runtime* rt = nullptr;
  ~RuntimeHolder() { mnemo_runtime_destroy(rt); }
};

uint32_t env_threads() {
  const char* e = std::getenv("MNEMO_FUZZ_THREADS");
  return e ? static_cast<uint32_t>(std::strtoul(e, nullptr, 10)) : 1u;
}

bool require_cuda() {
  const char* e = std::getenv("MNEMO_FUZZ_REQUIRE_CUDA");
  return e && std::strcmp(e, "1") == 0;
}

}  // namespace

mnemo_runtime* cpu_runtime(bool validate) {
  static RuntimeHolder holders[2];
  RuntimeHolder& h = holders[validate ? 1 : 0];
  if (h.rt == nullptr) {
    mnemo_runtime_options o = mnemo_runtime_options_default();
    o.backend = MNEMO_BACKEND_CPU;
    o.num_threads = env_threads();
    o.validate = validate ? 1 : 0;
    const mnemo_status st = mnemo_runtime_create(&o, &h.rt);
    if (st != MNEMO_OK) fail("cannot create a CPU runtime: " + status_text(st));
  }
  return h.rt;
}

mnemo_runtime* cuda_runtime(int32_t precision) {
  static RuntimeHolder holders[2];
  static bool tried[2] = {false, false};
  const int i = precision == MNEMO_PRECISION_FAST ? 1 : 0;
  if (!tried[i]) {
    tried[i] = true;
    mnemo_runtime_options o = mnemo_runtime_options_default();
    o.backend = MNEMO_BACKEND_CUDA;
    o.precision = precision;
    o.num_threads = env_threads();
    const mnemo_status st = mnemo_runtime_create(&o, &holders[i].rt);
    if (st != MNEMO_OK) {
      holders[i].rt = nullptr;
      if (require_cuda()) fail("MNEMO_FUZZ_REQUIRE_CUDA=1 but the CUDA backend is unavailable: " + status_text(st));
    }
  }
  return holders[i].rt;
}

const std::vector<Backend>& backends() {
  static const std::vector<Backend> list = [] {
    std::vector<Backend> b{{"cpu", cpu_runtime(true), false}};
    if (mnemo_runtime* r = cuda_runtime(MNEMO_PRECISION_EXACT)) b.push_back({"cuda", r, false});
    if (mnemo_runtime* r = cuda_runtime(MNEMO_PRECISION_FAST)) b.push_back({"cuda-fast", r, true});
    std::fprintf(stderr, "mnemo fuzz: backends:");
    for (const auto& x : b) std::fprintf(stderr, " %s", x.name);
    std::fprintf(stderr, "\n");
    return b;
  }();
  return list;
}

namespace {

// A normal float 2^e x 1.m from its fields, e in [-126, 127]: finite by
// construction (no rounding step can carry it past FLT_MAX, as 1 + p could).
// The 23 mantissa bits are the top of a 32-bit draw and the exponent is drawn
// after it, the bytes and the order the earlier generator consumed under
// clang (the fuzzing compiler), so corpus inputs keep their values.
float normal_from_fields(FuzzedDataProvider& fdp, int lo_exp, int hi_exp) {
  const uint32_t mantissa = fdp.ConsumeIntegral<uint32_t>() >> 9;
  const int e = fdp.ConsumeIntegralInRange<int>(lo_exp, hi_exp);
  const uint32_t bits = static_cast<uint32_t>(e + 127) << 23 | mantissa;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float hurt_float_kind(FuzzedDataProvider& fdp) {
  const int kind = fdp.ConsumeIntegralInRange<int>(0, 11);
  const float sign = fdp.ConsumeBool() ? -1.0f : 1.0f;
  switch (kind) {
    case 0:  // huge, up to the top of the f32 range
      return sign * normal_from_fields(fdp, 40, 127);
    case 1:  // tiny normal
      return sign * normal_from_fields(fdp, -126, -40);
    case 2: {  // subnormal
      const uint32_t bits = fdp.ConsumeIntegralInRange<uint32_t>(1, 0x007FFFFFu);
      float f;
      std::memcpy(&f, &bits, 4);
      return sign * f;
    }
    case 3: {  // f16 edges: its largest values, the overflow boundary, its subnormals
      static const float edges[] = {65504.0f,       65519.0f,       65520.0f,       65536.0f,
                                    6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f,
                                    1.0009766f,     1.0004883f,     2048.0f,        2049.0f};
      return sign * edges[fdp.ConsumeIntegralInRange<size_t>(0, sizeof edges / sizeof edges[0] - 1)];
    }
    case 4: {  // bf16 edges: halfway points and the top of the range
      static const float edges[] = {1.00390625f,   1.0039063f,    1.01171875f,
                                    3.3895314e38f, 3.3961775e38f, std::numeric_limits<float>::max(),
                                    1.1754944e-38f};
      return sign * edges[fdp.ConsumeIntegralInRange<size_t>(0, sizeof edges / sizeof edges[0] - 1)];
    }
    case 5:  // near-ties: 1 + a few f32 ulps
      return sign * (1.0f + std::ldexp(static_cast<float>(fdp.ConsumeIntegralInRange<int>(0, 8)), -23));
    case 6:  // exact small grid values: sums of them are exact, so ties are real
      return sign * static_cast<float>(fdp.ConsumeIntegralInRange<int>(0, 64)) / 8.0f;
    case 7: return sign * 0.0f;
    case 8: {  // any finite bit pattern
      uint32_t bits = fdp.ConsumeIntegral<uint32_t>();
      if ((bits & 0x7F800000u) == 0x7F800000u) bits &= 0xFF7FFFFFu;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    default: return fdp.ConsumeFloatingPointInRange<float>(-1.0f, 1.0f);
  }
}

}  // namespace

float hurt_float(FuzzedDataProvider& fdp) {
  const float v = hurt_float_kind(fdp);
  // Harnesses take this as a value every call must accept: a non-finite one
  // is the generator's fault, named here rather than as a refused call.
  FZ_CHECK(std::isfinite(v), "hurt_float drew a non-finite value");
  return v;
}

float maybe_non_finite(FuzzedDataProvider& fdp, int odds) {
  if (fdp.ConsumeIntegralInRange<int>(0, odds - 1) == 0) {
    switch (fdp.ConsumeIntegralInRange<int>(0, 2)) {
      case 0: return std::numeric_limits<float>::quiet_NaN();
      case 1: return std::numeric_limits<float>::infinity();
      default: return -std::numeric_limits<float>::infinity();
    }
  }
  return hurt_float(fdp);
}

uint16_t to_f16(float v) { return ref::f16_from_f32(v); }
uint16_t to_bf16(float v) { return ref::bf16_from_f32(v); }

size_t dtype_bytes(int32_t dtype) { return ref::dtype_size(dtype); }

int32_t pick_dtype(FuzzedDataProvider& fdp, const std::vector<int32_t>& valid, int bad_percent) {
  if (fdp.ConsumeIntegralInRange<int>(0, 99) < bad_percent) {
    // Another mnemo dtype, or any value at all.
    return fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange<int32_t>(-1, 7) : fdp.ConsumeIntegral<int32_t>();
  }
  return valid[fdp.ConsumeIntegralInRange<size_t>(0, valid.size() - 1)];
}

int32_t pick_metric(FuzzedDataProvider& fdp, int bad_percent) {
  if (fdp.ConsumeIntegralInRange<int>(0, 99) < bad_percent)
    return fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange<int32_t>(-1, 5) : fdp.ConsumeIntegral<int32_t>();
  return fdp.ConsumeIntegralInRange<int32_t>(MNEMO_METRIC_COSINE, MNEMO_METRIC_L2SQ);
}

void put_elem(void* base, int32_t dtype, size_t i, float v) {
  auto* p = static_cast<unsigned char*>(base);
  switch (dtype) {
    case MNEMO_DTYPE_F16: {
      const uint16_t h = to_f16(v);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case MNEMO_DTYPE_BF16: {
      const uint16_t h = to_bf16(v);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case MNEMO_DTYPE_F64: {
      const double d = v;
      std::memcpy(p + 8 * i, &d, 8);
      break;
    }
    default: std::memcpy(p + 4 * i, &v, 4); break;
  }
}

double get_elem(const void* base, int32_t dtype, size_t i) { return ref::load(base, dtype, i); }

const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* t = std::getenv("TMPDIR");
    std::string d = std::string(t && *t ? t : "/tmp") + "/mnemo-fuzz-" + std::to_string(::getpid());
    if (::access(d.c_str(), F_OK) != 0 && ::mkdir(d.c_str(), 0700) != 0) fail("cannot create " + d);
    return d;
  }();
  // Harnesses delete their files; the empty folder goes at exit.
  static const struct Remover {
    ~Remover() { ::rmdir(dir.c_str()); }
  } remover;
  (void)remover;
  return dir;
}

}  // namespace fz
