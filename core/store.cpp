#include "store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <mutex>
#include <unordered_set>

#include "checked.h"
#include "cpu/row_ops.h"
#include "error.h"
#include "growth.h"
#include "meta/fields_codec.h"
#include "store_io.h"
#include "validate.h"

namespace mnemo {

Store::Store(const Runtime& rt, uint64_t dim, DType dtype, Metric metric)
    : rt_(rt), dim_(dim), dtype_(dtype), metric_(metric), row_bytes_(dim * dtype_size(dtype)) {
  home_ = &rt_.store_home();
  tables_ = std::make_shared<FieldTables>();
  if (rt_.shard_count() > 1) {
    for (uint32_t i = 0; i < rt_.shard_count(); ++i)
      shards_.push_back(std::unique_ptr<Store>(new Store(rt, dim, dtype, metric, i, tables_)));
    workers_ = std::make_unique<ShardWorkers>(shards_.size());
    return;
  }
  mirror_ = home_->attach_store(view());
}

Store::Store(const Runtime& rt, uint64_t dim, DType dtype, Metric metric, uint32_t shard,
             std::shared_ptr<FieldTables> tables)
    : rt_(rt), dim_(dim), dtype_(dtype), metric_(metric), row_bytes_(dim * dtype_size(dtype)) {
  home_ = &rt_.shard_home(shard);
  tables_ = std::move(tables);
  shard_ = true;
  mirror_ = home_->attach_store(view());
}

Store::~Store() {
  // A background rebuild reads this store until it ends.
  if (rebuild_.joinable()) rebuild_.join();
}

std::shared_lock<std::shared_mutex> Store::read_lock() const {
  { std::lock_guard<std::mutex> g(gate_); }
  return std::shared_lock<std::shared_mutex>(mu_);
}

std::unique_lock<std::shared_mutex> Store::write_lock() {
  std::lock_guard<std::mutex> g(gate_);
  return std::unique_lock<std::shared_mutex>(mu_);
}

StoreView Store::view() const {
  StoreView v;
  v.vectors = vectors_.data();
  v.dtype = dtype_;
  v.metric = metric_;
  v.dim = dim_;
  v.slots = slot_ids_.size();
  v.ids = slot_ids_.data();
  v.norms = norms_.data();
  v.biases = biases_.data();
  v.times = times_.data();
  v.importance = importance_.data();
  v.threads = rt_.threads();
  return v;
}

void Store::mirror_update(uint64_t first, uint64_t count, int threads) {
  if (!mirror_) return;
  StoreView v = view();
  v.threads = threads > 0 ? threads : rt_.threads();
  mirror_->update(v, first, count);
}

void Store::reserve_slots(uint64_t slots) {
  vectors_.reserve(checked_bytes(checked_mul(slots, row_bytes_, "store size"), "store size"));
  reserve_geometric(slot_ids_, slots);
  reserve_geometric(norms_, slots);
  reserve_geometric(biases_, slots);
  reserve_geometric(times_, slots);
  reserve_geometric(importance_, slots);
  reserve_geometric(recs_, slots);
}

void Store::add(const uint64_t* ids, const void* vectors, DType vdt, uint64_t count, const double* times,
                const float* importance, const FieldsIn* fields) {
  if (count == 0) return;
  auto lock = write_lock();
  if (!fields) return add_locked(ids, vectors, vdt, count, true, times, importance);
  auto w = resolve_fields(ids, fields, count);
  add_locked(ids, vectors, vdt, count, true, times, importance, nullptr, 0, w.data(), fields);
  note_keys_locked(ids, w);
}

namespace {

// The journal record of an add: plain, or with the memories' times and
// importance when the call gave them.
void journal_add(Journal& j, const uint64_t* ids, const void* vectors, DType vdt, uint64_t count, uint64_t dim,
                 const double* times, const float* importance, const FieldsIn* fields) {
  const uint64_t vbytes = checked_mul(count, dim, dtype_size(vdt), "vectors");
  if (!times && !importance && !fields) return j.append(JournalOp::add, count, vdt, ids, vectors, vbytes);
  const uint32_t flags =
      (times ? kJournalTimes : 0u) | (importance ? kJournalImportance : 0u) | (fields ? kJournalFields : 0u);
  std::string blob;
  for (uint64_t i = 0; fields && i < count; ++i) encode_fields(fields[i], blob);
  j.append(JournalOp::add_memories, count, vdt, flags, ids,
           {{vectors, vbytes},
            {times, times ? count * 8 : 0},
            {importance, importance ? count * 4 : 0},
            {blob.data(), blob.size()}});
}

}  // namespace

void Store::add_locked(const uint64_t* ids, const void* vectors, DType vdt, uint64_t count, bool journal,
                       const double* times, const float* importance, const uint64_t* pick, int team, FieldWrite* fields,
                       const FieldsIn* given) {
  if (track_dirty_) dirty_.insert(ids, ids + count);
  if (!shards_.empty()) {
    if (journal && journal_) journal_add(*journal_, ids, vectors, vdt, count, dim_, times, importance, given);
    sharded_add(ids, vectors, vdt, count, times, importance, fields);
    if (journal) maybe_rebuild_locked();
    return;
  }
  // Plan first: which ids are new (repeated ids in the batch count once), so
  // every allocation happens before the store changes. An upserted memory
  // of an index's list moves to the hot tier (its list no longer fits it).
  // touched[i] is row i's slot; a slot named twice makes the batch go in
  // order (its last row wins).
  IdMap fresh;                                       // id -> new slot
  std::vector<std::pair<uint64_t, uint64_t>> moved;  // (id, old slot) leaving a list
  std::vector<uint64_t> touched(count), upserted;    // upserted: slots of the hot tier rewritten
  const uint64_t old_slots = slot_ids_.size();
  const uint64_t hot_begin = index_ ? index_->hot_begin() : 0;
  bool repeat = false;
  fresh.reserve(std::min<uint64_t>(count, uint64_t{1} << 24));
  // Each id's current slot first: lookups only read the map, so they go
  // over the cores (each is a cache miss in a large store).
  constexpr uint64_t kNone = UINT64_MAX;
  const int threads = team > 0 ? team : rt_.threads();
  std::vector<uint64_t> had(count);
#pragma omp parallel for schedule(static) if (count >= 16384) num_threads(threads)
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
    const auto* e = slot_of_.find(ids[i]);
    had[i] = e ? e->second : kNone;
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (had[i] != kNone && had[i] >= hot_begin) {
      touched[i] = had[i];
      upserted.push_back(had[i]);
      continue;
    }
    const auto [f, inserted] = fresh.try_emplace(ids[i], old_slots + fresh.size());
    touched[i] = f->second;
    if (!inserted)
      repeat = true;
    else if (had[i] != kNone)
      moved.emplace_back(ids[i], had[i]);
  }
  if (!repeat && upserted.size() > 1) {
    std::sort(upserted.begin(), upserted.end());
    repeat = std::adjacent_find(upserted.begin(), upserted.end()) != upserted.end();
  }
  const uint64_t new_slots = old_slots + fresh.size();
  reserve_slots(new_slots);
  slot_of_.reserve(slot_of_.size() + fresh.size());
  // Journal before the change: once the record is on disk the write is
  // acknowledged; if it cannot be written the store stays as it was.
  if (journal && journal_) journal_add(*journal_, ids, vectors, vdt, count, dim_, times, importance, given);

