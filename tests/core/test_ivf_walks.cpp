// An indexed store keeps its longest list (IvfIndex::largest), set where the
// list bounds change: a layout and a compaction. Writes (their rebuild check)
// and probe searches read it; list_walks() counts every walk over all the
// lists, so this shows that none of them makes one, and that the kept value
// is the longest list of the layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "core/store.h"

namespace {

using mnemo::BackendKind;
using mnemo::DType;
using mnemo::IndexOptions;
using mnemo::Metric;
using mnemo::RankOptions;
using mnemo::Runtime;
using mnemo::RuntimeOptions;
using mnemo::SearchFilter;
using mnemo::Store;

constexpr uint64_t kDim = 8;

std::vector<float> random_rows(std::mt19937& rng, uint64_t n) {
  std::normal_distribution<float> nd;
  std::vector<float> rows(n * kDim);
  for (float& x : rows) x = nd(rng);
  return rows;
}

// The index's longest list against a count of the layout's memories per list
// (equal where no list holds a tombstone: after a build or a compaction).
void expect_kept_longest(const Store& s) {
  const mnemo::StoreContents c = s.snapshot();
  ASSERT_TRUE(c.indexed);
  std::map<uint32_t, uint64_t> per_list;
  for (uint32_t l : c.layout.lists) ++per_list[l];
  uint64_t longest = 0;
  for (const auto& kv : per_list) longest = std::max(longest, kv.second);
  EXPECT_GT(longest, 0u);
  EXPECT_EQ(s.index_info().largest_list, longest);
}

TEST(IvfWalks, WritesAndProbesReadTheKeptLongestList) {
  RuntimeOptions ro;
  ro.backend = BackendKind::cpu;
  ro.num_threads = 2;
  const Runtime rt(ro);
  Store s(rt, kDim, DType::f32, Metric::dot);
  std::mt19937 rng(7);
  const uint64_t n = 2000;
  std::vector<uint64_t> ids(n);
  std::iota(ids.begin(), ids.end(), 1);
  const std::vector<float> rows = random_rows(rng, n);
  s.add(ids.data(), rows.data(), DType::f32, n);
  IndexOptions o;
  o.nlist = 16;
  o.background = false;
  s.build_index(o);
  expect_kept_longest(s);

  const uint64_t walks = mnemo::list_walks().load();
  EXPECT_GT(walks, 0u) << "the layout's walk was not counted";
  uint64_t next_id = n + 1;
  std::vector<uint64_t> out_ids(5);
  std::vector<float> out_scores(5);
  for (uint64_t round = 0; round < 50; ++round) {
    // New memories (hot tier), upserts of indexed ones (moved there), a
    // remove, metadata writes, and probe searches, plain and activation.
    std::vector<uint64_t> add_ids(10);
    std::iota(add_ids.begin(), add_ids.end(), next_id);
    next_id += add_ids.size();
    const std::vector<float> add_rows = random_rows(rng, add_ids.size());
    s.add(add_ids.data(), add_rows.data(), DType::f32, add_ids.size());
    const uint64_t up[2] = {1 + round * 3, 2 + round * 3};
    const std::vector<float> up_rows = random_rows(rng, 2);
    s.add(up, up_rows.data(), DType::f32, 2);
    const uint64_t gone = 3 + round * 3;
    EXPECT_EQ(s.remove(&gone, 1), 1u);
    const float bias = 0.25f, importance = 2.0f;
    const double t = 1.7e9 + double(round);
    s.set_bias(&add_ids[0], &bias, 1);
    s.set_times(&add_ids[1], &t, 1);
    s.set_importance(&add_ids[2], &importance, 1);
    const std::vector<float> q = random_rows(rng, 1);
    RankOptions r;
    r.nprobe = 4;
    s.search(q.data(), 1, out_ids.size(), SearchFilter{}, r, out_ids.data(), out_scores.data());
    r.act.on = true;
    r.act.w_rel = 1.0f;
    r.act.w_rec = 0.5f;
    r.act.half_life = 3600.0;
    r.act.now = t;
    s.search(q.data(), 1, out_ids.size(), SearchFilter{}, r, out_ids.data(), out_scores.data());
  }
  EXPECT_EQ(s.index_info().builds, 1u) << "a rebuild ran: the writes passed its bound";
  EXPECT_EQ(mnemo::list_walks().load(), walks) << "a write or a probe search walked every list";

  // Removing over a quarter of the slots compacts: the bounds and the
  // longest list are set once more, from the lists as compacted.
  std::vector<uint64_t> many;
  for (uint64_t id = 200; id < 1200; ++id) many.push_back(id);
  s.remove(many.data(), many.size());
  EXPECT_EQ(mnemo::list_walks().load(), walks + 1);
  expect_kept_longest(s);
}

}  // namespace
