#include "topk_merge.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor.h"
#include "topk.h"

namespace mnemo {

namespace {
struct Entry {
  Hit hit;      // key: larger is better (a negated distance for L2)
  float score;  // as given, so the output keeps its bits
};
}  // namespace

void topk_merge(Metric metric, uint64_t parts, uint64_t nq, uint64_t k_in, const uint64_t* ids, const float* scores,
                uint64_t k_out, uint64_t* out_ids, float* out_scores) {
  const bool lower_better = metric == Metric::l2sq;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<Entry> cand;
  for (uint64_t q = 0; q < nq; ++q) {
    cand.clear();
    for (uint64_t p = 0; p < parts; ++p) {
      const uint64_t row = (p * nq + q) * k_in;
      for (uint64_t j = 0; j < k_in; ++j) {
        const uint64_t id = ids[row + j];
        const float s = scores[row + j];
        if (id == kNoId || std::isnan(s)) continue;
        cand.push_back({{lower_better ? -s : s, id}, s});
      }
    }
    // Duplicates (replicas, a repeated part): keep each id's best entry.
    std::sort(cand.begin(), cand.end(), [](const Entry& a, const Entry& b) {
      return a.hit.id != b.hit.id ? a.hit.id < b.hit.id : better(a.hit, b.hit);
    });
    cand.erase(
        std::unique(cand.begin(), cand.end(), [](const Entry& a, const Entry& b) { return a.hit.id == b.hit.id; }),
        cand.end());
    const size_t n = static_cast<size_t>(std::min<uint64_t>(k_out, cand.size()));
    std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(n), cand.end(),
                      [](const Entry& a, const Entry& b) { return better(a.hit, b.hit); });
    for (uint64_t j = 0; j < k_out; ++j) {
      out_ids[q * k_out + j] = j < n ? cand[j].hit.id : kNoId;
      out_scores[q * k_out + j] = j < n ? cand[j].score : nan;
    }
  }
}

}  // namespace mnemo
