#include "common.h"

#include <chrono>

namespace cli {

Args::Args(int argc, char** argv, int first, const std::vector<std::string>& known,
           const std::vector<std::string>& flags) {
  auto in = [](const std::vector<std::string>& l, const std::string& x) {
    for (const auto& e : l)
      if (e == x) return true;
    return false;
  };
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + a + "'");
    const std::string name = a.substr(2);
    if (in(flags, name)) {
      v_[name] = "1";
      continue;
    }
    if (!in(known, name)) throw UsageError("unknown option '" + a + "'");
    if (i + 1 >= argc) throw UsageError("option '" + a + "' needs a value");
    v_[name] = argv[++i];
  }
}

std::string Args::str(const std::string& name) const {
  auto it = v_.find(name);
  if (it == v_.end()) throw UsageError("missing --" + name);
  return it->second;
}

std::string Args::str(const std::string& name, const std::string& fallback) const {
  auto it = v_.find(name);
  return it == v_.end() ? fallback : it->second;
}

uint64_t Args::num(const std::string& name) const {
  const std::string s = str(name);
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || s[0] == '-')
    throw UsageError("--" + name + " wants a whole number, not '" + s + "'");
  return v;
}

uint64_t Args::num(const std::string& name, uint64_t fallback) const { return has(name) ? num(name) : fallback; }

void check(mnemo_status st, const char* what) {
  if (st != MNEMO_OK) throw Error(std::string(what) + ": " + mnemo_status_name(st) + ": " + mnemo_last_error());
}

int32_t parse_metric(const std::string& s) {
  if (s == "cosine") return MNEMO_METRIC_COSINE;
  if (s == "dot" || s == "ip") return MNEMO_METRIC_DOT;
  if (s == "l2" || s == "l2sq") return MNEMO_METRIC_L2SQ;
  throw UsageError("--metric must be cosine, dot or l2, not '" + s + "'");
}

int32_t parse_dtype(const std::string& s) {
  if (s == "f32") return MNEMO_DTYPE_F32;
  if (s == "f16") return MNEMO_DTYPE_F16;
  if (s == "bf16") return MNEMO_DTYPE_BF16;
  throw UsageError("--dtype must be f32, f16 or bf16, not '" + s + "'");
}

int32_t parse_backend(const std::string& s) {
  if (s == "auto") return MNEMO_BACKEND_AUTO;
  if (s == "cpu") return MNEMO_BACKEND_CPU;
  if (s == "cuda" || s == "gpu") return MNEMO_BACKEND_CUDA;
  throw UsageError("--backend must be auto, cpu or cuda, not '" + s + "'");
}

int32_t parse_precision(const std::string& s) {
  if (s == "exact") return MNEMO_PRECISION_EXACT;
  if (s == "fast") return MNEMO_PRECISION_FAST;
  throw UsageError("--precision must be exact or fast, not '" + s + "'");
}

const char* metric_name(int32_t m) {
  return m == MNEMO_METRIC_COSINE ? "cosine" : m == MNEMO_METRIC_DOT ? "dot" : m == MNEMO_METRIC_L2SQ ? "l2" : "?";
}

const char* dtype_name(int32_t d) {
  return d == MNEMO_DTYPE_F32 ? "f32" : d == MNEMO_DTYPE_F16 ? "f16" : d == MNEMO_DTYPE_BF16 ? "bf16" : "?";
}

Runtime::Runtime(int32_t backend, int32_t precision) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = backend;
  o.precision = precision;
  check(mnemo_runtime_create(&o, &rt), "creating the runtime");
}

Runtime::Runtime(const Args& a) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = parse_backend(a.str("backend", "auto"));
  o.precision = parse_precision(a.str("precision", "exact"));
  o.num_threads = static_cast<uint32_t>(a.num("threads", 0));
  check(mnemo_runtime_create(&o, &rt), "creating the runtime");
}

std::string Runtime::describe() const {
  mnemo_runtime_report r;
  r.struct_size = sizeof r;
  check(mnemo_runtime_info(rt, &r), "runtime info");
  std::string s = std::string(r.device_name) + ", " + (r.precision == MNEMO_PRECISION_FAST ? "fast" : "exact");
  return s;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace cli