  // Commit: nothing below allocates except the (reserved) containers.
  vectors_.resize(new_slots * row_bytes_);
  slot_ids_.resize(new_slots, kNoId);
  norms_.resize(new_slots, 0.0f);
  biases_.resize(new_slots, 0.0f);
  times_.resize(new_slots, 0.0);
  importance_.resize(new_slots, 0.0f);
  recs_.resize(new_slots);
  uint64_t moved_lo = UINT64_MAX, moved_hi = 0;
  for (const auto& [id, old] : moved) {
    const uint64_t slot = fresh.at(id);
    if (recs_[old]) {
      postings_.remove(static_cast<uint32_t>(old), *recs_[old]);
      postings_.add(static_cast<uint32_t>(slot), *recs_[old]);
      recs_[slot] = std::move(recs_[old]);
    }
    biases_[slot] = biases_[old];
    times_[slot] = times_[old];
    importance_[slot] = importance_[old];
    slot_ids_[old] = kNoId;
    biases_[old] = 0.0f;
    times_[old] = 0.0;
    importance_[old] = 0.0f;
    slot_of_.erase(id);
    ++dead_;
    moved_lo = std::min(moved_lo, old), moved_hi = std::max(moved_hi, old);
  }
  // New slots (repeats name theirs again); slot_of_ has room for them.
  constexpr uint64_t kAhead = 16;
  for (uint64_t i = 0; i < count; ++i) {
    if (i + kAhead < count) slot_of_.prefetch(ids[i + kAhead]);
    if (touched[i] >= old_slots) {
      slot_ids_[touched[i]] = ids[i];
      slot_of_.try_emplace(ids[i], touched[i]);
    }
  }
  const size_t in_row = dim_ * dtype_size(vdt);
  const auto* in = static_cast<const unsigned char*>(vectors);
  // In call order, so a repeated id keeps its last entry.
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t row = pick ? pick[i] : i;
    if (times) times_[touched[i]] = times[row];
    if (importance) importance_[touched[i]] = importance[row];
    if (fields) write_fields_locked(touched[i], fields[row]);
  }
  // Large batches convert their rows and take their norms over the cores,
  // unless a slot repeats: a batch naming one id twice keeps its last row,
  // so it goes in order.
  constexpr uint64_t kTeamRows = 4096;
  const bool spread = count >= kTeamRows && !repeat;
