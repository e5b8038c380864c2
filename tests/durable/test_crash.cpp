// A durable writer killed with SIGKILL at random moments: after every kill
// the store holds exactly the acknowledged writes, plus at most the one write
// that was in flight. The child runs as its own program (posix_spawn) and
// acknowledges each write on a pipe once the call has returned.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "../support.h"
#include "crash_fields.h"
#include "crash_ops.h"
#include "durable_support.h"

namespace {

struct Child {
  pid_t pid = -1;
  int ack_fd = -1;
};

// The child program with `args`, its stdout on a pipe the parent reads.
// posix_spawn: nothing of this process runs in the child before the exec
// (a fork ran the OpenMP runtime's fork handler there, which registers the
// child's pid in /dev/shm; see reap).
Child spawn_child(std::vector<std::string> args) {
  int p[2];
  if (pipe(p) != 0) return {};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_addclose(&fa, p[0]);
  posix_spawn_file_actions_addclose(&fa, p[1]);
  args.insert(args.begin(), MNEMO_CRASH_CHILD);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, MNEMO_CRASH_CHILD, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  if (rc != 0) {
    close(p[0]);
    return {};
  }
  return {pid, p[0]};
}

// Waits for a killed child and removes the registration file the LLVM
// OpenMP runtime keeps in /dev/shm under its pid: a child killed while that
// runtime starts leaves the file empty, and a later process given the same
// pid then dies of SIGBUS reading it as it starts its own runtime (seen in
// CI's ASan suite). Returns waitpid's result.
pid_t reap(pid_t pid, int* status) {
  const pid_t r = waitpid(pid, status, 0);
  const std::string shm = "/dev/shm/__KMP_REGISTERED_LIB_" + std::to_string(pid) + "_" + std::to_string(getuid());
  unlink(shm.c_str());
  return r;
}

Child spawn(const std::string& store, uint64_t seed, uint64_t first) {
  return spawn_child({store, std::to_string(seed), std::to_string(first)});
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
  uint64_t applied = 0, acked_total = 0, in_flight_kept = 0, in_flight_lost = 0, before_first_ack = 0,
           indexed_rounds = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int round = 0; round < kills; ++round) {
    // Wait for a random number of acknowledgements (0: kill during open and
    // replay), then a random moment more, then kill.
    const uint64_t want = mt::rand_below(rng, 13);
    const uint64_t extra_us = mt::rand_below(rng, 3000);
    Child c = spawn(store, seed, applied);
    ASSERT_GT(c.pid, 0) << "spawn failed";
    uint64_t acks = read_acks(c.ack_fd, want, 10000);
    if (extra_us) usleep(static_cast<useconds_t>(extra_us));
    kill(c.pid, SIGKILL);
    acks += drain(c.ack_fd);
    close(c.ack_fd);
    int status = 0;
    ASSERT_EQ(reap(c.pid, &status), c.pid);
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
    // A recovered index (journaled layouts, snapshot sections) reads every
    // memory when every list is probed: the exact scan's results.
    mnemo_index_info info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    ASSERT_OK(mnemo_store_index_info(s, &info));
    if (info.nlist > 0) {
      ++indexed_rounds;
      crash::AVec<float> q(crash::kDim, 1.0f);
      q[0] = 2.0f;
      crash::AVec<uint64_t> ids_exact(8), ids_probe(8);
      crash::AVec<float> sc_exact(8), sc_probe(8);
      mnemo_search_options o = mnemo_search_options_default();
      ASSERT_OK(mnemo_store_search(s, q.data(), 1, 8, &o, ids_exact.data(), sc_exact.data()));
      o.nprobe = info.nlist;
      ASSERT_OK(mnemo_store_search(s, q.data(), 1, 8, &o, ids_probe.data(), sc_probe.data()));
      ASSERT_TRUE(std::equal(ids_exact.begin(), ids_exact.end(), ids_probe.begin())) << "round " << round;
    }
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
      "%llu / absent %llu times, %llu kills before the first acknowledgement, %llu recoveries with an index "
      "checked, %.1f s\n",
      kills, static_cast<unsigned long long>(acked_total), static_cast<unsigned long long>(applied),
      static_cast<unsigned long long>(in_flight_kept), static_cast<unsigned long long>(in_flight_lost),
      static_cast<unsigned long long>(before_first_ack), static_cast<unsigned long long>(indexed_rounds), secs);
  // The rounds did write, more than one write per kill on average.
  EXPECT_GT(acked_total, static_cast<uint64_t>(kills));
}

// A writer killed while a checkpoint or a save streams a snapshot of several
// pieces (kIoChunkBytes each) to disk: the snapshot is the old file or the new
// one, never a mix, the durable store holds exactly the acknowledged writes
// (plus at most the one in flight) and the saved copy opens whole.
Child spawn_save(const std::string& store, uint64_t rows, uint64_t first) {
  return spawn_child({store, "save", std::to_string(rows), std::to_string(first)});
}

