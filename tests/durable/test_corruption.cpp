// Damaged files: every single-bit flip and every truncation of a snapshot is
// refused as corrupt; in a journal only the final record may be torn (then
// it is dropped and everything before it kept); damage anywhere else in the
// journal is refused. Nothing is ever half-loaded.
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <limits>
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

// A snapshot past the size from which it is read by a team of threads (64 MiB
// of vectors): damage in any piece of the vector section, the first, one in
// the middle or the last, is refused, and so is a non-finite element under a
// valid checksum (the file a buggy or hostile writer would make). The intact
// file opens to the same search results as the store it was saved from.
TEST(Corruption, LargeSnapshotDamageInAnyPieceIsRefused) {
  dt::TempDir dir;
  const uint64_t dim = 768, n = 23000;  // 70.7 MB of f32 vectors
  const std::string src = dir.file("large.mnemo"), path = dir.file("bad.mnemo");
  auto rng = mt::rng_for_test();
  std::vector<float> vecs(n * dim), q(3 * dim);
  for (float& v : vecs) v = mt::rand_nonzero(rng);
  for (float& v : q) v = mt::rand_nonzero(rng);
  std::vector<uint64_t> ids(n);
  for (uint64_t i = 0; i < n; ++i) ids[i] = 7 + 3 * i;
  const uint64_t k = 25;
  std::vector<uint64_t> want_ids(3 * k);
  std::vector<float> want_scores(3 * k);
  {
    mt::StorePtr s = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE);
    ASSERT_TRUE(s);
    ASSERT_OK(mnemo_store_add(s.get(), ids.data(), vecs.data(), MNEMO_DTYPE_F32, n));
    ASSERT_OK(mnemo_store_search(s.get(), q.data(), 3, k, nullptr, want_ids.data(), want_scores.data()));
    ASSERT_OK(mnemo_store_save(s.get(), src.c_str()));
  }
  const std::string snap = dt::slurp(src);
  // The vector section: after the header (48 bytes and its checksum) and the
  // ids section (16-byte head, 8 bytes per memory, 8-byte checksum).
  const uint64_t head = 56 + 16 + 8 * n + 8, payload = head + 16, bytes = n * dim * 4;
  uint32_t tag = 0;
  uint64_t size = 0;
  std::memcpy(&tag, snap.data() + head, 4);
  std::memcpy(&size, snap.data() + head + 8, 8);
  ASSERT_EQ(tag, 2u);
  ASSERT_EQ(size, bytes);
  ASSERT_GE(snap.size(), payload + bytes + 8);

  auto open = [&](const std::string& bytes_of_file, mnemo_store** out) {
    dt::spit(path, bytes_of_file);
    *out = kSentinel;
    return mnemo_store_open(mt::rt(), path.c_str(), out);
  };
  {
    mnemo_store* out = nullptr;
    ASSERT_OK(open(snap, &out));
    mt::StorePtr owned(out);
    std::vector<uint64_t> got_ids(3 * k, ~uint64_t{0});
    std::vector<float> got_scores(3 * k, std::numeric_limits<float>::quiet_NaN());
    ASSERT_OK(mnemo_store_search(out, q.data(), 3, k, nullptr, got_ids.data(), got_scores.data()));
    EXPECT_EQ(got_ids, want_ids);
    EXPECT_EQ(0, std::memcmp(got_scores.data(), want_scores.data(), want_scores.size() * 4));
  }
  for (const uint64_t at : {uint64_t{5}, bytes / 2 + 3, bytes - 1}) {
    std::string b = snap;
    b[payload + at] = static_cast<char>(b[payload + at] ^ 0x10);
    mnemo_store* out = nullptr;
    const mnemo_status st = open(b, &out);
    EXPECT_TRUE(mt::failed_with(st, MNEMO_E_CORRUPT)) << "byte " << at << " of the vectors";
    EXPECT_EQ(out, kSentinel);
    EXPECT_NE(mt::last_error().find("checksum mismatch in the vectors section"), std::string::npos) << mt::last_error();
  }
  for (const uint64_t elem : {uint64_t{1}, n * dim / 2 + 11, n * dim - 1}) {
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
      std::string b = snap;
      std::memcpy(&b[payload + elem * 4], &bad, 4);
      const uint64_t sum = XXH3_64bits(b.data() + payload, bytes);
      std::memcpy(&b[payload + bytes], &sum, 8);
      mnemo_store* out = nullptr;
      const mnemo_status st = open(b, &out);
      EXPECT_TRUE(mt::failed_with(st, MNEMO_E_CORRUPT)) << "element " << elem;
      EXPECT_EQ(out, kSentinel);
      EXPECT_NE(mt::last_error().find("non-finite vector element"), std::string::npos) << mt::last_error();
    }
  }
}
