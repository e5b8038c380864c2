// mnemo_store_open of a 1 GB snapshot against reading the same file with
// `cat > /dev/null`, both from the page cache (each run after a warm-up read),
// best of five. Usage: mnemo_store_open_bench <folder for the 1 GB file>
#include <mnemo.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int die(const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, mnemo_last_error());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string path = std::string(argv[1]) + "/store-open-bench.mnemo";
  const uint64_t dim = 768, rows = 330000, batch = 2000;
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CPU;
  mnemo_runtime* rt = nullptr;
  if (mnemo_runtime_create(&o, &rt) != MNEMO_OK) return die("runtime");
  {
    mnemo_store* s = nullptr;
    if (mnemo_store_create(rt, dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, &s) != MNEMO_OK) return die("create");
    std::vector<float> v(batch * dim);
    std::vector<uint64_t> ids(batch);
    uint64_t x = 0x2545F4914F6CDD1Dull;
    for (uint64_t at = 0; at < rows; at += batch) {
      for (float& f : v) x ^= x << 13, x ^= x >> 7, x ^= x << 17, f = static_cast<float>(x >> 40) / 16777216.0f - 0.5f;
      for (uint64_t i = 0; i < batch; ++i) ids[i] = at + i + 1;
      if (mnemo_store_add(s, ids.data(), v.data(), MNEMO_DTYPE_F32, std::min(batch, rows - at)) != MNEMO_OK)
        return die("add");
    }
    if (mnemo_store_save(s, path.c_str()) != MNEMO_OK) return die("save");
    mnemo_store_destroy(s);
  }
  const std::string cat = "cat '" + path + "' > /dev/null";
  double best_cat = 1e9, best_open = 1e9;
  if (std::system(cat.c_str()) != 0) return 1;  // warm the page cache
  for (int r = 0; r < 5; ++r) {
    double t = now();
    if (std::system(cat.c_str()) != 0) return 1;
    best_cat = std::min(best_cat, now() - t);
    t = now();
    mnemo_store* s = nullptr;
    if (mnemo_store_open(rt, path.c_str(), &s) != MNEMO_OK) return die("open");
    best_open = std::min(best_open, now() - t);
    mnemo_store_destroy(s);
  }
  std::remove(path.c_str());
  mnemo_runtime_destroy(rt);
  std::printf(
      "store open, 1 GB snapshot (%llu x %llu f32): mnemo_store_open %.2f s, cat > /dev/null %.2f s, ratio %.2f\n",
      static_cast<unsigned long long>(rows), static_cast<unsigned long long>(dim), best_open, best_cat,
      best_open / best_cat);
  return 0;
}
