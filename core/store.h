// The memory store: caller-chosen uint64 ids, vectors in a storage dtype,
// a bias per memory. Upsert keeps a memory's slot; remove tombstones and
// compacts once a quarter of the slots are dead. Searches share a reader
// lock; writes take it exclusively. A durable store writes each change to its
// journal (store_journal.h) before applying it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "aligned_buffer.h"
#include "backend.h"
#include "id_map.h"
#include "ivf/ivf_index.h"
#include "meta/fields.h"
#include "meta/filter.h"
#include "meta/filter_program_build.h"
#include "meta/namespaces.h"
#include "meta/slot_postings.h"
#include "meta/string_pool.h"
#include "runtime.h"
#include "shard_workers.h"
#include "store_journal.h"

namespace mnemo {

enum class FilterKind : int32_t { none = 0, ids = 1, slot_bitmap = 2 };

struct SearchFilter {
  FilterKind kind = FilterKind::none;
  const uint64_t* ids = nullptr;
  const uint64_t* bitmap = nullptr;
  uint64_t count = 0;  // ids, or bits of the bitmap
  // Filters over the memories' fields (mnemo_search_options.where and
  // where_each): null when absent; each[i] may be null.
  const Filter* where = nullptr;
  const Filter* const* each = nullptr;
};

// What a whole store shares of its memories' fields (its shards too): the
// interned strings, the namespaces and the keys.
struct FieldTables {
  StringPool pool;
  NamespaceTable namespaces;
  std::unordered_map<std::string, uint64_t> key_ids;  // key -> id
};

// A field write resolved against the store's tables: the record the
// memory's fields become (after `set`), and its given form for the journal.
struct FieldWrite {
  uint32_t set = 0;
  Record rec;           // the fields named by `set`, interned
  std::string old_key;  // the memory's key before the write
};

// One memory's fields read back (mnemo_store_read): set names those it has.
struct FieldsOut : FieldsIn {
  bool found = false;
  uint64_t id = 0;
  double time = 0;
  float importance = 0;
};

// A stored record in strings (the fields it has, `set` naming them): tags
// and attributes in byte order, whatever the interning order, so a store
// saved, opened and saved again writes the same bytes. Only the fields in
// `wanted` (kField* bits) are copied: a reader of a key and a payload does
// not pay for every attribute's strings.
void record_strings(const Record& r, const FieldTables& t, FieldsIn& f, uint32_t wanted = kFieldAll);

// How a filtered search was planned (the last one; for tests and stats).
struct FilterPlan {
  uint64_t matches = 0;        // slots the filter matched (all queries' where)
  uint64_t searches = 0;       // backend searches the call made
  uint64_t widened = 0;        // indexed searches redone over more lists
  uint64_t listed = 0;         // queries that read only their matches
  uint64_t post_filtered = 0;  // query groups answered from an unfiltered search
  uint64_t ranged = 0;         // queries whose matches were one run of slots, scanned as such
  uint64_t on_device = 0;      // queries whose filters the store's device evaluated
  // Wall times (ms): the whole call, and its backend searches by plan.
  double total_ms = 0, post_search_ms = 0, list_search_ms = 0, masked_ms = 0;
};

struct StoreContents {  // a consistent copy for saving
  uint64_t dim;
  DType dtype;
  Metric metric;
  std::vector<uint64_t> ids;
  std::vector<unsigned char> vectors;
  std::vector<float> biases;
  std::vector<double> times;
  std::vector<float> importance;
  uint64_t seq = 0;  // the last journaled write these contents include
  bool indexed = false;
  IndexLayout layout;  // when indexed
  // Each memory's fields in fields_codec bytes (empty: none), or empty.
  std::vector<std::string> fields;
};

// The fields a snapshot writes: encode(slot, out) appends the fields of
// the memory at `slot` (fields_codec.h) and returns false when it has none.
struct SnapshotFields {
  std::function<bool(uint64_t slot, std::string& out)> encode;
};

// How a search ranks and what it does besides (mnemo_search_options).
struct RankOptions {
  bool apply_bias = false;
  Activation act;
  bool touch = false;   // returned memories' times become act.now
  uint32_t nprobe = 0;  // lists read on an indexed store; 0: every memory
};

struct StoreStats {
  uint64_t vectors, tombstones, slots, host_bytes, device_bytes;
  bool durable;
  uint64_t journal_records, journal_bytes, seq;
  std::vector<uint64_t> shard_vectors;                    // live vectors per shard (one entry unsharded)
  uint64_t filtered_on_device = 0, filtered_on_host = 0;  // filtered queries by where evaluated
  uint64_t filtered_ranged = 0;                           // of those on the host: one run of slots
};

class Store {
 public:
  // Sharded when the runtime says so (rt.shard_count() > 1): the store then
  // holds one sub-store per shard and routes every call (store_shards.cpp).
  Store(const Runtime& rt, uint64_t dim, DType dtype, Metric metric);
  ~Store();
  uint32_t shard_count() const { return shards_.empty() ? 1u : static_cast<uint32_t>(shards_.size()); }

