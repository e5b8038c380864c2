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
    // An index too: its section is damaged and cut like every other.
    mnemo_index_options io = mnemo_index_options_default();
    io.nlist = 2;
    io.background = 0;
    ASSERT_OK(mnemo_store_build_index(s, &io));
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
  // The vector section: after the header (56 bytes and its checksum) and the
  // ids section (16-byte head, 8 bytes per memory, 8-byte checksum).
  const uint64_t head = 64 + 16 + 8 * n + 8, payload = head + 16, bytes = n * dim * 4;
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

// ---- per-memory metadata (times and importance) -------------------------------

namespace {

constexpr uint64_t kJournalHead = 48, kRecordHead = 40;

template <class T>
void put_at(std::string& b, uint64_t at, T v) {
  std::memcpy(&b[at], &v, sizeof v);
}

template <class T>
T get_at(const std::string& b, uint64_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// [begin, end) of each journal record, from the declared payload sizes.
std::vector<std::pair<uint64_t, uint64_t>> record_spans(const std::string& j) {
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (uint64_t pos = kJournalHead; pos + kRecordHead <= j.size();) {
    const uint64_t end = pos + kRecordHead + get_at<uint64_t>(j, pos + 24) + 8;
    if (end > j.size()) break;
    spans.emplace_back(pos, end);
    pos = end;
  }
  return spans;
}

// A record's head check and checksum made valid again after an edit: what a
// buggy or hostile writer would leave, not a damaged disk.
void reseal(std::string& j, std::pair<uint64_t, uint64_t> span) {
  const auto [begin, end] = span;
  put_at<uint32_t>(j, begin + 36, static_cast<uint32_t>(XXH3_64bits(j.data() + begin, 36)));
  put_at<uint64_t>(j, end - 8, XXH3_64bits(j.data() + begin, end - 8 - begin));
}

crash::AVec<float> rows_of(std::initializer_list<uint64_t> ids) {
  crash::AVec<float> v;
  for (uint64_t id : ids)
    for (uint64_t j = 0; j < crash::kDim; ++j) v.push_back(static_cast<float>((id + j) % 5) - 2.0f);
  return v;
}

const double kNaN = std::numeric_limits<double>::quiet_NaN(), kInf = std::numeric_limits<double>::infinity();

}  // namespace

// Journal records of the metadata writes whose values no write could have
// made (NaN or infinite times or importances), or that name an absent
// memory, or carry unknown flags, under valid checks: refused as corrupt,
// wherever the record lies, the final one included.
TEST(Corruption, JournaledMetadataThatNoWriteCouldMakeIsRefused) {
  dt::TempDir dir;
  const std::string src = dir.file("src.mnemo");
  {
    mnemo_durable_options o = mnemo_durable_options_default();
    o.dim = crash::kDim;
    o.metric = MNEMO_METRIC_DOT;
    mnemo_store* s = nullptr;
    ASSERT_OK(mnemo_store_open_durable(mt::rt(), src.c_str(), &o, &s));
    mt::StorePtr owned(s);
    const crash::AVec<uint64_t> ids12{1, 2}, ids2{2}, ids3{3}, ids4{4}, ids5{5};
    const crash::AVec<double> t12{crash::kEpoch, crash::kEpoch + 1}, t3{crash::kEpoch + 3};
    const crash::AVec<float> imp12{0.5f, 1.5f}, imp2{-2.0f}, imp4{4.0f};
    const crash::AVec<float> v12 = rows_of({1, 2}), v3 = rows_of({3}), v4 = rows_of({4}), v5 = rows_of({5});
    ASSERT_OK(mnemo_store_add_memories(s, ids12.data(), v12.data(), MNEMO_DTYPE_F32, 2, t12.data(), imp12.data()));
    ASSERT_OK(mnemo_store_set_times(s, ids12.data(), t12.data(), 2));
    ASSERT_OK(mnemo_store_set_importance(s, ids2.data(), imp2.data(), 1));
    ASSERT_OK(mnemo_store_add_memories(s, ids3.data(), v3.data(), MNEMO_DTYPE_F32, 1, t3.data(), nullptr));
    ASSERT_OK(mnemo_store_add_memories(s, ids4.data(), v4.data(), MNEMO_DTYPE_F32, 1, nullptr, imp4.data()));
    ASSERT_OK(mnemo_store_add(s, ids5.data(), v5.data(), MNEMO_DTYPE_F32, 1));
  }
  const std::string snap = dt::slurp(src), journal = dt::slurp(src + ".journal");
  const auto spans = record_spans(journal);
  ASSERT_EQ(spans.size(), 6u);
  // The ops and flags as written: add_memories = 6 with flags in bits 8-9 of
  // the dtype field, set_times = 4, set_importance = 5.
  const uint32_t ops[] = {6, 4, 5, 6, 6, 1};
  const int32_t dtypes[] = {1 | 3 << 8, 0, 0, 1 | 1 << 8, 1 | 2 << 8, 1};
  for (size_t r = 0; r < spans.size(); ++r) {
    EXPECT_EQ(get_at<uint32_t>(journal, spans[r].first + 4), ops[r]) << "record " << r;
    EXPECT_EQ(get_at<int32_t>(journal, spans[r].first + 32), dtypes[r]) << "record " << r;
  }
  const std::string path = dir.file("bad.mnemo");
  auto refused = [&](const std::string& j, const char* what, const char* says) {
    dt::spit(path, snap);
    dt::spit(path + ".journal", j);
    mnemo_store* out = nullptr;
    const mnemo_status st = try_open(path, &out);
    if (st == MNEMO_OK) mnemo_store_destroy(out);
    EXPECT_TRUE(mt::failed_with(st, MNEMO_E_CORRUPT)) << what;
    EXPECT_EQ(out, kSentinel) << what;
    EXPECT_NE(mt::last_error().find(says), std::string::npos) << what << ": " << mt::last_error();
  };
  {  // the intact files open
    dt::spit(path, snap);
    dt::spit(path + ".journal", journal);
    mnemo_store* out = nullptr;
    ASSERT_OK(try_open(path, &out));
    mt::StorePtr owned(out);
    const crash::AVec<uint64_t> ids{1, 2, 3, 4, 5};
    crash::AVec<double> t(5);
    crash::AVec<float> imp(5);
    ASSERT_OK(mnemo_store_get_meta(out, ids.data(), 5, t.data(), imp.data(), nullptr));
    EXPECT_EQ(t[0], crash::kEpoch);
    EXPECT_EQ(t[1], crash::kEpoch + 1);
    EXPECT_EQ(t[2], crash::kEpoch + 3);
    EXPECT_EQ(t[3], 0.0);
    EXPECT_EQ(t[4], 0.0);
    EXPECT_EQ(imp[0], 0.5f);
    EXPECT_EQ(imp[1], -2.0f);
    EXPECT_EQ(imp[2], 0.0f);
    EXPECT_EQ(imp[3], 4.0f);
    EXPECT_EQ(imp[4], 0.0f);
  }
  // Where each value lies in its record's payload (after the 40-byte head).
  const uint64_t row = crash::kDim * 4;
  struct Spot {
    size_t record;
    uint64_t at;
    bool f64;
    const char* what;
  };
  const Spot spots[] = {
      {0, 16 + 2 * row + 8, true, "the second time of an add_memories record"},
      {0, 16 + 2 * row + 16, false, "the first importance of an add_memories record"},
      {1, 16, true, "a set_times record"},
      {2, 8, false, "a set_importance record"},
      {3, 8 + row, true, "an add_memories record with times only"},
      {4, 8 + row, false, "an add_memories record with importance only"},
  };
  for (const Spot& sp : spots) {
    for (const double bad : {kNaN, kInf, -kInf}) {
      // In the middle of the journal, and as its final record.
      for (const bool final : {false, true}) {
        std::string j = journal.substr(0, final ? spans[sp.record].second : journal.size());
        const uint64_t at = spans[sp.record].first + kRecordHead + sp.at;
        if (sp.f64)
          put_at<double>(j, at, bad);
        else
          put_at<float>(j, at, static_cast<float>(bad));
        reseal(j, spans[sp.record]);
        refused(j, sp.what, "is not finite");
      }
    }
  }
  {  // a set_times record naming a memory the store does not hold
    std::string j = journal;
    put_at<uint64_t>(j, spans[1].first + kRecordHead, 40);
    reseal(j, spans[1]);
    refused(j, "set_times of an absent id", "does not apply");
  }
  {  // an add_memories record with a flag this format does not know
    std::string j = journal;
    put_at<int32_t>(j, spans[3].first + 32, 1 | 8 << 8);
    reseal(j, spans[3]);
    refused(j, "add_memories with flags 8", "inconsistent");
  }
  // A count whose payload size (ids and f32 values, 12 bytes per memory)
  // wraps 64 bits to the few bytes the record holds: refused before
  // anything that large is allocated.
  for (const uint32_t op : {3u, 5u}) {
    std::string j = journal;
    const uint64_t count = (~uint64_t{0}) / 12 + 1, payload = count * 12;  // wraps to 8
    ASSERT_EQ(payload, 8u);
    const uint64_t begin = j.size();
    const uint32_t magic = get_at<uint32_t>(journal, spans[0].first);
    const uint64_t seq = get_at<uint64_t>(journal, spans.back().first + 8) + 1;
    j.append(kRecordHead + payload + 8, '\0');
    put_at<uint32_t>(j, begin, magic);
    put_at<uint32_t>(j, begin + 4, op);
    put_at<uint64_t>(j, begin + 8, seq);
    put_at<uint64_t>(j, begin + 16, count);
    put_at<uint64_t>(j, begin + 24, payload);
    put_at<uint64_t>(j, begin + kRecordHead, 1);
    reseal(j, {begin, j.size()});
    refused(j, op == 3 ? "set_bias of a wrapping count" : "set_importance of a wrapping count", "inconsistent");
  }
  {  // flags on a record of another op
    std::string j = journal;
    put_at<int32_t>(j, spans[1].first + 32, 1 << 8);
    reseal(j, spans[1]);
    refused(j, "set_times with flags", "inconsistent");
  }
}

namespace {

struct Section {
  uint32_t tag;
  uint64_t payload, bytes;  // where the payload starts, its size
};

// The sections of a store file after its header: 64 bytes in version 5, 56
// in versions 2 to 4.
std::vector<Section> sections_of(const std::string& f, uint64_t header = 64) {
  std::vector<Section> s;
  for (uint64_t pos = header; pos + 16 <= f.size();) {
    const Section sec{get_at<uint32_t>(f, pos), pos + 16, get_at<uint64_t>(f, pos + 8)};
    if (sec.payload + sec.bytes + 8 > f.size()) break;
    s.push_back(sec);
    pos = sec.payload + sec.bytes + 8;
  }
  return s;
}

// A store file in a format of an earlier release, written as the comment at
// the top of core/store_file.cpp describes it: version 1 (no sequence
// number) or version 2 (a sequence number), sections 1-3 only.
std::string old_snapshot(uint32_t version, uint64_t dim, int32_t dtype, int32_t metric,
                         const std::vector<uint64_t>& ids, const std::string& vectors, const std::vector<float>& biases,
                         uint64_t seq) {
  std::string b("MNEMOST1", 8);
  auto put = [&b](auto v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(version);
  put(uint32_t{version == 1 ? 40u : 48u});
  put(dim);
  put(dtype);
  put(metric);
  put(static_cast<uint64_t>(ids.size()));
  if (version >= 2) put(seq);
  put(static_cast<uint64_t>(XXH3_64bits(b.data(), b.size())));
  auto section = [&](uint32_t tag, const void* p, uint64_t n) {
    put(tag);
    put(uint32_t{0});
    put(n);
    b.append(static_cast<const char*>(p), n);
    put(static_cast<uint64_t>(XXH3_64bits(p, n)));
  };
  section(1, ids.data(), ids.size() * 8);
  section(2, vectors.data(), vectors.size());
  section(3, biases.data(), biases.size() * 4);
  return b;
}

}  // namespace

// A snapshot of the current format holding a NaN or infinite time or
// importance under a valid checksum is refused (what a buggy writer would
// make), and so is damage to either section (its checksum).
TEST(Corruption, SnapshotMetadataSectionsAreChecked) {
  dt::TempDir dir;
  const std::string src = dir.file("meta.mnemo"), path = dir.file("bad.mnemo");
  const crash::AVec<uint64_t> ids{3, 9, 27};
  const crash::AVec<double> times{crash::kEpoch - 86400, crash::kEpoch, crash::kEpoch + 0.5};
  const crash::AVec<float> imp{0.25f, 7.0f, -1.0f};
  {
    mt::StorePtr s = mt::make_store(crash::kDim, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
    ASSERT_TRUE(s);
    const crash::AVec<float> v = rows_of({3, 9, 27});
    ASSERT_OK(mnemo_store_add_memories(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 3, times.data(), imp.data()));
    ASSERT_OK(mnemo_store_save(s.get(), src.c_str()));
  }
  const std::string snap = dt::slurp(src);
  EXPECT_EQ(get_at<uint32_t>(snap, 8), 5u) << "a store saved now is of format version 5";
  EXPECT_EQ(get_at<uint32_t>(snap, 12), 56u);
  EXPECT_EQ(get_at<uint32_t>(snap, 48), 0u) << "flags: no index";
  const auto secs = sections_of(snap);
  ASSERT_EQ(secs.size(), 6u);
  // Sections 1-5, then the fields section (7), empty: no memory has fields.
  const uint64_t sizes[] = {24, 3 * crash::kDim * 4, 12, 24, 12, 0};
  for (uint32_t i = 0; i < 6; ++i) {
    EXPECT_EQ(secs[i].tag, i < 5 ? i + 1 : 7u);
    EXPECT_EQ(secs[i].bytes, sizes[i]);
  }
  EXPECT_EQ(secs[5].payload + secs[5].bytes + 8, snap.size());
  auto open = [&](const std::string& bytes, mnemo_store** out) {
    dt::spit(path, bytes);
    *out = kSentinel;
    return mnemo_store_open(mt::rt(), path.c_str(), out);
  };
  {
    mnemo_store* out = nullptr;
    ASSERT_OK(open(snap, &out));
    mt::StorePtr owned(out);
    crash::AVec<double> t(3);
    crash::AVec<float> im(3);
    ASSERT_OK(mnemo_store_get_meta(out, ids.data(), 3, t.data(), im.data(), nullptr));
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(t[i], times[i]);
      EXPECT_EQ(im[i], imp[i]);
    }
  }
  auto refused = [&](const std::string& b, const std::string& what, const std::string& says) {
    mnemo_store* out = nullptr;
    const mnemo_status st = open(b, &out);
    if (st == MNEMO_OK) mnemo_store_destroy(out);
    EXPECT_TRUE(mt::failed_with(st, MNEMO_E_CORRUPT)) << what;
    EXPECT_EQ(out, kSentinel) << what;
    EXPECT_NE(mt::last_error().find(says), std::string::npos) << what << ": " << mt::last_error();
  };
  for (const uint64_t i : {uint64_t{0}, uint64_t{2}}) {
    for (const double bad : {kNaN, kInf, -kInf}) {
      std::string b = snap;
      put_at<double>(b, secs[3].payload + 8 * i, bad);
      put_at<uint64_t>(b, secs[3].payload + secs[3].bytes, XXH3_64bits(b.data() + secs[3].payload, secs[3].bytes));
      refused(b, "time " + std::to_string(i), "non-finite time at position " + std::to_string(i));
      b = snap;
      put_at<float>(b, secs[4].payload + 4 * i, static_cast<float>(bad));
      put_at<uint64_t>(b, secs[4].payload + secs[4].bytes, XXH3_64bits(b.data() + secs[4].payload, secs[4].bytes));
      refused(b, "importance " + std::to_string(i), "non-finite importance at position " + std::to_string(i));
    }
  }
  for (const uint32_t s : {3u, 4u}) {
    const char* name = s == 3 ? "times" : "importance";
    for (uint64_t at = 0; at < secs[s].bytes + 8; at += 5) {  // payload and checksum
      std::string b = snap;
      b[secs[s].payload + at] = static_cast<char>(b[secs[s].payload + at] ^ 0x04);
      refused(b, std::string(name) + " byte " + std::to_string(at),
              std::string("checksum mismatch in the ") + name + " section");
    }
  }
}

// Files of earlier formats still open: version 1 (no sequence number) and
// version 2, whose memories then have time 0 and importance 0, their
// vectors and biases as written; saved again they are version 5, and a
// durable store opened on one carries on with journaled metadata writes.
TEST(Corruption, OlderSnapshotFormatsOpenWithZeroMetadata) {
  dt::TempDir dir;
  const std::vector<uint64_t> ids{7, 11, uint64_t{1} << 40};
  const std::vector<float> biases{0.5f, -1.0f, 2.0f};
  const uint64_t dim = 3;
  // f16 in version 1 (0.5, -2, 3 / 1, 0, -0.5 / 2, 2, 2), f32 in version 2.
  const uint16_t h16[] = {0x3800, 0xC000, 0x4200, 0x3C00, 0x0000, 0xB800, 0x4000, 0x4000, 0x4000};
  const float want[] = {0.5f, -2.0f, 3.0f, 1.0f, 0.0f, -0.5f, 2.0f, 2.0f, 2.0f};
  const std::string v16(reinterpret_cast<const char*>(h16), sizeof h16),
      v32(reinterpret_cast<const char*>(want), sizeof want);
  struct Case {
    uint32_t version;
    int32_t dtype;
    const std::string* vectors;
    uint64_t seq;
  };
  for (const Case c : {Case{1, MNEMO_DTYPE_F16, &v16, 0}, Case{2, MNEMO_DTYPE_F32, &v32, 5}}) {
    SCOPED_TRACE("version " + std::to_string(c.version));
    const std::string path = dir.file("old" + std::to_string(c.version) + ".mnemo");
    dt::spit(path, old_snapshot(c.version, dim, c.dtype, MNEMO_METRIC_DOT, ids, *c.vectors, biases, c.seq));
    mnemo_store* s = nullptr;
    ASSERT_OK(mnemo_store_open(mt::rt(), path.c_str(), &s));
    mt::StorePtr owned(s);
    uint64_t n = 0, d = 0;
    int32_t dt = 0, met = 0;
    ASSERT_OK(mnemo_store_count(s, &n));
    ASSERT_OK(mnemo_store_shape(s, &d, &dt, &met));
    EXPECT_EQ(n, 3u);
    EXPECT_EQ(d, dim);
    EXPECT_EQ(dt, c.dtype);
    EXPECT_EQ(met, MNEMO_METRIC_DOT);
    crash::AVec<float> v(dim);
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_OK(mnemo_store_get(s, ids[i], v.data()));
      for (uint64_t j = 0; j < dim; ++j) EXPECT_EQ(v[j], want[i * dim + j]) << "id " << ids[i] << " element " << j;
    }
    const crash::AVec<uint64_t> aids(ids.begin(), ids.end());
    crash::AVec<double> t(3, -1.0);
    crash::AVec<float> imp(3, -1.0f), b(3, -9.0f);
    ASSERT_OK(mnemo_store_get_meta(s, aids.data(), 3, t.data(), imp.data(), b.data()));
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(t[i], 0.0);
      EXPECT_EQ(imp[i], 0.0f);
      EXPECT_EQ(b[i], biases[i]);
    }
    // Saved again: the current format, the same contents.
    const std::string again = dir.file("again.mnemo");
    ASSERT_OK(mnemo_store_save(s, again.c_str()));
    const std::string saved = dt::slurp(again);
    ASSERT_GE(saved.size(), 16u);
    EXPECT_EQ(get_at<uint32_t>(saved, 8), 5u);
    EXPECT_EQ(sections_of(saved).size(), 6u);
    mnemo_store* s2 = nullptr;
    ASSERT_OK(mnemo_store_open(mt::rt(), again.c_str(), &s2));
    mt::StorePtr owned2(s2);
    ASSERT_OK(mnemo_store_get_meta(s2, aids.data(), 3, t.data(), imp.data(), b.data()));
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(t[i] == 0.0 && imp[i] == 0.0f && b[i] == biases[i]);

