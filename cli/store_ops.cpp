#include "store_ops.h"

#include <algorithm>

#include "progress.h"

namespace cli {

void add_rows(mnemo_store* s, const FloatRows& m) {
  constexpr uint64_t kBatch = 8192;
  AVec<uint64_t> ids(kBatch);
  Progress p("add", m.rows);
  for (uint64_t i = 0; i < m.rows; i += kBatch) {
    const uint64_t n = std::min(kBatch, m.rows - i);
    for (uint64_t j = 0; j < n; ++j) ids[j] = i + j;
    check(mnemo_store_add(s, ids.data(), m.row(i), MNEMO_DTYPE_F32, n), "adding vectors");
    p.update(i + n);
  }
}

double search_rows(const mnemo_store* s, const FloatRows& q, uint64_t k, uint64_t batch, AVec<uint64_t>& ids,
                   AVec<float>& scores) {
  if (batch == 0) throw UsageError("--batch must be at least 1");
  ids.resize(q.rows * k);
  scores.resize(q.rows * k);
  Progress p("search", q.rows);
  double spent = 0;
  for (uint64_t i = 0; i < q.rows; i += batch) {
    const uint64_t n = std::min(batch, q.rows - i);
    const double t0 = now_seconds();
    check(mnemo_store_search(s, q.row(i), n, k, nullptr, ids.data() + i * k, scores.data() + i * k), "searching");
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