  uint64_t dim() const { return dim_; }
  DType dtype() const { return dtype_; }
  Metric metric() const { return metric_; }
  const Runtime& runtime() const { return rt_; }

  // vectors: [count x dim] of f32 or the store dtype; ids validated by caller.
  // times / importance ([count], finite) set those of the listed memories;
  // null keeps an upserted memory's and gives a new one 0.
  void add(const uint64_t* ids, const void* vectors, DType vectors_dtype, uint64_t count, const double* times = nullptr,
           const float* importance = nullptr, const FieldsIn* fields = nullptr);
  // Fields of existing memories, in place (store_fields.cpp). Throws
  // not_found (naming the position) or invalid_argument (a key taken)
  // before changing anything.
  void update_fields(const uint64_t* ids, const FieldsIn* fields, uint64_t count);
  // kNoId for a key no memory holds.
  void ids_of_keys(const std::string* keys, uint64_t count, uint64_t* ids) const;
  // The fields in `wanted` (kField* bits) of each memory, `set` naming those
  // of them it has; its time and importance with meta (else 0): each part
  // left out is scattered memory not touched.
  std::vector<FieldsOut> read(const uint64_t* ids, uint64_t count, uint32_t wanted = kFieldAll, bool meta = true) const;
  // Ids matching `f` (null: all) in ascending order, from `offset`, at most
  // `capacity`; *total gets the number of all matches.
  std::vector<uint64_t> select(const Filter* f, uint64_t offset, uint64_t capacity, uint64_t* total) const;
  // Namespaces in use (parts) and their memory counts.
  std::vector<std::pair<std::vector<std::string>, uint64_t>> namespaces() const;
  FilterPlan last_plan() const;
  uint64_t remove(const uint64_t* ids, uint64_t count);
  uint64_t count() const;
  uint64_t slot_count() const;
  bool slot_of(uint64_t id, uint64_t& slot) const;
  bool get(uint64_t id, float* out) const;
  // Throws not_found (naming the position) before changing any bias.
  void set_bias(const uint64_t* ids, const float* biases, uint64_t count);
  void set_times(const uint64_t* ids, const double* times, uint64_t count);
  void set_importance(const uint64_t* ids, const float* importance, uint64_t count);
  // Throws not_found (naming the position) before writing anything; any
  // output may be null.
  void get_meta(const uint64_t* ids, uint64_t count, double* times, float* importance, float* biases) const;
  // Throws shape for a bitmap of the wrong length, before writing anything.
  // With place.on_device, queries and outputs are device pointers and the
  // store must be held by the runtime's GPU (backend_unavailable otherwise).
  // With rank.touch the search holds the store exclusively and then sets the
  // returned memories' times (journaled) before it returns.
  void search(const float* queries, uint64_t nq, uint64_t k, const SearchFilter& filter, const RankOptions& rank,
              uint64_t* out_ids, float* out_scores, const Placement& place = Placement{});