    // Durable: the old snapshot with no journal yet; metadata writes go to
    // a fresh journal and a checkpoint rewrites the snapshot as version 5.
    mnemo_store* ds = nullptr;
    ASSERT_OK(mnemo_store_open_durable(mt::rt(), path.c_str(), nullptr, &ds));
    mt::StorePtr downed(ds);
    const double t1 = crash::kEpoch + 12.5;
    const float i1 = 0.75f;
    const crash::AVec<uint64_t> id1{aids[1]}, id2{aids[2]};
    const crash::AVec<double> at1{t1};
    const crash::AVec<float> ai1{i1};
    ASSERT_OK(mnemo_store_set_times(ds, id1.data(), at1.data(), 1));
    ASSERT_OK(mnemo_store_set_importance(ds, id2.data(), ai1.data(), 1));
    downed.reset();
    ASSERT_OK(mnemo_store_open_durable(mt::rt(), path.c_str(), nullptr, &ds));
    downed.reset(ds);
    ASSERT_OK(mnemo_store_get_meta(ds, aids.data(), 3, t.data(), imp.data(), b.data()));
    EXPECT_TRUE(t[0] == 0.0 && t[1] == t1 && t[2] == 0.0);
    EXPECT_TRUE(imp[0] == 0.0f && imp[1] == 0.0f && imp[2] == i1);
    ASSERT_OK(mnemo_store_checkpoint(ds));
    downed.reset();
    EXPECT_EQ(get_at<uint32_t>(dt::slurp(path), 8), 5u);
    ASSERT_OK(mnemo_store_open_durable(mt::rt(), path.c_str(), nullptr, &ds));
    downed.reset(ds);
    ASSERT_OK(mnemo_store_get_meta(ds, aids.data(), 3, t.data(), imp.data(), b.data()));
    EXPECT_TRUE(t[1] == t1 && imp[2] == i1 && b[0] == biases[0]);
  }
}
