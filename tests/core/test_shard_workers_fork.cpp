// A sharded store's worker threads after fork(): the child has none, so a
// call there must be told to start its own (not wait on workers that do not
// exist), a nudge there must return, and destroying the child's copy must
// not join them. The child reports through its exit status; it starts no
// threads (ThreadSanitizer forbids that after a multi-threaded fork, so this
// suite is not in the tsan label).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "core/shard_workers.h"

namespace {

using mnemo::ShardWorkers;

TEST(ShardWorkersFork, ChildIsToldToStartItsOwn) {
  auto w = std::make_unique<ShardWorkers>(3);
  std::vector<char> busy(3, 1);
  std::vector<std::exception_ptr> errs(3);
  int runs = 0;
  const std::function<void(size_t)> fn = [&](size_t) { __atomic_add_fetch(&runs, 1, __ATOMIC_RELAXED); };
  ASSERT_TRUE(w->try_run(busy, fn, errs));
  ASSERT_EQ(runs, 3);
  // The parent's workers asleep at the fork: the child's copy of their
  // state says so.
  ::usleep(2000);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    runs = 0;
    w->nudge();  // must return: there are no workers to wake
    const bool took = w->try_run(busy, fn, errs);
    w.reset();  // must return without joining
    ::_exit(!took && runs == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent's workers are unaffected.
  runs = 0;
  ASSERT_TRUE(w->try_run(busy, fn, errs));
  EXPECT_EQ(runs, 3);
}

}  // namespace