  StoreContents snapshot() const;
  StoreStats stats() const;

  // The inverted-file index (store_index.cpp). build_index trains, assigns
  // and lays the slots out (journaled), waiting for a background rebuild
  // first; drop_index removes it; wait_index waits for a background rebuild
  // and rethrows its failure.
  void build_index(const IndexOptions& o);
  // Lays the live memories out by namespace (store_cluster.cpp): within
  // each of the index's lists and its hot tier, or across the whole store,
  // a namespace's memories (and those of the paths under it) become one run
  // of slots, in their order before; removed slots are dropped. Results do
  // not change; a search scoped to a namespace then reads one run (the
  // ranged plan of search_where). Not journaled: a snapshot keeps the
  // order, a replayed journal's later writes append as usual.
  void cluster();
  void drop_index();
  void wait_index();
  IndexInfo index_info() const;
  // The layout of the live memories now (for snapshots): nlist 0 without an
  // index. Under the caller's read lock.
  IndexLayout layout_locked() const;
  // Lays a loaded or replayed layout out, without journaling.
  void adopt_layout(const IndexLayout& l);

  // Takes the rows of a freshly loaded snapshot into an empty store without
  // copying them (vectors: [ids.size() x dim] in the store dtype, finite).
  // Returns the position of the first reserved or repeated id, or UINT64_MAX
  // when every id is good; the store is to be discarded then.
  // times / importance: [ids.size()] each, or empty for zeros.
  uint64_t adopt(std::vector<uint64_t> ids, AlignedBuffer vectors, std::vector<float> biases,
                 std::vector<double> times = {}, std::vector<float> importance = {});
  // Writes the snapshot file straight from the store's arrays under the read
  // lock (no copy of the store): writers wait until it is on disk.
  void save(const std::string& path) const;
  // The fields of a freshly loaded snapshot's memories, through the write
  // path, unjournaled (store_file.cpp). Throws corrupt, changing nothing,
  // for an id the store does not hold, a memory given fields twice (here or
  // in an earlier call) or a key another memory holds.
  void load_fields(const uint64_t* ids, const FieldsIn* fields, uint64_t count);

  // Replay of one journal record (before a journal is attached).
  void apply(const JournalRecord& r);
  // From now on every write goes to `journal` first; checkpoint() writes
  // the snapshot to `snapshot_path` and starts the journal afresh.
  void attach_journal(std::unique_ptr<Journal> journal, std::string snapshot_path);
  bool durable() const { return journal_ != nullptr; }
  // Throws unsupported for a store opened without a journal.
  void checkpoint();

