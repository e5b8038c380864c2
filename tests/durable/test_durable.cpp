// Durable stores: reopening gives every write back, checkpoints meet the
// journal at one sequence number (no write lost or applied twice whatever
// point a crash interrupts), statistics, and argument errors.
#include <sys/stat.h>

#include <cstring>
#include <string>

#include "../support.h"
#include "crash_ops.h"
#include "durable_support.h"

namespace {

mnemo_durable_options create_opts() {
  mnemo_durable_options o = mnemo_durable_options_default();
  o.dim = crash::kDim;
  o.dtype = MNEMO_DTYPE_F32;
  o.metric = MNEMO_METRIC_DOT;
  return o;
}

mnemo_store_statistics stats_of(const mnemo_store* s) {
  mnemo_store_statistics st;
  std::memset(&st, 0xAB, sizeof st);
  st.struct_size = sizeof st;
  EXPECT_OK(mnemo_store_stats(s, &st));
  return st;
}

// Runs ops [first, last) of the sequence on s and on the model; checkpoints
// of the sequence are skipped unless `checkpoints`.
void run_ops(mnemo_store* s, crash::Model& m, uint64_t seed, uint64_t first, uint64_t last, bool checkpoints) {
  for (uint64_t i = first; i < last; ++i) {
    const crash::Op op = crash::op_at(seed, i);
    if (op.kind == crash::Kind::checkpoint && !checkpoints) continue;
    ASSERT_OK(crash::run_op(s, op));
    crash::apply(m, op);
  }
}

mt::StorePtr open_durable(const std::string& path, const mnemo_durable_options* o) {
  mnemo_store* s = nullptr;
  const mnemo_status st = mnemo_store_open_durable(mt::rt(), path.c_str(), o, &s);
  EXPECT_EQ(st, MNEMO_OK) << mt::status_str(st) << ": " << mt::last_error();
  return mt::StorePtr(s);
}

void expect_holds(const mnemo_store* s, const crash::Model& m) {
  crash::Model got;
  std::string why;
  ASSERT_TRUE(dt::read_back(s, got, why)) << why;
  EXPECT_TRUE(got == m) << "store " << dt::describe(got) << "\nwant  " << dt::describe(m);
}

TEST(Durable, ReopenGivesBackEveryWrite) {
  for (const int32_t sync : {MNEMO_SYNC_EACH_WRITE, MNEMO_SYNC_OS}) {
    dt::TempDir dir;
    const std::string path = dir.file("mem.mnemo");
    mnemo_durable_options o = create_opts();
    o.sync = sync;
    crash::Model m;
    uint64_t writes = 0;
    {
      auto s = open_durable(path, &o);
      ASSERT_TRUE(s);
      run_ops(s.get(), m, 7, 0, 80, false);
      expect_holds(s.get(), m);
      const mnemo_store_statistics st = stats_of(s.get());
      EXPECT_EQ(st.durable, 1u);
      EXPECT_EQ(st.vectors, m.size());
      EXPECT_GT(st.journal_records, 40u);
      EXPECT_EQ(st.sequence, st.journal_records);
      EXPECT_EQ(static_cast<uint64_t>(dt::slurp(path + ".journal").size()), st.journal_bytes);
      writes = st.sequence;
    }
    auto s = open_durable(path, nullptr);  // an existing store needs no options
    ASSERT_TRUE(s);
    expect_holds(s.get(), m);
    EXPECT_EQ(stats_of(s.get()).sequence, writes);

    // Checkpoint: the journal empties, the numbering goes on.
    ASSERT_OK(mnemo_store_checkpoint(s.get()));
    mnemo_store_statistics st = stats_of(s.get());
    EXPECT_EQ(st.journal_records, 0u);
    EXPECT_EQ(st.sequence, writes);
    run_ops(s.get(), m, 7, 80, 100, false);
    st = stats_of(s.get());
    EXPECT_EQ(st.sequence, writes + st.journal_records);
    s.reset();
    s = open_durable(path, nullptr);
    ASSERT_TRUE(s);
    expect_holds(s.get(), m);
  }
}

// A crash after a checkpoint's snapshot but before its journal reset leaves
// the old journal, whose records the snapshot holds: none is applied again.
TEST(Durable, CrashBetweenSnapshotAndJournalResetAppliesNothingTwice) {
  dt::TempDir dir;
  const std::string path = dir.file("mem.mnemo"), journal = path + ".journal";
  const mnemo_durable_options o = create_opts();
  crash::Model m;
  auto s = open_durable(path, &o);
  ASSERT_TRUE(s);
  run_ops(s.get(), m, 11, 0, 40, false);
  const std::string old_journal = dt::slurp(journal);
  const uint64_t seq = stats_of(s.get()).sequence;
  ASSERT_OK(mnemo_store_checkpoint(s.get()));
  s.reset();
  dt::spit(journal, old_journal);  // as if the reset never happened
  s = open_durable(path, nullptr);
  ASSERT_TRUE(s);
  expect_holds(s.get(), m);
  mnemo_store_statistics st = stats_of(s.get());
  EXPECT_EQ(st.sequence, seq);
  EXPECT_EQ(st.journal_records, 0u) << "the interrupted reset is finished at open";
  run_ops(s.get(), m, 11, 40, 60, false);
  s.reset();
  s = open_durable(path, nullptr);
  ASSERT_TRUE(s);
  expect_holds(s.get(), m);
}

// A snapshot taken part-way (mnemo_store_save of a durable store) with the
// full journal from an earlier base: records the snapshot lacks are replayed
// once, the others skipped.
TEST(Durable, SnapshotInsideTheJournalReplaysOnlyLaterWrites) {
  dt::TempDir dir;
  const std::string path = dir.file("mem.mnemo"), mid = dir.file("mid.mnemo");
  const mnemo_durable_options o = create_opts();
  crash::Model m;
  auto s = open_durable(path, &o);
  ASSERT_TRUE(s);
  run_ops(s.get(), m, 13, 0, 30, false);
  ASSERT_OK(mnemo_store_save(s.get(), mid.c_str()));
  run_ops(s.get(), m, 13, 30, 60, false);
  const uint64_t seq = stats_of(s.get()).sequence;
  s.reset();
  dt::spit(path, dt::slurp(mid));
  s = open_durable(path, nullptr);
  ASSERT_TRUE(s);
  expect_holds(s.get(), m);
  EXPECT_EQ(stats_of(s.get()).sequence, seq);
  s.reset();
  s = open_durable(path, nullptr);
  ASSERT_TRUE(s);
  expect_holds(s.get(), m);
}

TEST(Durable, FilesThatDoNotBelongTogetherAreRefused) {
  dt::TempDir dir;
  const std::string path = dir.file("mem.mnemo"), journal = path + ".journal";
  const mnemo_durable_options o = create_opts();
  crash::Model m;
  auto s = open_durable(path, &o);
  ASSERT_TRUE(s);
  const std::string empty_snapshot = dt::slurp(path);
  run_ops(s.get(), m, 17, 0, 30, false);
  ASSERT_OK(mnemo_store_checkpoint(s.get()));
  run_ops(s.get(), m, 17, 30, 40, false);
  s.reset();
  mnemo_store* const sentinel = reinterpret_cast<mnemo_store*>(uintptr_t{0x5EED});
  mnemo_store* out = sentinel;

  // The journal follows a checkpoint the snapshot does not hold.
  const std::string snap = dt::slurp(path);
  dt::spit(path, empty_snapshot);
  EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(mt::rt(), path.c_str(), nullptr, &out), MNEMO_E_CORRUPT));
  EXPECT_EQ(out, sentinel);
  dt::spit(path, snap);

  // A journal of another shape.
  const std::string other = dir.file("other.mnemo");
  mnemo_durable_options o2 = create_opts();
  o2.dim = crash::kDim + 1;
  ASSERT_TRUE(open_durable(other, &o2));
  const std::string right_journal = dt::slurp(journal);
  dt::spit(journal, dt::slurp(other + ".journal"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(mt::rt(), path.c_str(), nullptr, &out), MNEMO_E_CORRUPT));
  EXPECT_EQ(out, sentinel);
  dt::spit(journal, right_journal);

  // A journal without its snapshot.
  std::remove(path.c_str());
  EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(mt::rt(), path.c_str(), &o, &out), MNEMO_E_CORRUPT));
  EXPECT_EQ(out, sentinel);
  dt::spit(path, snap);

  // Everything restored: it opens with every write.
  s = open_durable(path, nullptr);
  ASSERT_TRUE(s);
  expect_holds(s.get(), m);
}

