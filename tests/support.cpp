#include "support.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <set>

#include "reference.h"

namespace mt {

int32_t test_backend() {
  const char* env = std::getenv("MNEMO_TEST_BACKEND");
  const std::string b = env ? env : "auto";
  if (b == "cpu") return MNEMO_BACKEND_CPU;
  if (b == "cuda") return MNEMO_BACKEND_CUDA;
  return MNEMO_BACKEND_AUTO;
}

mnemo_runtime_options test_options() {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = test_backend();
  return o;
}

namespace {

struct SharedRuntime {
  mnemo_runtime* rt = nullptr;
  ~SharedRuntime() { mnemo_runtime_destroy(rt); }
};

}  // namespace

mnemo_runtime* rt() {
  static SharedRuntime shared;
  if (shared.rt == nullptr) {
    const mnemo_runtime_options o = test_options();
    const mnemo_status st = mnemo_runtime_create(&o, &shared.rt);
    if (st != MNEMO_OK) {
      ADD_FAILURE() << "mnemo_runtime_create -> " << status_str(st) << ": " << last_error();
      shared.rt = nullptr;
    }
  }
  return shared.rt;
}

RuntimePtr cuda_runtime_or_why(std::string* why) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CUDA;
  mnemo_runtime* r = nullptr;
  const mnemo_status st = mnemo_runtime_create(&o, &r);
  if (st != MNEMO_OK) *why = last_error();
  return RuntimePtr(st == MNEMO_OK ? r : nullptr);
}

RuntimePtr make_runtime(const mnemo_runtime_options& opts) {
  mnemo_runtime* r = nullptr;
  const mnemo_status st = mnemo_runtime_create(&opts, &r);
  if (st != MNEMO_OK) {
    ADD_FAILURE() << "mnemo_runtime_create -> " << status_str(st) << ": " << last_error();
    return RuntimePtr();
  }
  return RuntimePtr(r);
}

StorePtr make_store(uint64_t dim, int32_t dtype, int32_t metric, mnemo_runtime* runtime) {
  mnemo_store* s = nullptr;
  const mnemo_status st = mnemo_store_create(runtime ? runtime : rt(), dim, dtype, metric, &s);
  if (st != MNEMO_OK) {
    ADD_FAILURE() << "mnemo_store_create(dim " << dim << ", " << dtype_name(dtype) << ", " << metric_name(metric)
                  << ") -> " << status_str(st) << ": " << last_error();
    return StorePtr();
  }
  return StorePtr(s);
}

std::mt19937_64 rng_for_test() {
  std::string name = "no-test";
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info())
    name = std::string(info->test_suite_name()) + "." + info->name();
  uint64_t seed = std::hash<std::string>{}(name);
  if (const char* env = std::getenv("MNEMO_TEST_SEED")) seed ^= std::strtoull(env, nullptr, 10) * 0x9E3779B97F4A7C15ull;
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return std::mt19937_64(seed);
}

float rand_nonzero(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (;;) {
    const float v = u(rng);
    if (v != 0.0f) return v;
  }
}

uint64_t rand_below(std::mt19937_64& rng, uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); }

std::vector<uint64_t> distinct_ids(std::mt19937_64& rng, size_t n) {
  std::set<uint64_t> seen;
  std::vector<uint64_t> ids;
  while (ids.size() < n) {
    const uint64_t id = rng() >> 1;
    if (seen.insert(id).second) ids.push_back(id);
  }
  return ids;
}

std::string last_error() {
  const char* m = mnemo_last_error();
  return m ? std::string(m) : std::string("<NULL>");
}

std::string status_str(mnemo_status s) {
  const char* n = mnemo_status_name(s);
  return std::to_string(s) + " (" + (n ? n : "<NULL>") + ")";
}

namespace {
bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool digit(char c) { return c >= '0' && c <= '9'; }
}  // namespace

bool names_identifier(const std::string& text, const std::string& name) {
  for (size_t pos = text.find(name); pos != std::string::npos; pos = text.find(name, pos + 1)) {
    const bool left_ok = pos == 0 || !ident_char(text[pos - 1]);
    const size_t end = pos + name.size();
    const bool right_ok = end == text.size() || !ident_char(text[end]);
    if (left_ok && right_ok) return true;
  }
  return false;
}