 private:
  // One shard of a sharded store, living in rt.shard_home(shard).
  Store(const Runtime& rt, uint64_t dim, DType dtype, Metric metric, uint32_t shard,
        std::shared_ptr<FieldTables> tables);
  // Fields (store_fields.cpp). resolve interns a call's fields and checks
  // its keys (ids[i] gets fields[i]) before anything changes;
  // note_keys_locked then records them once the write is in.
  std::vector<FieldWrite> resolve_fields(const uint64_t* ids, const FieldsIn* fields, uint64_t count);
  void note_keys_locked(const uint64_t* ids, const std::vector<FieldWrite>& w);
  // The record of `id` in this store or its owning shard, or null.
  const Record* record_of(uint64_t id) const;
  // Slot `slot` takes `w` (postings follow).
  void write_fields_locked(uint64_t slot, FieldWrite& w);
  // Drops slot's record (postings follow).
  void drop_fields_locked(uint64_t slot);
  // Rebuilds the postings after slots were renumbered.
  void rebuild_postings_locked();
  FilterScope scope_locked() const;
  // Calls fn(slot) for each of ids[0, n) this store holds.
  template <class Fn>
  void for_slots_of(const uint64_t* ids, uint64_t n, Fn fn) const {
    for (uint64_t i = 0; i < n; ++i)
      if (const auto* e = slot_of_.find(ids[i])) fn(e->second);
  }
  // This store, or its shards in order.
  std::vector<const Store*> parts() const;
  // The filter's matches as a bitmap over the store's slots (a sharded
  // store's shards end to end), with `legacy` (ids or bitmap) applied too;
  // returns the number of matching live memories.
  uint64_t filter_bitmap_locked(const Filter* where, const Filter* each, const SearchFilter& legacy,
                                std::vector<uint64_t>& words) const;
  // Lists an indexed search with a slot-bitmap filter (words) probes so that
  // each of the nq queries reads at least nprobe lists and, nearest first,
  // enough of them to hold its share of matches; 0 when that is every list.
  uint32_t filter_probes(const float* queries, uint64_t nq, uint64_t k, const uint64_t* words, uint32_t nprobe) const;
  void search_where(const float* queries, uint64_t nq, uint64_t k, const SearchFilter& filter, const RankOptions& rank,
                    uint64_t* out_ids, float* out_scores, const Placement& place) const;
  void set_fields_locked(const uint64_t* ids, std::vector<FieldWrite>& w, bool journal, const FieldsIn* given);
  StoreView view() const;
  StoreContents contents_locked() const;
  // The fields of the memory at `slot` appended to `out` in fields_codec
  // bytes, `set` naming those it holds (tags and attributes in byte order);
  // false when it holds none (store_file.cpp).
  bool encode_slot_fields_locked(uint64_t slot, std::string& out) const;
  // The snapshot of the store as it is (journal sequence `seq`) written to
  // `path` by replace_file (store_file.cpp).
  void write_snapshot_locked(const std::string& path, uint64_t seq) const;
  // Searches with the caller's bitmap (or none) on this store's own backend
  // (on_home) or the CPU, without taking the lock (the caller holds it).
  void search_locked(const float* queries, uint64_t nq, uint64_t k, const uint64_t* allow, const RankOptions& rank,
                     bool on_home, uint64_t* out_ids, float* out_scores, const Placement& place = Placement{},
                     const SlotLists* lists = nullptr, const FilterPrograms* programs = nullptr) const;
  // The arguments every backend search of view v takes from the call (no
  // mirror, filter, lists or probe).
  SearchArgs search_args(const StoreView& v, const float* queries, uint64_t nq, uint64_t k, const RankOptions& rank,
                         uint64_t* out_ids, float* out_scores, const Placement& place) const;
  // An unfiltered search of slots [lo, hi) alone on the host (the ranged
  // plan of search_where: a filter's matches that are one run of slots).
  void search_range_locked(const float* queries, uint64_t nq, uint64_t k, uint64_t lo, uint64_t hi,
                           const RankOptions& rank, uint64_t* out_ids, float* out_scores, const Placement& place) const;
  // The filtered search of queries whose groups' programs the store's
  // device evaluates (store_fields.cpp): the mirror's field columns are
  // brought up to date first. False, having done nothing, where a filter
  // is too deep for a program.
  bool search_programs_locked(const float* queries, uint64_t nq, uint64_t k, const Filter* where,
                              const Filter* const* each, const std::vector<uint64_t>& picked, const RankOptions& rank,
                              uint64_t* out_ids, float* out_scores, const Placement& place) const;
  // The live slots of this (unsharded) store that pass `where`, `each` and
  // the caller's ids or bitmap filter.
  Roaring matches_locked(const Filter* where, const Filter* each, const SearchFilter& legacy) const;
  void search_shared(const float* queries, uint64_t nq, uint64_t k, const SearchFilter& filter, const RankOptions& rank,
                     uint64_t* out_ids, float* out_scores, const Placement& place) const;
  // The returned ids' times become `now` (journaled once).
  void touch_locked(const uint64_t* ids, uint64_t n, double now);
  // The sharded forms of the calls above (store_shards.cpp), under the
  // parent's lock; the parent's journal records each write once.
  void sharded_add(const uint64_t* ids, const void* vectors, DType vdt, uint64_t count, const double* times,
                   const float* importance, FieldWrite* fields);
  uint64_t sharded_remove(const uint64_t* ids, uint64_t count);
  // One per-memory field of `bytes` per entry at `values`, routed to the owners.
  void sharded_set_field(const uint64_t* ids, const void* values, size_t bytes, const uint64_t* owners, uint64_t count,
                         JournalOp field);
  void sharded_search(const float* queries, uint64_t nq, uint64_t k, const SearchFilter& filter,
                      const RankOptions& rank, uint64_t* out_ids, float* out_scores, const Placement& place) const;
  // The shard holding `id`, or shards_.size().
  size_t owner_of(uint64_t id) const;
  // Row i of the call is vectors' row pick[i] (pick: a shard's rows of its
  // parent's call, taken where they lie), else row i; `team` threads convert
  // the rows (0: the runtime's thread count).
  void add_locked(const uint64_t* ids, const void* vectors, DType vdt, uint64_t count, bool journal,
                  const double* times = nullptr, const float* importance = nullptr, const uint64_t* pick = nullptr,
                  int team = 0, FieldWrite* fields = nullptr, const FieldsIn* given = nullptr);
  uint64_t remove_locked(const uint64_t* ids, uint64_t count, bool journal);
  // Sets one per-memory field: JournalOp::set_bias (f32), set_times (f64)
  // or set_importance (f32).
  void set_field_locked(JournalOp field, const uint64_t* ids, const void* values, uint64_t count, bool journal);
  // Room for `slots` slots in every per-slot array (geometric growth); may
  // throw, changing nothing the store shows.
  void reserve_slots(uint64_t slots);
  // Uploads slots [first, first + count) to the mirror; threads: host threads
  // it may use (0 = the runtime's).
  void mirror_update(uint64_t first, uint64_t count, int threads = 0);
  void compact();
  void cluster_locked();
  // The live memories of slots order[0], order[1], ... become slots 0, 1,
  // ... (every per-slot array, the id map, the postings, the mirror);
  // removed slots are dropped. Everything new is allocated before the store
  // changes. Shared by the index's layout and cluster().
  void reorder_slots_locked(const std::vector<uint64_t>& order);