TEST(Durable, OneProcessAtATime) {
  dt::TempDir dir;
  const std::string path = dir.file("mem.mnemo");
  const mnemo_durable_options o = create_opts();
  auto a = open_durable(path, &o);
  ASSERT_TRUE(a);
  mnemo_store* b = nullptr;
  EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(mt::rt(), path.c_str(), nullptr, &b), MNEMO_E_IO));
  EXPECT_EQ(b, nullptr);
  a.reset();
  EXPECT_TRUE(open_durable(path, nullptr));
}

TEST(Durable, ArgumentErrors) {
  dt::TempDir dir;
  const std::string path = dir.file("mem.mnemo");
  mnemo_store* const sentinel = reinterpret_cast<mnemo_store*>(uintptr_t{0x5EED});
  mnemo_store* out = sentinel;
  mnemo_durable_options o = create_opts();
  EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(nullptr, path.c_str(), &o, &out), MNEMO_E_NULL_POINTER, "rt"));
  EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(mt::rt(), nullptr, &o, &out), MNEMO_E_NULL_POINTER, "path"));
  EXPECT_TRUE(
      mt::failed_with(mnemo_store_open_durable(mt::rt(), path.c_str(), &o, nullptr), MNEMO_E_NULL_POINTER, "out"));
  o.struct_size = 4;
  EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(mt::rt(), path.c_str(), &o, &out), MNEMO_E_INVALID_ARGUMENT));
  o = create_opts();
  o.sync = 7;
  EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(mt::rt(), path.c_str(), &o, &out), MNEMO_E_INVALID_ARGUMENT));
  o = create_opts();
  o.dim = 65537;
  EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(mt::rt(), path.c_str(), &o, &out), MNEMO_E_INVALID_ARGUMENT));
  o = create_opts();
  o.dtype = MNEMO_DTYPE_U32;
  EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(mt::rt(), path.c_str(), &o, &out), MNEMO_E_DTYPE));
  o = create_opts();
  o.metric = 9;
  EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(mt::rt(), path.c_str(), &o, &out), MNEMO_E_INVALID_ARGUMENT));
  EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(mt::rt(), path.c_str(), nullptr, &out), MNEMO_E_IO));
  EXPECT_EQ(out, sentinel);
  struct stat sb {};
  EXPECT_NE(stat(path.c_str(), &sb), 0) << "a failed open created files";

  o = create_opts();
  ASSERT_TRUE(open_durable(path, &o));
  o.dim = crash::kDim * 2;  // an existing store of another shape
  EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(mt::rt(), path.c_str(), &o, &out), MNEMO_E_SHAPE));
  EXPECT_EQ(out, sentinel);

  auto plain = mt::make_store(4, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE);
  ASSERT_TRUE(plain);
  EXPECT_TRUE(mt::failed_with(mnemo_store_checkpoint(plain.get()), MNEMO_E_UNSUPPORTED));
  EXPECT_TRUE(mt::failed_with(mnemo_store_checkpoint(nullptr), MNEMO_E_NULL_POINTER));
  mnemo_store_statistics st;
  std::memset(&st, 0xAB, sizeof st);
  st.struct_size = 8;
  const std::vector<unsigned char> before(reinterpret_cast<unsigned char*>(&st),
                                          reinterpret_cast<unsigned char*>(&st) + sizeof st);
  EXPECT_TRUE(mt::failed_with(mnemo_store_stats(plain.get(), &st), MNEMO_E_INVALID_ARGUMENT));
  EXPECT_EQ(std::memcmp(before.data(), &st, sizeof st), 0) << "stats written on error";
  EXPECT_TRUE(mt::failed_with(mnemo_store_stats(plain.get(), nullptr), MNEMO_E_NULL_POINTER));
}

