// An independent reading of the durable store's journal format (described in
// core/store_journal.cpp): writes valid journals, finds record boundaries for
// mutations, repairs record checks after a mutation, and decides which records
// of a (possibly damaged) journal a reader must replay, or that it must refuse
// the journal.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fz {

// Ops: 1 add, 2 remove, 3 set_bias, 4 set_times, 5 set_importance,
// 6 add_memories (an add with times, importance and/or fields), 9
// set_fields (memories' fields, fields_image.h, one after another).
struct JournalRecordImage {
  uint32_t op = 1;
  uint64_t seq = 0;
  uint64_t count = 0;
  // The record's dtype field as written: add, add_memories: the vectors'
  // dtype, for add_memories | flags << 8 (1 times, 2 importance, 4
  // fields); 0 otherwise
  int32_t dtype = 0;
  std::vector<uint64_t> ids;  // [count]
  // payload after the ids: vectors (add_memories: then f64 times, f32
  // importance and the memories' fields as flagged), f32 biases or
  // importances, f64 times, or the memories' fields
  std::string data;
};

struct JournalImage {
  uint64_t dim = 1;
  int32_t dtype = 1, metric = 1;
  uint64_t base_seq = 0;
  std::vector<JournalRecordImage> records;
};

constexpr uint64_t kJournalHeaderBytes = 48;

// The bytes of a valid journal holding `j`.
std::string write_journal(const JournalImage& j);
// [begin, end) of each record, walking the declared payload lengths from the
// header on while they fit; stops at the first record that does not.
std::vector<std::pair<uint64_t, uint64_t>> journal_spans(const std::string& b);
// Recomputes the header checksum, then each record's head check and checksum
// while its declared length fits, so a mutation reaches the checks behind them.
void fix_journal_checksums(std::string& b);

// What a reader makes of a journal: the intact records to replay (a torn
// final record left out) and where they end, or a refusal with its reason.
// The header's shape is checked against nothing here: the caller compares it
// with the snapshot.
struct JournalReading {
  bool valid = false;
  std::string why;     // when refused
  JournalImage image;  // header and intact records
  uint64_t end = 0;    // bytes of intact journal
  bool torn = false;   // bytes after `end` were ignored
};
JournalReading read_journal(const std::string& b);

}  // namespace fz