  // Index internals (store_index.cpp). compute_layout samples, trains and
  // assigns: with take_locks it takes the read lock in short pieces (the
  // caller holds none), else the caller holds the lock.
  IndexLayout compute_layout(const IndexOptions& o, bool take_locks);
  // Re-lays this store (or each shard) out by `l`: memories in `dirty` or
  // not named go to the hot tier. Under the write lock; journaled when asked.
  void apply_layout_locked(const IndexLayout& l, bool journal);
  // A build's end: the layout applied and journaled, the build counted and
  // timed from t0.
  void commit_layout_locked(const IndexLayout& l, std::chrono::steady_clock::time_point t0);
  // Ids written from now on are no longer noted for a layout being computed.
  void stop_tracking_locked();
  // build_index's and the background rebuild's work, under build_mu_ with
  // ids being noted: a layout computed with the read lock taken in pieces,
  // then committed under the write lock (a rebuild only if the index was
  // neither dropped nor rebuilt meanwhile); an error stops the noting and
  // goes on to the caller.
  void build_with_locks(const IndexOptions& o, bool rebuild);
  void relayout_locked(const IndexLayout& l, const std::unordered_map<uint64_t, uint32_t>& list_of);
  void drop_index_locked(bool journal);
  // After a live write: starts a rebuild when the hot tier or the skew has
  // passed its bound (under the write lock).
  void maybe_rebuild_locked();
  void run_rebuild(IndexOptions o);
  bool index_bound_passed() const;
  void index_counts(IndexInfo& info) const;

