// The append-only journal of a durable store: every acknowledged write since
// the last snapshot, one checksummed record each, numbered by a sequence that
// the snapshot also records, so replay after a crash applies each write once.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>

#include "dtype.h"
#include "tensor.h"

namespace mnemo {

enum class JournalOp : uint32_t {
  add = 1,
  remove = 2,
  set_bias = 3,
  set_times = 4,
  set_importance = 5,
  add_memories = 6,  // add with times and/or importance (flags)
  index_layout = 7,  // an index built: flags = nlist; ids, then u32 lists, options, f32 centroids
  index_drop = 8,    // the index removed (no ids)
  set_fields = 9     // fields of existing memories (fields_codec.h), one after another
};

// Which optional arrays an add_memories record carries after its vectors.
// kJournalFields: the memories' fields (fields_codec.h) follow the arrays.
enum : uint32_t { kJournalTimes = 1, kJournalImportance = 2, kJournalFields = 4 };

// A contiguous part of a record's payload after its ids.
struct JournalPiece {
  const void* data;
  uint64_t bytes;
};

// One decoded record; the pointers are to 64-byte aligned buffers that live
// during the call that replays it.
struct JournalRecord {
  JournalOp op;
  uint64_t seq;
  uint64_t count;
  DType dtype;          // add, add_memories: dtype of the vectors
  uint32_t flags;       // add_memories: kJournalTimes | kJournalImportance; index_layout: nlist
  const uint64_t* ids;  // [count]
  // add: vectors; add_memories: vectors, then f64 times and f32 importance
  // as flagged (unaligned after the vectors); set_bias, set_importance: f32
  // values; set_times: f64 values
  const void* data;
  uint64_t data_bytes;
};

struct JournalShape {
  uint64_t dim;
  DType dtype;
  Metric metric;
};

class Journal {
 public:
  // Replaces (or creates) the file at `path` with an empty journal that
  // follows the write numbered `base_seq`: written beside it, flushed,
  // renamed over it, folder flushed.
  static std::unique_ptr<Journal> create(const std::string& path, const JournalShape& shape, uint64_t base_seq,
                                         bool sync_each);
  // Reads the journal at `path`, hands every complete record to `apply` in
  // order, cuts a torn final record off the file and opens it for appending.
  // Throws corrupt for damage anywhere but the tail, a shape that differs from
  // `shape`, or a gap in the sequence.
  static std::unique_ptr<Journal> open(const std::string& path, const JournalShape& shape, bool sync_each,
                                       const std::function<void(const JournalRecord&)>& apply);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Appends the next record and, when syncing each write, waits until it is
  // on disk. On failure the file is cut back to where it was and io thrown.
  void append(JournalOp op, uint64_t count, DType dtype, const uint64_t* ids, const void* data, uint64_t data_bytes);
  // The payload after the ids in pieces; flags for add_memories.
  void append(JournalOp op, uint64_t count, DType dtype, uint32_t flags, const uint64_t* ids,
              std::initializer_list<JournalPiece> pieces);
  // Starts an empty journal after `base_seq` (the sequence a new snapshot holds).
  void reset(uint64_t base_seq);

  uint64_t base_seq() const { return base_seq_; }
  uint64_t last_seq() const { return last_seq_; }
  uint64_t records() const { return last_seq_ - base_seq_; }
  uint64_t bytes() const { return end_; }
  const std::string& path() const { return path_; }

 private:
  Journal(std::string path, const JournalShape& shape, bool sync_each);
  void open_for_append();

  std::string path_;
  JournalShape shape_;
  bool sync_each_;
  int fd_ = -1;
  uint64_t base_seq_ = 0, last_seq_ = 0;
  uint64_t end_ = 0;     // bytes of valid journal
  bool broken_ = false;  // a failed append could not be undone
};

}  // namespace mnemo