#pragma omp parallel for schedule(static) if (spread) num_threads(threads)
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
    const uint64_t slot = touched[i];
    unsigned char* dst = vectors_.data() + slot * row_bytes_;
    convert(in + (pick ? pick[i] : static_cast<uint64_t>(i)) * in_row, vdt, dst, dtype_, dim_);
    norms_[slot] = static_cast<float>(cpu::row_norm(dst, dtype_, dim_));
  }
  if (mirror_) {
    // Upload only what changed: upserted slots (one span) and the new tail.
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint64_t slot : touched)
      if (slot < old_slots) lo = std::min(lo, slot), hi = std::max(hi, slot);
    if (lo <= hi) mirror_update(lo, hi - lo + 1, threads);
    if (moved_lo <= moved_hi) mirror_update(moved_lo, moved_hi - moved_lo + 1, threads);
    if (new_slots > old_slots) mirror_update(old_slots, new_slots - old_slots, threads);
  }
  if (!moved.empty() && dead_ * 4 > slot_ids_.size()) compact();
  if (journal) maybe_rebuild_locked();
}

uint64_t Store::remove(const uint64_t* ids, uint64_t count) {
  auto lock = write_lock();
  return remove_locked(ids, count, true);
}

uint64_t Store::remove_locked(const uint64_t* ids, uint64_t count, bool journal) {
  if (!shard_) {
    // The whole store's keys: the removed memories' keys are free again.
    auto& keys = tables_->key_ids;
    for (uint64_t i = 0; i < count && !keys.empty(); ++i)
      if (const Record* r = record_of(ids[i]); r && !r->key.empty()) keys.erase(r->key);
  }
  if (journal && journal_) {
    // Only removals that change something are journaled.
    bool any = false;
    for (uint64_t i = 0; i < count && !any; ++i)
      any = shards_.empty() ? slot_of_.count(ids[i]) != 0 : owner_of(ids[i]) < shards_.size();
    if (any) journal_->append(JournalOp::remove, count, DType::f32, ids, nullptr, 0);
  }
  if (!shards_.empty()) {
    const uint64_t removed = sharded_remove(ids, count);
    if (journal && removed) maybe_rebuild_locked();
    return removed;
  }
  uint64_t removed = 0, lo = UINT64_MAX, hi = 0;
  for (uint64_t i = 0; i < count; ++i) {
    auto it = slot_of_.find(ids[i]);
    if (it == slot_of_.end()) continue;
    const uint64_t slot = it->second;
    lo = std::min(lo, slot);
    hi = std::max(hi, slot);
    drop_fields_locked(slot);
    slot_ids_[slot] = kNoId;
    biases_[slot] = 0.0f;
    times_[slot] = 0.0;
    importance_[slot] = 0.0f;
    slot_of_.erase(it);
    ++dead_;
    ++removed;
  }
  if (removed == 0) return 0;
  if (dead_ * 4 > slot_ids_.size())
    compact();
  else
    mirror_update(lo, hi - lo + 1);
  if (journal) maybe_rebuild_locked();
  return removed;
}

void Store::compact() {
  // Stable: live slots keep their relative order, so results do not move
  // among equal scores beyond the tie rule (which is by id anyway).
  // An index's list bounds move down by the dead slots before them.
  std::vector<uint64_t> bounds = index_ ? index_->offsets : std::vector<uint64_t>{};
  size_t b = 0;
  uint64_t w = 0;
  for (uint64_t r = 0; r < slot_ids_.size(); ++r) {
    while (b < bounds.size() && bounds[b] <= r) bounds[b++] = w;
    if (slot_ids_[r] == kNoId) continue;
    if (w != r) {
      std::memmove(vectors_.data() + w * row_bytes_, vectors_.data() + r * row_bytes_, row_bytes_);
      slot_ids_[w] = slot_ids_[r];
      norms_[w] = norms_[r];
      biases_[w] = biases_[r];
      times_[w] = times_[r];
      importance_[w] = importance_[r];
      recs_[w] = std::move(recs_[r]);
      slot_of_[slot_ids_[w]] = w;
    }
    ++w;
  }
  slot_ids_.resize(w);
  norms_.resize(w);
  biases_.resize(w);
  times_.resize(w);
  importance_.resize(w);
  recs_.resize(w);
  vectors_.resize(w * row_bytes_);
  dead_ = 0;
  rebuild_postings_locked();
  if (index_) {
    while (b < bounds.size()) bounds[b++] = w;
    index_->set_offsets(std::move(bounds));
    if (index_->dev_offsets)
      index_->dev_offsets = home_->copy_to_device(index_->offsets.data(), index_->offsets.size() * 8);
  }
  mirror_update(0, w);
}