  const Runtime& rt_;
  const uint64_t dim_;
  const DType dtype_;
  const Metric metric_;
  const size_t row_bytes_;
  // Readers pass through gate_ before taking mu_ shared; a writer holds gate_
  // while it waits for mu_, so a stream of searches cannot starve it.
  mutable std::mutex gate_;
  mutable std::shared_mutex mu_;
  std::shared_lock<std::shared_mutex> read_lock() const;
  std::unique_lock<std::shared_mutex> write_lock();
  AlignedBuffer vectors_;
  std::vector<uint64_t> slot_ids_;  // kNoId marks a removed slot
  std::vector<float> norms_, biases_, importance_;
  std::vector<double> times_;
  // Fields: the whole store's tables (shared with its shards), each slot's
  // record (null: none) and the postings over this store's slots.
  std::shared_ptr<FieldTables> tables_;
  std::vector<std::unique_ptr<Record>> recs_;
  SlotPostings postings_;
  // Where the mirror evaluates filters: the posting lists' numbers in the
  // columns it holds (under columns_mu_: searches share the read lock).
  mutable std::mutex columns_mu_;
  mutable ColumnDirectory columns_;
  mutable std::atomic<uint64_t> filtered_on_device_{0}, filtered_on_host_{0}, filtered_ranged_{0};
  bool shard_ = false;
  mutable std::mutex plan_mu_;
  mutable FilterPlan plan_;
  IdMap slot_of_;
  uint64_t dead_ = 0;
  std::unique_ptr<StoreMirror> mirror_;
  Backend* home_ = nullptr;                     // the backend this store's memory lives in
  std::vector<std::unique_ptr<Store>> shards_;  // empty unless sharded
  std::unique_ptr<ShardWorkers> workers_;       // sharded: a thread per shard past the first
  std::unique_ptr<Journal> journal_;
  std::string snapshot_path_;
  // The index: per shard in a sharded store; the parent keeps the options,
  // the counters and the rebuild thread.
  std::unique_ptr<IvfIndex> index_;
  IndexOptions index_opts_;
  bool clustered_ = false;  // cluster() was called: broad filters are checked for one run of slots
  bool indexed_ = false;    // parent: build_index was called and not dropped
  uint64_t index_builds_ = 0;
  double index_seconds_ = 0;
  std::mutex build_mu_;       // one layout computed at a time
  std::mutex rebuild_mu_;     // guards rebuild_ (taken with try_lock under the write lock)
  bool track_dirty_ = false;  // a layout is being computed: note written ids
  std::thread rebuild_;
  std::atomic<bool> rebuilding_{false};
  std::unordered_set<uint64_t> dirty_;  // ids written while a rebuild runs
  std::exception_ptr rebuild_error_;
};

struct DurableOptions {
  std::string path;          // the snapshot
  std::string journal_path;  // empty: path + ".journal"
  bool sync_each = true;     // fdatasync every write before it returns
  // Shape of a new store when `path` does not exist; dim 0: it must exist.
  uint64_t dim = 0;
  DType dtype = DType::f32;
  Metric metric = Metric::cosine;
};

// The layout of a journaled index_layout record (store.cpp); throws corrupt.
IndexLayout decode_layout(const JournalRecord& r, uint64_t dim);

// Persistence (store_file.cpp). load_store puts the snapshot's journal
// sequence into *seq when given.
std::string encode_store(const StoreContents& c);
// The snapshot file of the live slots of `v` (`live` of them) and their
// fields, written to `fd` in bounded pieces.
void write_store_file(int fd, const std::string& path, const StoreView& v, uint64_t live, uint64_t seq,
                      const IndexLayout* index, const SnapshotFields& fields);
void save_store(const Store& store, const std::string& path);
std::unique_ptr<Store> load_store(const Runtime& rt, const std::string& path, uint64_t* seq = nullptr);
// A store that survives crashes: snapshot plus journal (store_durable.cpp).
std::unique_ptr<Store> open_durable(const Runtime& rt, const DurableOptions& opts);

}  // namespace mnemo
