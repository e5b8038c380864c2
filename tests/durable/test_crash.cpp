// A durable writer killed with SIGKILL at random moments: after every kill
// the store holds exactly the acknowledged writes, plus at most the one write
// that was in flight. The child runs as its own program (fork + exec) and
// acknowledges each write on a pipe once the call has returned.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "../support.h"
#include "crash_ops.h"
#include "durable_support.h"

namespace {

struct Child {
  pid_t pid = -1;
  int ack_fd = -1;
};

Child spawn(const std::string& store, uint64_t seed, uint64_t first) {
  int p[2];
  if (pipe(p) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    const std::string s = std::to_string(seed), f = std::to_string(first);
    execl(MNEMO_CRASH_CHILD, MNEMO_CRASH_CHILD, store.c_str(), s.c_str(), f.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(p[1]);
  return {pid, p[0]};
}

// Reads acknowledgements until `want` have arrived, the child ends, or
// `timeout_ms` passes; returns how many arrived.
uint64_t read_acks(int fd, uint64_t want, int timeout_ms) {
  uint64_t got = 0;
  char buf[256];
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (got < want) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t r = read(fd, buf, std::min<uint64_t>(sizeof buf, want - got));
    if (r <= 0) break;
    got += static_cast<uint64_t>(r);
  }
  return got;
}

uint64_t drain(int fd) {
  uint64_t got = 0;
  char buf[256];
  for (;;) {
    const ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return got;
    got += static_cast<uint64_t>(r);
  }
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

bool copy_file(const std::string& from, const std::string& to) {
  if (access(from.c_str(), F_OK) != 0) return std::remove(to.c_str()), true;
  dt::spit(to, dt::slurp(from));
  return true;
}

TEST(Crash, KilledWriterKeepsExactlyTheAcknowledgedWrites) {
  auto rng = mt::rng_for_test();
  const uint64_t seed = rng() % 1000000;
  const int kills = env_int("MNEMO_CRASH_KILLS", 220);
  dt::TempDir dir, check;
  ASSERT_FALSE(dir.path().empty());
  const std::string store = dir.file("store.mnemo"), journal = store + ".journal";
  const std::string copy = check.file("store.mnemo"), copy_journal = copy + ".journal";

  crash::Model model;
  uint64_t applied = 0, acked_total = 0, in_flight_kept = 0, in_flight_lost = 0, before_first_ack = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int round = 0; round < kills; ++round) {
    // Wait for a random number of acknowledgements (0: kill during open and
    // replay), then a random moment more, then kill.
    const uint64_t want = mt::rand_below(rng, 13);
    const uint64_t extra_us = mt::rand_below(rng, 3000);
    Child c = spawn(store, seed, applied);
    ASSERT_GT(c.pid, 0) << "fork failed";
    uint64_t acks = read_acks(c.ack_fd, want, 10000);
    if (extra_us) usleep(static_cast<useconds_t>(extra_us));
    kill(c.pid, SIGKILL);
    acks += drain(c.ack_fd);
    close(c.ack_fd);
    int status = 0;
    ASSERT_EQ(waitpid(c.pid, &status, 0), c.pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "round " << round << ": the child ended by itself (exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
        << ") instead of being killed";
    acked_total += acks;
    if (acks == 0) ++before_first_ack;

    crash::Model expect = model;
    for (uint64_t i = 0; i < acks; ++i) crash::apply(expect, crash::op_at(seed, applied + i));
    crash::Model with_in_flight = expect;
    crash::apply(with_in_flight, crash::op_at(seed, applied + acks));

    // Check a copy, so the next child recovers from the files as the crash left them.
    if (access(store.c_str(), F_OK) != 0) {
      ASSERT_EQ(acks, 0u) << "round " << round << ": writes acknowledged but no snapshot on disk";
      continue;  // killed before the store was first created
    }
    copy_file(store, copy);
    copy_file(journal, copy_journal);
    mnemo_store* s = nullptr;
    ASSERT_OK(mnemo_store_open_durable(mt::rt(), copy.c_str(), nullptr, &s));
    mt::StorePtr owned(s);
    crash::Model got;
    std::string why;
    ASSERT_TRUE(dt::read_back(s, got, why)) << why;
    if (got == expect) {
      ++in_flight_lost;
      applied += acks;
      model = expect;
    } else if (got == with_in_flight) {
      ++in_flight_kept;
      applied += acks + 1;
      model = with_in_flight;
    } else {
      FAIL() << "round " << round << " after " << acks << " acknowledged writes from op " << applied << ":\n  store "
             << dt::describe(got) << "\n  want  " << dt::describe(expect) << "\n  or    "
             << dt::describe(with_in_flight);
    }
  }
  // The crashed files themselves open to the same writes.
  mnemo_store* s = nullptr;
  ASSERT_OK(mnemo_store_open_durable(mt::rt(), store.c_str(), nullptr, &s));
  mt::StorePtr owned(s);
  crash::Model got;
  std::string why;
  ASSERT_TRUE(dt::read_back(s, got, why)) << why;
  EXPECT_TRUE(got == model) << dt::describe(got) << "\nwant " << dt::describe(model);

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "crash test: %d kills, %llu acknowledged writes survived (%llu ops applied), in-flight write present "
      "%llu / absent %llu times, %llu kills before the first acknowledgement, %.1f s\n",
      kills, static_cast<unsigned long long>(acked_total), static_cast<unsigned long long>(applied),
      static_cast<unsigned long long>(in_flight_kept), static_cast<unsigned long long>(in_flight_lost),
      static_cast<unsigned long long>(before_first_ack), secs);
  // The rounds did write, more than one write per kill on average.
  EXPECT_GT(acked_total, static_cast<uint64_t>(kills));
}

}  // namespace