// Whether a temporary snapshot (a save under way) is in `dir`.
bool save_under_way(const std::string& dir) {
  bool found = false;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) found |= std::string(e->d_name).find(".tmp.") != std::string::npos;
    closedir(d);
  }
  return found;
}

void remove_temporaries(const std::string& dir) {
  std::vector<std::string> tmp;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).find(".tmp.") != std::string::npos) tmp.push_back(dir + "/" + e->d_name);
    closedir(d);
  }
  for (const std::string& f : tmp) std::remove(f.c_str());
}

TEST(Crash, KilledDuringStreamingSaveKeepsOldOrNewSnapshot) {
  auto rng = mt::rng_for_test();
  const int kills = env_int("MNEMO_CRASH_SAVE_KILLS", 10);
  const uint64_t rows = 300000;  // a 14 MB snapshot: several pieces per write
  dt::TempDir dir, check;
  ASSERT_FALSE(dir.path().empty());
  const std::string store = dir.file("store.mnemo"), journal = store + ".journal", saved = store + ".copy";
  const std::string copy = check.file("store.mnemo"), copy_journal = copy + ".journal";
  {
    mnemo_durable_options o = mnemo_durable_options_default();
    o.dim = crash::kDim;
    o.metric = MNEMO_METRIC_DOT;
    o.sync = MNEMO_SYNC_OS;
    mnemo_store* s = nullptr;
    ASSERT_OK(mnemo_store_open_durable(mt::rt(), store.c_str(), &o, &s));
    mt::StorePtr owned(s);
    crash::AVec<uint64_t> ids(rows);
    crash::AVec<float> v(rows * crash::kDim);
    for (uint64_t i = 0; i < rows; ++i) ids[i] = i + 1, crash::base_row(i + 1, v.data() + i * crash::kDim);
    ASSERT_OK(mnemo_store_add(s, ids.data(), v.data(), MNEMO_DTYPE_F32, rows));
    ASSERT_OK(mnemo_store_checkpoint(s));
  }
  // Row `id` after `done` ops.
  auto want_row = [&](uint64_t id, uint64_t done, float* v) {
    crash::base_row(id, v);
    for (uint64_t i = 0; i < done; ++i)
      if (crash::save_op_id(i, rows) == id) crash::save_op_row(i, v);
  };
  uint64_t applied = 0, during_save = 0;
  for (int round = 0; round < kills; ++round) {
    Child c = spawn_save(store, rows, applied);
    ASSERT_GT(c.pid, 0) << "spawn failed";
    uint64_t acks = read_acks(c.ack_fd, mt::rand_below(rng, 3), 20000);
    // Kill while a snapshot is being written when one shows up within 2 s.
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!save_under_way(dir.path()) && std::chrono::steady_clock::now() < end) usleep(200);
    usleep(static_cast<useconds_t>(mt::rand_below(rng, 2000)));
    const bool saving = save_under_way(dir.path());
    kill(c.pid, SIGKILL);
    acks += drain(c.ack_fd);
    close(c.ack_fd);
    int status = 0;
    ASSERT_EQ(reap(c.pid, &status), c.pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "round " << round << ": the child ended by itself";
    during_save += saving;

    copy_file(store, copy);
    copy_file(journal, copy_journal);
    mnemo_store* s = nullptr;
    ASSERT_OK(mnemo_store_open_durable(mt::rt(), copy.c_str(), nullptr, &s));
    mt::StorePtr owned(s);
    uint64_t n = 0;
    ASSERT_OK(mnemo_store_count(s, &n));
    ASSERT_EQ(n, rows);
    crash::AVec<float> got(crash::kDim), want(crash::kDim), alt(crash::kDim);
    const uint64_t done = applied + acks;
    // Every acknowledged write, and the one in flight either way.
    for (uint64_t i = applied; i <= done; ++i) {
      const uint64_t id = crash::save_op_id(i, rows);
      ASSERT_OK(mnemo_store_get(s, id, got.data()));
      want_row(id, i + 1, want.data());
      want_row(id, i, alt.data());
      const bool now = std::equal(got.begin(), got.end(), want.begin());
      const bool before = std::equal(got.begin(), got.end(), alt.begin());
      if (i < done)
        ASSERT_TRUE(now) << "round " << round << ": acknowledged write " << i << " lost";
      else
        ASSERT_TRUE(now || before) << "round " << round << ": in-flight write " << i << " garbled";
      if (i == done && now) ++applied;
    }
    applied += acks;
    // Rows no write touched are as they started.
    for (uint64_t id : {uint64_t{2}, rows / 2 + 3, rows}) {
      bool touched = false;
      for (uint64_t i = 0; i <= applied; ++i) touched |= crash::save_op_id(i, rows) == id;
      if (touched) continue;
      ASSERT_OK(mnemo_store_get(s, id, got.data()));
      crash::base_row(id, want.data());
      ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << "round " << round << ": row " << id;
    }
    // The saved copy, when there is one, is a whole store.
    if (access(saved.c_str(), F_OK) == 0) {
      mnemo_store* c2 = nullptr;
      ASSERT_OK(mnemo_store_open(mt::rt(), saved.c_str(), &c2));
      mt::StorePtr owned2(c2);
      ASSERT_OK(mnemo_store_count(c2, &n));
      ASSERT_EQ(n, rows);
    }
    // A kill leaves its temporary snapshot behind; the next child writes its own.
    remove_temporaries(dir.path());
  }
  std::printf("streaming-save crash test: %d kills, %llu while a snapshot was being written, %llu writes kept\n", kills,
              static_cast<unsigned long long>(during_save), static_cast<unsigned long long>(applied));
  EXPECT_GT(during_save, 0u);
}