bool names_number(const std::string& text, uint64_t value) {
  const std::string n = std::to_string(value);
  for (size_t pos = text.find(n); pos != std::string::npos; pos = text.find(n, pos + 1)) {
    const bool left_ok = pos == 0 || !digit(text[pos - 1]);
    const size_t end = pos + n.size();
    const bool right_ok = end == text.size() || !digit(text[end]);
    if (left_ok && right_ok) return true;
  }
  return false;
}

::testing::AssertionResult failed_with(mnemo_status got, mnemo_status want, const char* arg) {
  const std::string msg = last_error();
  if (got != want)
    return ::testing::AssertionFailure() << "status " << status_str(got) << ", expected " << status_str(want)
                                         << "; last error: \"" << msg << "\"";
  if (msg.empty())
    return ::testing::AssertionFailure() << "status " << status_str(got) << " but mnemo_last_error() is empty";
  if (arg != nullptr && !names_identifier(msg, arg))
    return ::testing::AssertionFailure() << "status " << status_str(got) << " but the message \"" << msg
                                         << "\" does not name the argument '" << arg << "'";
  return ::testing::AssertionSuccess();
}

size_t dtype_size(int32_t dtype) { return ref::dtype_size(dtype); }

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case MNEMO_DTYPE_F32: return "F32";
    case MNEMO_DTYPE_F16: return "F16";
    case MNEMO_DTYPE_BF16: return "BF16";
    case MNEMO_DTYPE_F64: return "F64";
    case MNEMO_DTYPE_U32: return "U32";
    case MNEMO_DTYPE_U64: return "U64";
    default: return "?";
  }
}

const char* metric_name(int32_t metric) {
  switch (metric) {
    case MNEMO_METRIC_COSINE: return "Cosine";
    case MNEMO_METRIC_DOT: return "Dot";
    case MNEMO_METRIC_L2SQ: return "L2sq";
    default: return "?";
  }
}

Matrix::Matrix(int32_t dt, size_t r, size_t d)
    : dtype(dt), rows(r), dim(d), raw(r * d * dtype_size(dt)), val(r * d, 0.0) {}

void Matrix::set(size_t i, size_t j, float v) {
  ref::store(raw.data(), dtype, i * dim + j, v);
  val[i * dim + j] = ref::load(raw.data(), dtype, i * dim + j);
}

void Matrix::copy_row(size_t to, const Matrix& src, size_t from) {
  const size_t es = dtype_size(dtype);
  std::memcpy(raw.data() + to * dim * es, src.raw.data() + from * dim * es, dim * es);
  for (size_t j = 0; j < dim; ++j) val[to * dim + j] = src.val[from * dim + j];
}

Matrix random_matrix(std::mt19937_64& rng, int32_t dtype, size_t rows, size_t dim, bool unit_rows) {
  Matrix m(dtype, rows, dim);
  std::vector<float> row(dim);
  for (size_t i = 0; i < rows; ++i) {
    double ss = 0;
    for (size_t j = 0; j < dim; ++j) {
      row[j] = rand_nonzero(rng);
      ss += static_cast<double>(row[j]) * row[j];
    }
    const float inv = unit_rows ? static_cast<float>(1.0 / std::sqrt(ss)) : 1.0f;
    for (size_t j = 0; j < dim; ++j) {
      float v = row[j] * inv;
      // Rounding to f16 must not make an entry zero either.
      if (dtype == MNEMO_DTYPE_F16 && ref::f16_value(ref::f16_from_f32(v)) == 0.0) v = std::copysign(1e-3f, v);
      m.set(i, j, v);
    }
  }
  return m;
}

void poison(void* data, int32_t dtype, size_t count) {
  auto* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
      case MNEMO_DTYPE_F32: std::memcpy(p + 4 * i, &kPoisonF32, 4); break;
      case MNEMO_DTYPE_F16: std::memcpy(p + 2 * i, &kPoisonF16, 2); break;
      case MNEMO_DTYPE_BF16: std::memcpy(p + 2 * i, &kPoisonBF16, 2); break;
      default: break;
    }
  }
}

void poison_f32(float* data, size_t count) { poison(data, MNEMO_DTYPE_F32, count); }

}  // namespace mt

namespace mt {

std::string case_name(int32_t dtype, int32_t metric, size_t dim) {
  return std::string(dtype_name(dtype)) + "_" + metric_name(metric) + "_d" + std::to_string(dim);
}

}  // namespace mt
