// The threads a sharded store keeps (core/shard_workers.h): every busy
// shard runs exactly once per call and no idle one does, across calls back
// to back (workers still watching) and after pauses (workers asleep); a
// failure lands in its shard's slot while the others finish; concurrent
// callers either get the workers or are told to start their own, never
// sharing a call; a nudge (waking sleeping workers ahead of a call) runs
// nothing and loses no call; destruction joins sleeping workers. Label
// tsan.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/shard_workers.h"

namespace {

using mnemo::ShardWorkers;

TEST(ShardWorkers, EachBusyShardRunsOncePerCall) {
  constexpr size_t kShards = 5;
  ShardWorkers w(kShards);
  std::mt19937 rng(11);
  for (int call = 0; call < 300; ++call) {
    std::vector<char> busy(kShards);
    for (auto& b : busy) b = static_cast<char>(rng() % 2);
    std::vector<std::atomic<int>> runs(kShards);
    std::vector<std::thread::id> who(kShards);
    std::vector<std::exception_ptr> errs(kShards);
    const std::function<void(size_t)> fn = [&](size_t i) {
      runs[i].fetch_add(1);
      who[i] = std::this_thread::get_id();
    };
    ASSERT_TRUE(w.try_run(busy, fn, errs));
    for (size_t i = 0; i < kShards; ++i) {
      EXPECT_EQ(runs[i].load(), busy[i] ? 1 : 0) << "call " << call << " shard " << i;
      EXPECT_FALSE(errs[i]);
    }
    if (busy[0]) {
      EXPECT_EQ(who[0], std::this_thread::get_id());
    }
    // Every tenth call after a pause past the workers' watch: they sleep.
    if (call % 10 == 9) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

TEST(ShardWorkers, FailuresStayWithTheirShard) {
  ShardWorkers w(4);
  std::vector<char> busy(4, 1);
  std::vector<std::exception_ptr> errs(4);
  std::atomic<int> done{0};
  const std::function<void(size_t)> fn = [&](size_t i) {
    if (i == 2 || i == 0) throw std::runtime_error("shard " + std::to_string(i));
    done.fetch_add(1);
  };
  ASSERT_TRUE(w.try_run(busy, fn, errs));
  EXPECT_EQ(done.load(), 2);
  ASSERT_TRUE(errs[0] && errs[2]);
  EXPECT_FALSE(errs[1] || errs[3]);
  try {
    std::rethrow_exception(errs[2]);
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "shard 2");
  }
}

TEST(ShardWorkers, ConcurrentCallersNeverShareACall) {
  constexpr size_t kShards = 4;
  ShardWorkers w(kShards);
  std::atomic<int> got{0}, refused{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int call = 0; call < 200; ++call) {
        std::vector<char> busy(kShards, 1);
        std::vector<int> runs(kShards, 0);  // written only by this call's shards
        std::vector<std::exception_ptr> errs(kShards);
        const std::function<void(size_t)> fn = [&](size_t i) { ++runs[i]; };
        if (w.try_run(busy, fn, errs)) {
          got.fetch_add(1);
          for (size_t i = 0; i < kShards; ++i) EXPECT_EQ(runs[i], 1);
        } else {
          refused.fetch_add(1);
          for (size_t i = 0; i < kShards; ++i) EXPECT_EQ(runs[i], 0);
        }
      }
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(got.load() + refused.load(), 800);
  EXPECT_GT(got.load(), 0);
}

// A nudge wakes sleeping workers to watch, without running anything: calls
// after it (soon, or after the watch has run out and they sleep again) run
// every busy shard once, and nudges from other threads while calls run
// change nothing either.
TEST(ShardWorkers, NudgesRunNothingAndLoseNoCall) {
  constexpr size_t kShards = 4;
  ShardWorkers w(kShards);
  std::vector<std::atomic<int>> runs(kShards);
  std::vector<char> busy(kShards, 1);
  std::vector<std::exception_ptr> errs(kShards);
  const std::function<void(size_t)> fn = [&](size_t i) { runs[i].fetch_add(1); };
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // asleep
  w.nudge();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // awake, then asleep again
  for (auto& r : runs) EXPECT_EQ(r.load(), 0);
  std::mt19937 rng(5);
  std::atomic<bool> stop{false};
  std::thread nudger([&] {
    while (!stop.load()) {
      w.nudge();
      std::this_thread::sleep_for(std::chrono::microseconds(150));
    }
  });
  constexpr int kCalls = 200;
  for (int call = 0; call < kCalls; ++call) {
    if (call % 8 == 7) std::this_thread::sleep_for(std::chrono::microseconds(100 + rng() % 900));
    w.nudge();
    if (call % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
    ASSERT_TRUE(w.try_run(busy, fn, errs));
  }
  stop.store(true);
  nudger.join();
  for (size_t i = 0; i < kShards; ++i) EXPECT_EQ(runs[i].load(), kCalls) << "shard " << i;
  w.nudge();  // destroyed while watching
}

TEST(ShardWorkers, OneShardAndDestructionWhileAsleep) {
  {
    ShardWorkers one(1);  // no threads: the caller runs shard 0
    std::vector<char> busy{1};
    std::vector<std::exception_ptr> errs(1);
    int runs = 0;
    const std::function<void(size_t)> fn = [&](size_t) { ++runs; };
    ASSERT_TRUE(one.try_run(busy, fn, errs));
    EXPECT_EQ(runs, 1);
  }
  ShardWorkers w(3);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // workers asleep when destroyed
}

}  // namespace
