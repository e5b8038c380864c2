// Opening a durable store: the snapshot, then the journal records after the
// snapshot's sequence, then appending. The snapshot and the journal meet at a
// sequence number, so a crash at any point of a checkpoint neither loses nor
// repeats a write.
#include "error.h"
#include "store.h"
#include "store_io.h"

namespace mnemo {

std::unique_ptr<Store> open_durable(const Runtime& rt, const DurableOptions& o) {
  const std::string journal_path = o.journal_path.empty() ? o.path + ".journal" : o.journal_path;
  const bool have_snapshot = file_exists(o.path), have_journal = file_exists(journal_path);
  std::unique_ptr<Store> store;
  uint64_t snap_seq = 0;
  if (have_snapshot) {
    store = load_store(rt, o.path, &snap_seq);
    if (o.dim != 0 && (o.dim != store->dim() || o.dtype != store->dtype() || o.metric != store->metric()))
      fail(Code::shape, o.path + ": the store there has another dimension, dtype or metric than requested");
  } else {
    if (have_journal)
      fail(Code::corrupt, journal_path + ": a journal without its snapshot '" + o.path +
                              "' (restore the snapshot or remove the journal)");
    if (o.dim == 0) fail(Code::io, "no store at '" + o.path + "' (give a dimension to create one)");
    store = std::make_unique<Store>(rt, o.dim, o.dtype, o.metric);
    // The empty snapshot goes first, so the shape is on disk before any write.
    replace_file(o.path, encode_store(store->snapshot()));
  }
  const JournalShape shape{store->dim(), store->dtype(), store->metric()};

  std::unique_ptr<Journal> journal;
  if (!have_journal) {
    journal = Journal::create(journal_path, shape, snap_seq, o.sync_each);
  } else {
    journal = Journal::open(journal_path, shape, o.sync_each, [&](const JournalRecord& r) {
      if (r.seq <= snap_seq) return;  // already in the snapshot
      try {
        store->apply(r);
      } catch (const Error& e) {
        // A checksummed record that does not apply: the files disagree.
        fail(Code::corrupt, journal_path + ": write " + std::to_string(r.seq) + " does not apply: " + e.what());
      }
    });
    // A base beyond the snapshot means writes that neither file holds.
    if (journal->base_seq() > snap_seq)
      fail(Code::corrupt, journal_path + ": journal follows write " + std::to_string(journal->base_seq()) +
                              " but the snapshot holds only up to " + std::to_string(snap_seq));
    // A crash between a checkpoint's snapshot and its journal reset leaves
    // an older journal whose records the snapshot holds: finish the reset.
    if (journal->base_seq() < snap_seq) {
      if (journal->last_seq() > snap_seq) {
        // Records beyond the snapshot on an older base: keep them by writing
        // a fresh snapshot that holds everything, then reset.
        store->attach_journal(std::move(journal), o.path);
        store->checkpoint();
        return store;
      }
      journal->reset(snap_seq);
    }
  }
  store->attach_journal(std::move(journal), o.path);
  return store;
}

}  // namespace mnemo