// Per-memory last-access times and importance: every write that sets them
// (add with times only, importance only or both, upserts that keep what they
// do not give, set_times, set_importance, a touching search) is journaled,
// replayed at reopen, kept by a checkpoint's snapshot, and reset when the
// memory is removed.
TEST(Durable, MemoryMetadataSurvivesReopen) {
  dt::TempDir dir;
  const std::string path = dir.file("mem.mnemo");
  const mnemo_durable_options o = create_opts();
  crash::Model m;
  uint64_t writes = 0;
  auto row = [](uint64_t id, int salt) {
    crash::AVec<float> v;
    for (uint64_t j = 0; j < crash::kDim; ++j)
      v.push_back(static_cast<float>(static_cast<int>((id * 3 + j + salt) % 7) - 3));
    return v;
  };
  auto write = [&](mnemo_store* s, crash::Op op) {
    ASSERT_OK(crash::run_op(s, op));
    crash::apply(m, op);
    ++writes;
  };
  auto add = [&](mnemo_store* s, crash::Kind kind, std::vector<uint64_t> ids, std::vector<double> t,
                 std::vector<float> imp, int salt) {
    crash::Op op;
    op.kind = kind;
    for (uint64_t id : ids) {
      op.ids.push_back(id);
      const auto v = row(id, salt);
      op.values.insert(op.values.end(), v.begin(), v.end());
    }
    op.times.assign(t.begin(), t.end());
    op.importance.assign(imp.begin(), imp.end());
    write(s, op);
  };
  auto set = [&](mnemo_store* s, crash::Kind kind, std::vector<uint64_t> ids, std::vector<double> t,
                 std::vector<float> v) {
    crash::Op op;
    op.kind = kind;
    op.ids.assign(ids.begin(), ids.end());
    op.times.assign(t.begin(), t.end());
    op.values.assign(v.begin(), v.end());
    write(s, op);
  };
  auto touch = [&](mnemo_store* s, std::vector<uint64_t> ids, uint64_t k, double now) {
    crash::Op op;
    op.kind = crash::Kind::touch;
    op.ids.assign(ids.begin(), ids.end());
    for (uint64_t j = 0; j < crash::kDim; ++j) op.values.push_back(j % 2 ? 1.0f : -1.0f);
    op.k = k;
    op.now = now;
    ASSERT_FALSE(crash::touched(m, op).empty());
    write(s, op);
  };
  const double t0 = crash::kEpoch;
  {
    auto s = open_durable(path, &o);
    ASSERT_TRUE(s);
    using K = crash::Kind;
    add(s.get(), K::add_memories, {1, 2}, {t0 + 1, t0 + 2.5}, {}, 0);                 // times only
    add(s.get(), K::add_memories, {3, 4}, {}, {0.25f, -1.5f}, 0);                     // importance only
    add(s.get(), K::add_memories, {5, 6, 7}, {t0 - 9, t0, t0 + 7}, {2, 0.5f, 3}, 0);  // both
    add(s.get(), K::add, {1, 8}, {}, {}, 1);                                          // an upsert keeps the time of 1
    add(s.get(), K::add_memories, {3}, {t0 + 33}, {}, 2);                             // ... and the importance of 3
    add(s.get(), K::add_memories, {4}, {}, {4.75f}, 3);                               // ... and the time of 4 (0)
    set(s.get(), K::set_times, {2, 8}, {t0 + 20, t0 - 1e6}, {});
    set(s.get(), K::set_importance, {1, 6}, {}, {-2.0f, 1.25f});
    set(s.get(), K::set_bias, {5}, {}, {3.0f});
    touch(s.get(), {1, 2, 3, 4, 5, 6, 7, 8}, 3, t0 + 1000);
    expect_holds(s.get(), m);
    // Refused writes change nothing and are not journaled.
    const crash::AVec<uint64_t> absent{1, 40};
    const crash::AVec<double> t{t0, t0};
    const crash::AVec<float> imp{1.0f, 1.0f};
    EXPECT_TRUE(mt::failed_with(mnemo_store_set_times(s.get(), absent.data(), t.data(), 2), MNEMO_E_NOT_FOUND));
    EXPECT_TRUE(mt::failed_with(mnemo_store_set_importance(s.get(), absent.data(), imp.data(), 2), MNEMO_E_NOT_FOUND));
    // An activation search without touch is no write.
    mnemo_search_options so = mnemo_search_options_default();
    so.activation = 1;
    so.now = t0;
    crash::AVec<float> q(crash::kDim, 1.0f);
    crash::AVec<uint64_t> ids(4);
    crash::AVec<float> sc(4);
    ASSERT_OK(mnemo_store_search(s.get(), q.data(), 1, 4, &so, ids.data(), sc.data()));
    const mnemo_store_statistics st = stats_of(s.get());
    EXPECT_EQ(st.journal_records, writes);
    EXPECT_EQ(st.sequence, writes);
    expect_holds(s.get(), m);
  }
  // From the journal.
  auto s = open_durable(path, nullptr);
  ASSERT_TRUE(s);
  expect_holds(s.get(), m);
  EXPECT_EQ(stats_of(s.get()).sequence, writes);
  // A touch before a checkpoint, from the snapshot.
  touch(s.get(), {2, 5, 7}, 2, t0 - 50);  // a now before the times it replaces: they still become now
  ASSERT_OK(mnemo_store_checkpoint(s.get()));
  s.reset();
  const std::string snap = dt::slurp(path);
  ASSERT_GE(snap.size(), 16u);
  uint32_t version = 0;
  std::memcpy(&version, snap.data() + 8, 4);
  EXPECT_EQ(version, 5u) << "a checkpoint writes the current snapshot format";
  s = open_durable(path, nullptr);
  ASSERT_TRUE(s);
  expect_holds(s.get(), m);
  EXPECT_EQ(stats_of(s.get()).journal_records, 0u);
  // After the checkpoint: a removed memory's metadata goes with it; added
  // again it starts from zero.
  {
    crash::Op rm;
    rm.kind = crash::Kind::remove;
    rm.ids.push_back(6);
    write(s.get(), rm);
  }
  add(s.get(), crash::Kind::add, {6}, {}, {}, 4);
  touch(s.get(), {4, 6, 8}, 3, t0 + 5000);
  set(s.get(), crash::Kind::set_importance, {8}, {}, {0.75f});
  s.reset();
  s = open_durable(path, nullptr);
  ASSERT_TRUE(s);
  expect_holds(s.get(), m);
  EXPECT_EQ(m.at(6).importance, 0.0f);
  EXPECT_EQ(m.at(6).time, t0 + 5000);
}

