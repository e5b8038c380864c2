// The store's id -> slot map (core/id_map.h) against std::unordered_map:
// random inserts, lookups and erases over several key patterns (sequential,
// strided by a power of two, random, and keys forced to share a home cell so
// probe runs wrap the array and erases shift entries back), growth from
// empty, reserve without reallocation, moves, and the reserved empty key.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

#include "core/id_map.h"

namespace {

using mnemo::IdMap;

void expect_same(const IdMap& m, const std::unordered_map<uint64_t, uint64_t>& ref,
                 const std::vector<uint64_t>& probe) {
  ASSERT_EQ(m.size(), ref.size());
  for (uint64_t k : probe) {
    auto it = ref.find(k);
    const IdMap::Entry* e = m.find(k);
    ASSERT_EQ(e != nullptr, it != ref.end()) << "key " << k;
    if (e) {
      EXPECT_EQ(e->first, k);
      EXPECT_EQ(e->second, it->second) << "key " << k;
    }
  }
}

void churn(std::vector<uint64_t> keys, uint64_t seed) {
  std::mt19937_64 rng(seed);
  IdMap m;
  std::unordered_map<uint64_t, uint64_t> ref;
  for (int round = 0; round < 6; ++round) {
    for (size_t i = 0; i < keys.size(); ++i) {
      const uint64_t k = keys[rng() % keys.size()], v = rng();
      const auto [e, ins] = m.try_emplace(k, v);
      const auto [it, rins] = ref.try_emplace(k, v);
      ASSERT_EQ(ins, rins);
      ASSERT_EQ(e->second, it->second);
      if (rng() % 3 == 0) {
        const uint64_t d = keys[rng() % keys.size()];
        ASSERT_EQ(m.erase(d), ref.erase(d)) << "erase " << d;
      }
    }
    expect_same(m, ref, keys);
  }
  // Erase through the entry, every other key.
  for (size_t i = 0; i < keys.size(); i += 2) {
    IdMap::Entry* e = m.find(keys[i]);
    if (e) m.erase(e);
    ref.erase(keys[i]);
  }
  expect_same(m, ref, keys);
}

TEST(IdMap, MatchesUnorderedMap) {
  std::vector<uint64_t> seq(5000), strided(5000), rnd(5000);
  std::mt19937_64 rng(7);
  for (uint64_t i = 0; i < 5000; ++i) seq[i] = i, strided[i] = i << 20, rnd[i] = rng() & ~uint64_t{1};
  churn(seq, 1);
  churn(strided, 2);
  churn(rnd, 3);
}

TEST(IdMap, SharedHomesWrapAndShiftBack) {
  // Keys whose low ten mixed bits are equal share their home cell in every
  // map of up to 1024 cells, and that cell is the last but three of the
  // array: runs wrap past its end, and erases in the middle of a run must
  // keep every later key reachable.
  std::vector<uint64_t> same;
  for (uint64_t k = 0; same.size() < 60; ++k)
    if ((IdMap::mix(k) & 1023) == 1020) same.push_back(k);
  churn(same, 4);
  // Two interleaved runs.
  for (uint64_t k = 0; same.size() < 120; ++k)
    if ((IdMap::mix(k) & 1023) == 1022) same.push_back(k);
  churn(same, 5);
}

TEST(IdMap, ReserveAvoidsGrowth) {
  IdMap m;
  m.reserve(1000);
  const size_t cap = m.capacity();
  ASSERT_GE(cap - cap / 4, 1000u);
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_TRUE(m.try_emplace(i * 977, i).second);
  EXPECT_EQ(m.capacity(), cap);
  EXPECT_FALSE(m.try_emplace(977, 5).second);
  EXPECT_EQ(m.at(977), 1u);
  m[977] = 9;
  EXPECT_EQ(m.at(977), 9u);
  IdMap moved(std::move(m));
  EXPECT_EQ(moved.size(), 1000u);
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.find(977), nullptr);
  EXPECT_EQ(moved.count(977 * 999), 1u);
  EXPECT_EQ(moved.find(IdMap::kEmpty), nullptr);
  moved.clear();
  EXPECT_EQ(moved.find(0), nullptr);
  EXPECT_TRUE(moved.empty());
}

}  // namespace
