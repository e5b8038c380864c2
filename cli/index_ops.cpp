#include "index_ops.h"

#include <cstdio>
#include <cstdlib>

namespace cli {

namespace {

uint32_t u32_arg(const Args& a, const std::string& name) {
  const uint64_t v = a.num(name, 0);
  if (v > UINT32_MAX) throw UsageError("--" + name + " must be at most " + std::to_string(UINT32_MAX));
  return static_cast<uint32_t>(v);
}

}  // namespace

mnemo_index_options index_options(const Args& a, bool implied, bool* wanted) {
  mnemo_index_options o = mnemo_index_options_default();
  const std::string kind = a.str("index", implied ? "ivf" : "none");
  if (kind != "ivf" && kind != "none") throw UsageError("--index must be ivf or none, not '" + kind + "'");
  *wanted = kind == "ivf";
  for (const char* n : {"nlist", "train-iters", "index-seed"})
    if (a.has(n) && !*wanted) throw UsageError("--" + std::string(n) + " needs --index ivf");
  o.nlist = u32_arg(a, "nlist");
  o.train_iters = u32_arg(a, "train-iters");
  o.seed = a.num("index-seed", o.seed);
  o.background = 0;
  return o;
}

double build_index(mnemo_store* s, const mnemo_index_options& o) {
  const double t0 = now_seconds();
  check(mnemo_store_build_index(s, &o), "building the index");
  return now_seconds() - t0;
}

mnemo_index_info index_info(const mnemo_store* s) {
  mnemo_index_info info;
  info.struct_size = sizeof info;
  check(mnemo_store_index_info(s, &info), "index info");
  return info;
}

std::string index_summary(const mnemo_store* s) {
  const mnemo_index_info info = index_info(s);
  if (info.nlist == 0) return "none";
  char buf[160];
  std::snprintf(buf, sizeof buf, "ivf, %u lists (largest %llu, %llu hot)", info.nlist,
                static_cast<unsigned long long>(info.largest_list), static_cast<unsigned long long>(info.hot));
  std::string out = buf;
  if (info.builds > 0 && info.last_build_seconds > 0) {  // built since the store was opened
    std::snprintf(buf, sizeof buf, ", built in %.2f s", info.last_build_seconds);
    out += buf;
  }
  return out;
}

std::vector<uint32_t> parse_nprobe_list(const std::string& option, const std::string& text) {
  std::vector<uint32_t> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    char* end = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || item[0] == '-' || item[0] == '+' || item[0] == ' ' || v == 0 || v > UINT32_MAX)
      throw UsageError("--" + option + " wants whole numbers from 1 to " + std::to_string(UINT32_MAX) +
                       " separated by commas (e.g. 1,4,16,64), not '" + text + "'");
    out.push_back(static_cast<uint32_t>(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace cli
