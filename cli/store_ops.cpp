#include "store_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "progress.h"

namespace cli {

void add_rows(mnemo_store* s, const FloatRows& m, const AVec<double>* times, const AVec<float>* importance,
              const mnemo_memory_fields* fields) {
  constexpr uint64_t kBatch = 8192;
  AVec<uint64_t> ids(kBatch);
  Progress p("add", m.rows);
  for (uint64_t i = 0; i < m.rows; i += kBatch) {
    const uint64_t n = std::min(kBatch, m.rows - i);
    for (uint64_t j = 0; j < n; ++j) ids[j] = i + j;
    // kBatch keeps every slice of the f64 and f32 arrays 16-byte aligned.
    // A refusal names fields[j] of this batch: say which rows it holds.
    const std::string what = fields ? "adding rows " + std::to_string(i) + ".." + std::to_string(i + n - 1) +
                                          " (fields[j] is row " + std::to_string(i) + " + j)"
                                    : std::string("adding vectors");
    check(mnemo_store_add_with_fields(s, ids.data(), m.row(i), MNEMO_DTYPE_F32, n, times ? times->data() + i : nullptr,
                                      importance ? importance->data() + i : nullptr, fields ? fields + i : nullptr),
          what.c_str());
    p.update(i + n);
  }
}

std::vector<double> read_numbers(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) throw Error("cannot open '" + path + "'");
  std::vector<double> v;
  char line[256];
  uint64_t no = 0;
  while (std::fgets(line, sizeof line, f)) {
    ++no;
    char* end = nullptr;
    const double x = std::strtod(line, &end);
    while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n') ++end;
    if (end == line || *end != '\0' || !std::isfinite(x)) {
      std::fclose(f);
      throw Error(path + ":" + std::to_string(no) + ": not a finite number");
    }
    v.push_back(x);
  }
  std::fclose(f);
  return v;
}

double search_rows(const mnemo_store* s, const FloatRows& q, uint64_t k, uint64_t batch, AVec<uint64_t>& ids,
                   AVec<float>& scores, const mnemo_search_options* opts) {
  if (batch == 0) throw UsageError("--batch must be at least 1");
  ids.resize(q.rows * k);
  scores.resize(q.rows * k);
  Progress p("search", q.rows);
  double spent = 0;
  for (uint64_t i = 0; i < q.rows; i += batch) {
    const uint64_t n = std::min(batch, q.rows - i);
    const double t0 = now_seconds();
    check(mnemo_store_search(s, q.row(i), n, k, opts, ids.data() + i * k, scores.data() + i * k), "searching");
    spent += now_seconds() - t0;
    p.update(i + n);
  }
  return spent;
}

void check_dim(const mnemo_store* s, const FloatRows& m, const std::string& what) {
  uint64_t dim = 0;
  check(mnemo_store_shape(s, &dim, nullptr, nullptr), "store shape");
  if (m.dim != dim)
    throw Error(what + " has dimension " + std::to_string(m.dim) + " but the store has " + std::to_string(dim));
  if (m.rows == 0) throw Error(what + " holds no rows");
}

}  // namespace cli
