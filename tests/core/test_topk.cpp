// The bounded selector against a full sort: short lists (a heap) and long
// ones (a buffer and selections), keys with many ties across the
// selections, NaN keys, merges of two selectors, and rejections by the
// bound the callers read (full() and worst_key()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/topk.h"

namespace {

using mnemo::Hit;
using mnemo::TopK;

std::vector<Hit> best_of(std::vector<Hit> all, size_t k) {
  all.erase(std::remove_if(all.begin(), all.end(), [](const Hit& h) { return std::isnan(h.key); }), all.end());
  std::sort(all.begin(), all.end(), mnemo::better);
  if (all.size() > k) all.resize(k);
  return all;
}

void expect_same(const std::vector<Hit>& got, const std::vector<Hit>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].id, want[i].id) << "rank " << i;
    EXPECT_EQ(got[i].key, want[i].key) << "rank " << i;
  }
}

TEST(TopK, MatchesAFullSortAtEveryLength) {
  std::mt19937_64 rng(20261128);
  for (const size_t k : {1, 7, 63, 64, 65, 100, 257, 1000}) {
    for (const size_t n : {size_t{0}, k / 2, k, 2 * k + 63, 2 * k + 64, 10 * k + 17}) {
      // Few distinct keys, so ties cross every selection; a NaN in 50.
      std::uniform_int_distribution<int> level(0, static_cast<int>(std::max<size_t>(3, k / 8)));
      std::vector<Hit> all(n);
      std::vector<uint64_t> ids(n);
      for (size_t i = 0; i < n; ++i) ids[i] = i * 7919 % 1000003 + 1;
      std::shuffle(ids.begin(), ids.end(), rng);
      for (size_t i = 0; i < n; ++i) {
        const float key = rng() % 50 == 0 ? std::numeric_limits<float>::quiet_NaN() : 0.25f * level(rng);
        all[i] = {key, ids[i]};
      }
      TopK top(k);
      // As the scans call it: a key below the bound is never offered.
      for (const Hit& h : all) {
        if (top.full() && h.key < top.worst_key()) continue;
        top.push(h.key, h.id);
      }
      expect_same(top.take_sorted(), best_of(all, k));
      // Split in two and merged.
      TopK a(k), b(k);
      for (size_t i = 0; i < n; ++i) (i % 3 ? a : b).push(all[i].key, all[i].id);
      a.merge(b);
      expect_same(a.take_sorted(), best_of(all, k));
    }
  }
}

TEST(TopK, BoundNeverPassesTheKthBest) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> key(0.0f, 1.0f);
  const size_t k = 100;
  TopK top(k);
  std::vector<Hit> seen;
  for (uint64_t id = 1; id <= 5000; ++id) {
    const Hit h{key(rng), id};
    seen.push_back(h);
    top.push(h.key, h.id);
    if (top.full()) {
      const auto want = best_of(seen, k);
      ASSERT_LE(top.worst_key(), want.back().key) << "after " << id << " keys";
    }
  }
  expect_same(top.take_sorted(), best_of(seen, k));
}

}  // namespace
