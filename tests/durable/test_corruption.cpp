// Damaged files: every single-bit flip and every truncation of a snapshot is
// refused as corrupt; in a journal only the final record may be torn (then
// it is dropped and everything before it kept); damage anywhere else in the
// journal is refused. Nothing is ever half-loaded.
#include <string>
#include <vector>

#include "../support.h"
#include "crash_ops.h"
#include "durable_support.h"

namespace {

mnemo_store* const kSentinel = reinterpret_cast<mnemo_store*>(uintptr_t{0x5EED});

mnemo_status try_open(const std::string& path, mnemo_store** out) {
  *out = kSentinel;
  return mnemo_store_open_durable(mt::rt(), path.c_str(), nullptr, out);
}

struct Written {
  std::string snapshot, journal;
  std::vector<uint64_t> record_end;  // journal size after each record
  std::vector<crash::Model> after;   // model after each record (after[0]: none)
};

// A durable store with a few records of each kind in its journal.
Written make_files(const dt::TempDir& dir, uint64_t seed) {
  Written w;
  const std::string path = dir.file("src.mnemo");
  mnemo_durable_options o = mnemo_durable_options_default();
  o.dim = crash::kDim;
  o.metric = MNEMO_METRIC_DOT;
  mnemo_store* s = nullptr;
  EXPECT_OK(mnemo_store_open_durable(mt::rt(), path.c_str(), &o, &s));
  mt::StorePtr owned(s);
  crash::Model m;
  mnemo_store_statistics st{};
  st.struct_size = sizeof st;
  EXPECT_OK(mnemo_store_stats(s, &st));
  w.record_end.push_back(st.journal_bytes);
  w.after.push_back(m);
  for (uint64_t i = 0; w.after.size() < 8; ++i) {
    const crash::Op op = crash::op_at(seed, i);
    if (op.kind == crash::Kind::checkpoint) continue;
    EXPECT_OK(crash::run_op(s, op));
    crash::apply(m, op);
    EXPECT_OK(mnemo_store_stats(s, &st));
    if (st.journal_bytes != w.record_end.back()) {  // this write made a record
      w.record_end.push_back(st.journal_bytes);
      w.after.push_back(m);
    }
  }
  owned.reset();
  w.snapshot = dt::slurp(path);
  w.journal = dt::slurp(path + ".journal");
  return w;
}

TEST(Corruption, EveryBitFlipAndTruncationOfASnapshotIsRefused) {
  dt::TempDir dir;
  // A snapshot holding vectors and biases: checkpoint a store with writes.
  const std::string src = dir.file("src.mnemo");
  {
    mnemo_durable_options o = mnemo_durable_options_default();
    o.dim = crash::kDim;
    o.metric = MNEMO_METRIC_DOT;
    mnemo_store* s = nullptr;
    ASSERT_OK(mnemo_store_open_durable(mt::rt(), src.c_str(), &o, &s));
    mt::StorePtr owned(s);
    crash::Model m;
    for (uint64_t i = 0; i < 12; ++i) {
      const crash::Op op = crash::op_at(3, i);
      ASSERT_OK(crash::run_op(s, op));
      crash::apply(m, op);
    }
    ASSERT_OK(mnemo_store_checkpoint(s));
    ASSERT_GT(m.size(), 2u);
  }
  const std::string snap = dt::slurp(src), journal = dt::slurp(src + ".journal");
  const std::string path = dir.file("bad.mnemo");
  uint64_t refused = 0, trials = 0;
  for (size_t bit = 0; bit < snap.size() * 8; ++bit) {
    std::string b = snap;
    b[bit / 8] = static_cast<char>(b[bit / 8] ^ (1 << (bit % 8)));
    dt::spit(path, b);
    dt::spit(path + ".journal", journal);
    mnemo_store* out = nullptr;
    const mnemo_status st = try_open(path, &out);
    ++trials;
    if (st == MNEMO_OK) {
      mnemo_store_destroy(out);
      ADD_FAILURE() << "bit " << bit << " flipped, snapshot accepted";
      continue;
    }
    refused += mt::failed_with(st, MNEMO_E_CORRUPT) && out == kSentinel;
  }
  for (size_t len = 0; len < snap.size(); ++len) {
    dt::spit(path, snap.substr(0, len));
    dt::spit(path + ".journal", journal);
    mnemo_store* out = nullptr;
    const mnemo_status st = try_open(path, &out);
    ++trials;
    if (st == MNEMO_OK) {
      mnemo_store_destroy(out);
      ADD_FAILURE() << "truncated to " << len << " bytes, snapshot accepted";
      continue;
    }
    refused += mt::failed_with(st, MNEMO_E_CORRUPT) && out == kSentinel;
  }
  EXPECT_EQ(refused, trials);
  std::printf("snapshot: %llu damaged copies (%zu bit flips, %zu truncations), all refused as corrupt\n",
              static_cast<unsigned long long>(trials), snap.size() * 8, snap.size());
}

TEST(Corruption, JournalDamageOutsideTheTornTailIsRefused) {
  dt::TempDir dir;
  const Written w = make_files(dir, 5);
  const uint64_t records = w.record_end.size() - 1;
  ASSERT_GE(records, 5u);
  const uint64_t last_start = w.record_end[records - 1];
  const std::string path = dir.file("bad.mnemo");
  uint64_t refused = 0, torn = 0, bad = 0;
  for (size_t bit = 0; bit < w.journal.size() * 8; ++bit) {
    std::string j = w.journal;
    j[bit / 8] = static_cast<char>(j[bit / 8] ^ (1 << (bit % 8)));
    dt::spit(path, w.snapshot);
    dt::spit(path + ".journal", j);
    mnemo_store* out = nullptr;
    const mnemo_status st = try_open(path, &out);
    if (st != MNEMO_OK) {
      if (mt::failed_with(st, MNEMO_E_CORRUPT) && out == kSentinel)
        ++refused;
      else
        ++bad, ADD_FAILURE() << "bit " << bit << ": " << mt::status_str(st);
      continue;
    }
    mt::StorePtr owned(out);
    // Accepted only as a torn final record: everything before it, nothing of it.
    crash::Model got;
    std::string why;
    const bool read = dt::read_back(out, got, why);
    if (bit / 8 >= last_start && read && got == w.after[records - 1]) {
      ++torn;
    } else {
      ++bad;
      ADD_FAILURE() << "bit " << bit << " (byte " << bit / 8 << ", last record from " << last_start
                    << ") flipped, journal accepted holding " << dt::describe(got);
    }
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(torn, 0u);
  std::printf("journal: %zu bit flips: %llu refused as corrupt, %llu read as a torn final record\n",
              w.journal.size() * 8, static_cast<unsigned long long>(refused), static_cast<unsigned long long>(torn));
}

TEST(Corruption, TruncatedJournalKeepsEveryCompleteRecord) {
  dt::TempDir dir;
  const Written w = make_files(dir, 9);
  const std::string path = dir.file("cut.mnemo");
  uint64_t opened = 0;
  for (size_t len = 0; len <= w.journal.size(); ++len) {
    dt::spit(path, w.snapshot);
    dt::spit(path + ".journal", w.journal.substr(0, len));
    mnemo_store* out = nullptr;
    const mnemo_status st = try_open(path, &out);
    if (len < w.record_end[0]) {  // inside the journal header: not a crash we make
      EXPECT_TRUE(mt::failed_with(st, MNEMO_E_CORRUPT)) << "journal cut to " << len;
      EXPECT_EQ(out, kSentinel);
      continue;
    }
    ASSERT_EQ(st, MNEMO_OK) << "journal cut to " << len << ": " << mt::last_error();
    mt::StorePtr owned(out);
    size_t complete = 0;
    while (complete + 1 < w.record_end.size() && w.record_end[complete + 1] <= len) ++complete;
    crash::Model got;
    std::string why;
    ASSERT_TRUE(dt::read_back(out, got, why)) << why;
    EXPECT_TRUE(got == w.after[complete]) << "journal cut to " << len << " holds " << dt::describe(got);
    // The torn tail is cut off, so new records follow the last good one.
    mnemo_store_statistics st2{};
    st2.struct_size = sizeof st2;
    ASSERT_OK(mnemo_store_stats(out, &st2));
    EXPECT_EQ(st2.journal_bytes, w.record_end[complete]);
    EXPECT_EQ(dt::slurp(path + ".journal").size(), w.record_end[complete]);
    ++opened;
  }
  std::printf("journal: %zu truncations, %llu opened with every complete record\n", w.journal.size() + 1,
              static_cast<unsigned long long>(opened));
}

}  // namespace