// A durable writer of memories' fields (adds with fields, field updates,
// plain adds, removes, checkpoints; now and then a payload of up to 256 KiB,
// so a kill lands inside a record) killed with SIGKILL at random moments:
// after every kill the store holds exactly the acknowledged writes with their
// fields, plus at most the one in flight.
Child spawn_fields(const std::string& store, uint64_t seed, uint64_t first) {
  return spawn_child({store, "fields", std::to_string(seed), std::to_string(first)});
}

TEST(Crash, KilledFieldsWriterKeepsEveryAcknowledgedWriteWithItsFields) {
  auto rng = mt::rng_for_test();
  const uint64_t seed = rng() % 1000000;
  const int kills = env_int("MNEMO_CRASH_KILLS", 220) / 2;
  dt::TempDir dir, check;
  ASSERT_FALSE(dir.path().empty());
  const std::string store = dir.file("store.mnemo"), journal = store + ".journal";
  const std::string copy = check.file("store.mnemo"), copy_journal = copy + ".journal";
  crash::FieldsState model;
  uint64_t applied = 0, acked_total = 0, in_flight_kept = 0, in_flight_lost = 0, with_fields = 0;
  for (int round = 0; round < kills; ++round) {
    const uint64_t want = mt::rand_below(rng, 13);
    const uint64_t extra_us = mt::rand_below(rng, 3000);
    Child c = spawn_fields(store, seed, applied);
    ASSERT_GT(c.pid, 0) << "spawn failed";
    uint64_t acks = read_acks(c.ack_fd, want, 10000);
    if (extra_us) usleep(static_cast<useconds_t>(extra_us));
    kill(c.pid, SIGKILL);
    acks += drain(c.ack_fd);
    close(c.ack_fd);
    int status = 0;
    ASSERT_EQ(reap(c.pid, &status), c.pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "round " << round << ": the child ended by itself (exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
        << ") instead of being killed";
    acked_total += acks;
    crash::FieldsState expect = model;
    for (uint64_t i = 0; i < acks; ++i) crash::apply(expect, crash::fields_op_at(seed, applied + i));
    crash::FieldsState with_in_flight = expect;
    crash::apply(with_in_flight, crash::fields_op_at(seed, applied + acks));
    if (access(store.c_str(), F_OK) != 0) {
      ASSERT_EQ(acks, 0u) << "round " << round << ": writes acknowledged but no snapshot on disk";
      continue;
    }
    copy_file(store, copy);
    copy_file(journal, copy_journal);
    mnemo_store* s = nullptr;
    ASSERT_OK(mnemo_store_open_durable(mt::rt(), copy.c_str(), nullptr, &s));
    mt::StorePtr owned(s);
    crash::FieldsState got;
    std::string why;
    ASSERT_TRUE(crash::read_back(s, got, why)) << why;
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
             << crash::describe(got) << "\n  want  " << crash::describe(expect) << "\n  or    "
             << crash::describe(with_in_flight);
    }
    with_fields += model.fields.all().size();
  }
  mnemo_store* s = nullptr;
  ASSERT_OK(mnemo_store_open_durable(mt::rt(), store.c_str(), nullptr, &s));
  mt::StorePtr owned(s);
  crash::FieldsState got;
  std::string why;
  ASSERT_TRUE(crash::read_back(s, got, why)) << why;
  EXPECT_TRUE(got == model) << crash::describe(got) << "\nwant " << crash::describe(model);
  std::printf(
      "fields crash test: %d kills, %llu acknowledged writes survived (%llu ops applied), in-flight write present "
      "%llu / absent %llu times, %.1f memories with fields on average\n",
      kills, static_cast<unsigned long long>(acked_total), static_cast<unsigned long long>(applied),
      static_cast<unsigned long long>(in_flight_kept), static_cast<unsigned long long>(in_flight_lost),
      kills > 0 ? static_cast<double>(with_fields) / kills : 0.0);
  EXPECT_GT(acked_total, static_cast<uint64_t>(kills));
}

}  // namespace