void Store::reorder_slots_locked(const std::vector<uint64_t>& order) {
  const uint64_t live = order.size();
  AlignedBuffer nv;
  nv.resize(checked_bytes(checked_mul(live, row_bytes_, "store size"), "store size"));
  std::vector<uint64_t> nid(live);
  std::vector<float> nnorm(live), nbias(live), nimp(live);
  std::vector<double> ntime(live);
  std::vector<std::unique_ptr<Record>> nrec(live);
  IdMap nslot;
  nslot.reserve(live);
  for (uint64_t d = 0; d < live; ++d) {
    const uint64_t s = order[d];
    std::memcpy(nv.data() + d * row_bytes_, vectors_.data() + s * row_bytes_, row_bytes_);
    nid[d] = slot_ids_[s];
    nnorm[d] = norms_[s];
    nbias[d] = biases_[s];
    ntime[d] = times_[s];
    nimp[d] = importance_[s];
    if (s < recs_.size()) nrec[d] = std::move(recs_[s]);
    nslot.emplace(nid[d], d);
  }
  vectors_ = std::move(nv);
  slot_ids_ = std::move(nid);
  norms_ = std::move(nnorm);
  biases_ = std::move(nbias);
  times_ = std::move(ntime);
  importance_ = std::move(nimp);
  recs_ = std::move(nrec);
  slot_of_ = std::move(nslot);
  dead_ = 0;
  rebuild_postings_locked();
  mirror_update(0, live);
}

uint64_t Store::count() const {
  auto lock = read_lock();
  uint64_t n = slot_of_.size();
  for (const auto& sh : shards_) n += sh->slot_of_.size();
  return n;
}

uint64_t Store::slot_count() const {
  auto lock = read_lock();
  uint64_t n = slot_ids_.size();
  for (const auto& sh : shards_) n += sh->slot_ids_.size();
  return n;
}

bool Store::slot_of(uint64_t id, uint64_t& slot) const {
  auto lock = read_lock();
  if (!shards_.empty()) {
    // A sharded store's slots are its shards' slots end to end.
    uint64_t base = 0;
    for (const auto& sh : shards_) {
      auto it = sh->slot_of_.find(id);
      if (it != sh->slot_of_.end()) {
        slot = base + it->second;
        return true;
      }
      base += sh->slot_ids_.size();
    }
    return false;
  }
  auto it = slot_of_.find(id);
  if (it == slot_of_.end()) return false;
  slot = it->second;
  return true;
}

bool Store::get(uint64_t id, float* out) const {
  auto lock = read_lock();
  if (!shards_.empty()) {
    const size_t o = owner_of(id);
    return o < shards_.size() && shards_[o]->get(id, out);
  }
  auto it = slot_of_.find(id);
  if (it == slot_of_.end()) return false;
  convert(vectors_.data() + it->second * row_bytes_, dtype_, out, DType::f32, dim_);
  return true;
}

void Store::set_bias(const uint64_t* ids, const float* biases, uint64_t count) {
  auto lock = write_lock();
  set_field_locked(JournalOp::set_bias, ids, biases, count, true);
}

void Store::set_times(const uint64_t* ids, const double* times, uint64_t count) {
  auto lock = write_lock();
  set_field_locked(JournalOp::set_times, ids, times, count, true);
}

void Store::set_importance(const uint64_t* ids, const float* importance, uint64_t count) {
  auto lock = write_lock();
  set_field_locked(JournalOp::set_importance, ids, importance, count, true);
}