// Statistics of a plain store follow adds, removes and compaction.
TEST(Durable, StatsOfAPlainStore) {
  auto s = mt::make_store(crash::kDim, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
  ASSERT_TRUE(s);
  crash::Model m;
  crash::AVec<uint64_t> ids;
  crash::AVec<float> v;
  for (uint64_t i = 0; i < 40; ++i) {
    ids.push_back(100 + i);
    for (uint64_t j = 0; j < crash::kDim; ++j) v.push_back(static_cast<float>(j) - 2.5f);
  }
  ASSERT_OK(mnemo_store_add(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 40));
  mnemo_store_statistics st = stats_of(s.get());
  EXPECT_EQ(st.durable, 0u);
  EXPECT_EQ(st.vectors, 40u);
  EXPECT_EQ(st.tombstones, 0u);
  EXPECT_EQ(st.slots, 40u);
  EXPECT_GE(st.host_bytes, 40u * crash::kDim * 4);
  EXPECT_EQ(st.journal_records, 0u);
  EXPECT_EQ(st.journal_bytes, 0u);
  EXPECT_EQ(st.sequence, 0u);
  ASSERT_OK(mnemo_store_remove(s.get(), ids.data(), 5, nullptr));  // 5 of 40: kept as tombstones
  st = stats_of(s.get());
  EXPECT_EQ(st.vectors, 35u);
  EXPECT_EQ(st.tombstones, 5u);
  EXPECT_EQ(st.slots, 40u);
  const crash::AVec<uint64_t> more(ids.begin() + 5, ids.begin() + 15);
  ASSERT_OK(mnemo_store_remove(s.get(), more.data(), more.size(), nullptr));  // 15 of 40: compacts
  st = stats_of(s.get());
  EXPECT_EQ(st.vectors, 25u);
  EXPECT_EQ(st.tombstones, 0u);
  EXPECT_EQ(st.slots, 25u);
  // A larger struct from a newer header: only the known prefix is written.
  struct Bigger {
    mnemo_store_statistics s;
    uint64_t tail;
  } big;
  std::memset(&big, 0xAB, sizeof big);
  big.s.struct_size = sizeof big;
  ASSERT_OK(mnemo_store_stats(s.get(), &big.s));
  EXPECT_EQ(big.s.vectors, 25u);
  EXPECT_EQ(big.s.struct_size, sizeof big);
  EXPECT_EQ(big.tail, 0xABABABABABABABABull);
}

}  // namespace