void Store::set_field_locked(JournalOp field, const uint64_t* ids, const void* values, uint64_t count, bool journal) {
  // Slots here, or owning shards of a sharded store.
  std::vector<uint64_t> slots(count);
  for (uint64_t i = 0; i < count; ++i) {
    bool found;
    if (shards_.empty()) {
      auto it = slot_of_.find(ids[i]);
      found = it != slot_of_.end();
      if (found) slots[i] = it->second;
    } else {
      slots[i] = owner_of(ids[i]);
      found = slots[i] < shards_.size();
    }
    if (!found)
      fail(Code::not_found, "ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) + " is not in the store");
  }
  if (count == 0) return;
  const size_t bytes = field == JournalOp::set_times ? 8 : 4;
  if (journal && journal_) journal_->append(field, count, DType::f32, ids, values, count * bytes);
  if (!shards_.empty()) return sharded_set_field(ids, values, bytes, slots.data(), count, field);
  for (uint64_t i = 0; i < count; ++i) {
    switch (field) {
      case JournalOp::set_times: times_[slots[i]] = static_cast<const double*>(values)[i]; break;
      case JournalOp::set_importance: importance_[slots[i]] = static_cast<const float*>(values)[i]; break;
      default: biases_[slots[i]] = static_cast<const float*>(values)[i]; break;
    }
  }
  const auto [lo, hi] = std::minmax_element(slots.begin(), slots.end());
  mirror_update(*lo, *hi - *lo + 1);
}

void Store::get_meta(const uint64_t* ids, uint64_t count, double* times, float* importance, float* biases) const {
  auto lock = read_lock();
  // Owner and slot of every id first: nothing is written for a missing one.
  std::vector<std::pair<const Store*, uint64_t>> at(count);
  for (uint64_t i = 0; i < count; ++i) {
    const Store* owner = this;
    if (!shards_.empty()) {
      const size_t o = owner_of(ids[i]);
      owner = o < shards_.size() ? shards_[o].get() : nullptr;
    }
    auto it = owner ? owner->slot_of_.find(ids[i]) : slot_of_.end();
    if (!owner || it == owner->slot_of_.end())
      fail(Code::not_found, "ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) + " is not in the store");
    at[i] = {owner, it->second};
  }
  for (uint64_t i = 0; i < count; ++i) {
    const auto& [owner, slot] = at[i];
    if (times) times[i] = owner->times_[slot];
    if (importance) importance[i] = owner->importance_[slot];
    if (biases) biases[i] = owner->biases_[slot];
  }
}

void Store::search(const float* queries, uint64_t nq, uint64_t k, const SearchFilter& filter, const RankOptions& rank,
                   uint64_t* out_ids, float* out_scores, const Placement& place) {
  if (!rank.touch) {
    auto lock = read_lock();
    return search_shared(queries, nq, k, filter, rank, out_ids, out_scores, place);
  }
  // Touching is a write: no other search or write sees the store between the
  // search and the new times.
  auto lock = write_lock();
  search_shared(queries, nq, k, filter, rank, out_ids, out_scores, place);
  const uint64_t n = nq * k;
  if (!place.on_device) return touch_locked(out_ids, n, rank.act.now);
  std::vector<uint64_t> ids(n);
  rt_.device_backend(Op::search).copy_to_host(ids.data(), out_ids, n * 8, place.stream);
  touch_locked(ids.data(), n, rank.act.now);
}

void Store::touch_locked(const uint64_t* ids, uint64_t n, double now) {
  std::vector<uint64_t> uniq;
  uniq.reserve(n);
  for (uint64_t i = 0; i < n; ++i)
    if (ids[i] != kNoId) uniq.push_back(ids[i]);
  std::sort(uniq.begin(), uniq.end());
  uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
  if (uniq.empty()) return;
  const std::vector<double> times(uniq.size(), now);
  set_field_locked(JournalOp::set_times, uniq.data(), times.data(), uniq.size(), true);
}

void Store::search_shared(const float* queries, uint64_t nq, uint64_t k, const SearchFilter& filter,
                          const RankOptions& rank, uint64_t* out_ids, float* out_scores, const Placement& place) const {
  if (filter.where || filter.each) return search_where(queries, nq, k, filter, rank, out_ids, out_scores, place);
  if (!shards_.empty()) {
    return sharded_search(queries, nq, k, filter, rank, out_ids, out_scores, place);
  }
  const uint64_t slots = slot_ids_.size();
  std::vector<uint64_t> allow;
  const uint64_t* allow_ptr = nullptr;
  if (filter.kind == FilterKind::slot_bitmap) {
    if (filter.count != slots)
      fail(Code::shape, "filter bitmap covers " + std::to_string(filter.count) + " slots but the store has " +
                            std::to_string(slots) + " (see mnemo_store_slot_count)");
    allow_ptr = filter.bitmap;
  } else if (filter.kind == FilterKind::ids) {
    allow.assign((slots + 63) / 64, 0);
    for_slots_of(filter.ids, filter.count, [&](uint64_t s) { allow[s >> 6] |= uint64_t{1} << (s & 63); });
    allow_ptr = allow.data();
  }
  Backend& be = place.on_device ? rt_.device_backend(Op::search)
                                : rt_.pick(Op::search, slots * row_bytes_ * std::max<uint64_t>(nq, 1));
  search_locked(queries, nq, k, allow_ptr, rank, &be == home_, out_ids, out_scores, place);
}

void Store::search_locked(const float* queries, uint64_t nq, uint64_t k, const uint64_t* allow_ptr,
                          const RankOptions& rank, bool on_home, uint64_t* out_ids, float* out_scores,
                          const Placement& place, const SlotLists* lists, const FilterPrograms* programs) const {
  const StoreView v = view();
  Backend& be = on_home ? *home_ : rt_.cpu();
  SearchArgs a = search_args(v, queries, nq, k, rank, out_ids, out_scores, place);
  a.mirror = on_home ? mirror_.get() : nullptr;
  if (place.on_device && a.mirror == nullptr)
    fail(Code::backend_unavailable, "device pointers need a store held by the GPU; this one is in host memory");
  a.allow = allow_ptr;
  a.lists = lists;
  a.programs = programs;
  IvfProbe probe;
  if (!lists && !programs && index_ && index_->coarse && rank.nprobe > 0 && rank.nprobe < index_->nlist()) {
    probe.centroids = &index_->coarse->view();
    probe.centroid_mirror = on_home ? index_->coarse->mirror() : nullptr;
    probe.offsets = index_->offsets.data();
    probe.device_offsets = on_home && index_->dev_offsets ? index_->dev_offsets->data() : nullptr;
    probe.nprobe = rank.nprobe;
    probe.hot_begin = index_->hot_begin();
    probe.longest = index_->largest;
    a.probe = &probe;
  }
  be.search(a);
}

void Store::search_range_locked(const float* queries, uint64_t nq, uint64_t k, uint64_t lo, uint64_t hi,
                                const RankOptions& rank, uint64_t* out_ids, float* out_scores,
                                const Placement& place) const {
  // The store's arrays from slot lo: every per-slot array moves together.
  StoreView v = view();
  v.vectors = vectors_.data() + lo * row_bytes_;
  v.slots = hi - lo;
  v.ids += lo;
  v.norms += lo;
  v.biases += lo;
  v.times += lo;
  v.importance += lo;
  rt_.cpu().search(search_args(v, queries, nq, k, rank, out_ids, out_scores, place));
}

SearchArgs Store::search_args(const StoreView& v, const float* queries, uint64_t nq, uint64_t k,
                              const RankOptions& rank, uint64_t* out_ids, float* out_scores,
                              const Placement& place) const {
  SearchArgs a;
  a.store = &v;
  a.place = place;
  a.place.validate = place.validate && rt_.validate();
  a.queries = queries;
  a.nq = nq;
  a.k = k;
  a.apply_bias = rank.apply_bias;
  a.act = rank.act;
  a.ids = out_ids;
  a.scores = out_scores;
  return a;
}

uint64_t Store::adopt(std::vector<uint64_t> ids, AlignedBuffer vectors, std::vector<float> biases,
                      std::vector<double> times, std::vector<float> importance) {
  const uint64_t n = ids.size();
  if (times.empty()) times.assign(n, 0.0);
  if (importance.empty()) importance.assign(n, 0.0f);
  if (!shards_.empty()) {
    // A sharded store spreads the rows over its shards as an add does
    // (through the shards' own arrays, so not in place).
    std::unordered_set<uint64_t> seen;
    seen.reserve(n);
    for (uint64_t i = 0; i < n; ++i)
      if (ids[i] == kNoId || !seen.insert(ids[i]).second) return i;
    if (n > 0) {
      add(ids.data(), vectors.data(), dtype_, n, times.data(), importance.data());
      set_bias(ids.data(), biases.data(), n);
    }
    return UINT64_MAX;
  }
  auto lock = write_lock();
  slot_of_.reserve(n);
  for (uint64_t i = 0; i < n; ++i)
    if (ids[i] == kNoId || !slot_of_.emplace(ids[i], i).second) return i;
  norms_.resize(n);
  // One pass over the whole store: spread over the cores when it is large
  // (a thread team costs more than a small store takes).
  const unsigned char* rows = vectors.data();
#pragma omp parallel for schedule(static) if (n >= 16384) num_threads(rt_.threads())
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i)
    norms_[i] = static_cast<float>(cpu::row_norm(rows + static_cast<uint64_t>(i) * row_bytes_, dtype_, dim_));
  vectors_ = std::move(vectors);
  slot_ids_ = std::move(ids);
  biases_ = std::move(biases);
  times_ = std::move(times);
  importance_ = std::move(importance);
  recs_.clear();
  recs_.resize(n);
  postings_.clear();
  dead_ = 0;
  mirror_update(0, n);
  return UINT64_MAX;
}

void Store::save(const std::string& path) const {
  auto lock = read_lock();
  write_snapshot_locked(path, journal_ ? journal_->last_seq() : 0);
}

StoreContents Store::snapshot() const {
  auto lock = read_lock();
  return contents_locked();
}

StoreContents Store::contents_locked() const {
  StoreContents c{dim_, dtype_, metric_, {}, {}, {}, {}, {}, journal_ ? journal_->last_seq() : 0, indexed_, {}, {}};
  if (indexed_) c.layout = layout_locked();
  if (!shards_.empty()) {
    // The shards' rows end to end: one snapshot for the whole store.
    for (const auto& sh : shards_) {
      StoreContents part = sh->contents_locked();
      c.ids.insert(c.ids.end(), part.ids.begin(), part.ids.end());
      c.vectors.insert(c.vectors.end(), part.vectors.begin(), part.vectors.end());
      c.biases.insert(c.biases.end(), part.biases.begin(), part.biases.end());
      c.times.insert(c.times.end(), part.times.begin(), part.times.end());
      c.importance.insert(c.importance.end(), part.importance.begin(), part.importance.end());
      c.fields.insert(c.fields.end(), std::make_move_iterator(part.fields.begin()),
                      std::make_move_iterator(part.fields.end()));
    }
    return c;
  }
  c.ids.reserve(slot_of_.size());
  c.vectors.reserve(slot_of_.size() * row_bytes_);
  c.biases.reserve(slot_of_.size());
  c.times.reserve(slot_of_.size());
  c.importance.reserve(slot_of_.size());
  c.fields.reserve(slot_of_.size());
  for (uint64_t s = 0; s < slot_ids_.size(); ++s) {
    if (slot_ids_[s] == kNoId) continue;
    c.fields.emplace_back();
    encode_slot_fields_locked(s, c.fields.back());
    c.ids.push_back(slot_ids_[s]);
    const unsigned char* row = vectors_.data() + s * row_bytes_;
    c.vectors.insert(c.vectors.end(), row, row + row_bytes_);
    c.biases.push_back(biases_[s]);
    c.times.push_back(times_[s]);
    c.importance.push_back(importance_[s]);
  }
  return c;
}

StoreStats Store::stats() const {
  auto lock = read_lock();
  StoreStats st{};
  st.vectors = slot_of_.size();
  st.tombstones = dead_;
  st.slots = slot_ids_.size();
  // The store's own arrays and its id index (nodes of an id and a slot).
  st.host_bytes = vectors_.size() + slot_ids_.capacity() * sizeof(uint64_t) + norms_.capacity() * sizeof(float) +
                  biases_.capacity() * sizeof(float) + times_.capacity() * sizeof(double) +
                  importance_.capacity() * sizeof(float) + slot_of_.memory_bytes();
  st.device_bytes = mirror_ ? mirror_->device_bytes() : 0;
  if (shards_.empty()) st.shard_vectors.push_back(st.vectors);
  for (const auto& sh : shards_) {
    const StoreStats part = sh->stats();
    st.vectors += part.vectors;
    st.tombstones += part.tombstones;
    st.slots += part.slots;
    st.host_bytes += part.host_bytes;
    st.device_bytes += part.device_bytes;
    st.shard_vectors.push_back(part.vectors);
  }
  st.filtered_on_device = filtered_on_device_.load(std::memory_order_relaxed);
  st.filtered_on_host = filtered_on_host_.load(std::memory_order_relaxed);
  st.filtered_ranged = filtered_ranged_.load(std::memory_order_relaxed);
  st.durable = journal_ != nullptr;
  if (journal_) {
    st.journal_records = journal_->records();
    st.journal_bytes = journal_->bytes();
    st.seq = journal_->last_seq();
  }
  return st;
}

namespace {

// The values of a set_* record (or an add_memories record's arrays) copied
// out of the record, checked finite: a checksummed record may still hold
// what no write could have made.
template <class T>
std::vector<T> record_values(const unsigned char* p, uint64_t count, const char* what) {
  std::vector<T> v(count);
  std::memcpy(v.data(), p, count * sizeof(T));
  for (uint64_t i = 0; i < count; ++i)
    if (!std::isfinite(v[i])) fail(Code::corrupt, std::string("a journaled ") + what + " is not finite");
  return v;
}

}  // namespace

IndexLayout decode_layout(const JournalRecord& r, uint64_t dim) {
  IndexLayout L;
  L.nlist = r.flags;
  const auto* d = static_cast<const unsigned char*>(r.data);
  const uint64_t want = r.count * 4 + kIndexOptionBytes + uint64_t{L.nlist} * dim * 4;
  if (r.data_bytes != want) fail(Code::corrupt, "an index record's size does not match its list count");
  L.ids.assign(r.ids, r.ids + r.count);
  L.lists.resize(r.count);
  if (r.count > 0) std::memcpy(L.lists.data(), d, r.count * 4);
  for (uint32_t l : L.lists)
    if (l >= L.nlist) fail(Code::corrupt, "an index record names a list past its list count");
  L.opts = decode_index_options(d + r.count * 4);
  L.centroids.resize(uint64_t{L.nlist} * dim);
  if (L.nlist > 0) std::memcpy(L.centroids.data(), d + r.count * 4 + kIndexOptionBytes, L.centroids.size() * 4);
  for (float c : L.centroids)
    if (!std::isfinite(c)) fail(Code::corrupt, "an index record's centroid is not finite");
  return L;
}

void Store::apply(const JournalRecord& r) {
  auto lock = write_lock();
  const auto* data = static_cast<const unsigned char*>(r.data);
  switch (r.op) {
    case JournalOp::add:
    case JournalOp::add_memories: {
      // A checksummed record may still hold what no write could have made
      // (a damaged copy, a record made elsewhere): refuse it rather than
      // keep a store whose next snapshot would not load.
      for (uint64_t i = 0; i < r.count; ++i)
        if (r.ids[i] == kNoId) fail(Code::corrupt, "ids[" + std::to_string(i) + "] is the reserved MNEMO_NO_ID");
      // The record's vectors are in aligned memory (JournalRecord); checked in
      // the store's dtype, so a value that rounds to infinity is seen. Only
      // a record in another dtype needs a converted copy.
      const uint64_t n = r.count * dim_;
      const void* rows = r.data;
      AlignedBuffer v;
      if (r.dtype != dtype_) {
        v.resize(n * dtype_size(dtype_));
        convert(r.data, r.dtype, v.data(), dtype_, n);
        rows = v.data();
      }
      if (find_non_finite(rows, dtype_, n) != kNotFound) fail(Code::corrupt, "a vector element is not finite");
      uint64_t at = n * dtype_size(r.dtype);
      std::vector<double> times;
      std::vector<float> importance;
      if (r.flags & kJournalTimes) {
        times = record_values<double>(data + at, r.count, "time");
        at += r.count * 8;
      }
      if (r.flags & kJournalImportance) {
        importance = record_values<float>(data + at, r.count, "importance");
        at += r.count * 4;
      }
      const double* tp = times.empty() ? nullptr : times.data();
      const float* ip = importance.empty() ? nullptr : importance.data();
      if (!(r.flags & kJournalFields)) {
        add_locked(r.ids, rows, dtype_, r.count, false, tp, ip);
        break;
      }
      std::vector<FieldsIn> given(r.count);
      for (uint64_t i = 0; i < r.count; ++i) given[i] = decode_fields(data, r.data_bytes, at);
      if (at != r.data_bytes) fail(Code::corrupt, "an add record holds bytes after its fields");
      auto w = resolve_fields(r.ids, given.data(), r.count);
      add_locked(r.ids, rows, dtype_, r.count, false, tp, ip, nullptr, 0, w.data(), given.data());
      note_keys_locked(r.ids, w);
      break;
    }
    case JournalOp::set_fields: {
      std::vector<FieldsIn> given(r.count);
      uint64_t at = 0;
      for (uint64_t i = 0; i < r.count; ++i) given[i] = decode_fields(data, r.data_bytes, at);
      if (at != r.data_bytes) fail(Code::corrupt, "a fields record holds bytes after its fields");
      for (uint64_t i = 0; i < r.count; ++i)
        if (shards_.empty() ? !slot_of_.count(r.ids[i]) : owner_of(r.ids[i]) == shards_.size())
          fail(Code::corrupt, "a fields record names a memory the store does not hold");
      auto w = resolve_fields(r.ids, given.data(), r.count);
      set_fields_locked(r.ids, w, false, given.data());
      break;
    }
    case JournalOp::remove: remove_locked(r.ids, r.count, false); break;
    case JournalOp::set_bias:
    case JournalOp::set_importance: {
      const auto v = record_values<float>(data, r.count, r.op == JournalOp::set_bias ? "bias" : "importance");
      set_field_locked(r.op, r.ids, v.data(), r.count, false);
      break;
    }
    case JournalOp::set_times: {
      const auto v = record_values<double>(data, r.count, "time");
      set_field_locked(r.op, r.ids, v.data(), r.count, false);
      break;
    }
    case JournalOp::index_layout: apply_layout_locked(decode_layout(r, dim_), false); break;
    case JournalOp::index_drop: drop_index_locked(false); break;
  }
}

void Store::attach_journal(std::unique_ptr<Journal> journal, std::string snapshot_path) {
  auto lock = write_lock();
  journal_ = std::move(journal);
  snapshot_path_ = std::move(snapshot_path);
}

void Store::checkpoint() {
  // Exclusive, like a write: the snapshot and the fresh journal must meet at
  // one sequence number, and the journal's counters change.
  auto lock = write_lock();
  if (!journal_) fail(Code::unsupported, "the store was not opened in durable mode (mnemo_store_open_durable)");
  const uint64_t seq = journal_->last_seq();
  // Snapshot first, then the journal: a crash between the two leaves a
  // journal whose records the snapshot already holds, which replay skips.
  write_snapshot_locked(snapshot_path_, seq);
  journal_->reset(seq);
}

}  // namespace mnemo
