// What memories hold besides their vectors (keys, namespaces, tags,
// attributes, payloads) and the searches filtered by them: resolving and
// writing fields, the postings, reads, selections and filtered searches.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "bit_count.h"
#include "cpu/parallel_errors.h"
#include "cpu/simd_kernels.h"
#include "error.h"
#include "meta/fields_codec.h"
#include "meta/filter_test.h"
#include "store.h"
#include "topk_merge.h"

namespace mnemo {

std::vector<FieldWrite> Store::resolve_fields(const uint64_t* ids, const FieldsIn* fields, uint64_t count) {
  FieldTables& t = *tables_;
  std::vector<FieldWrite> out(count);
  // A repeated id takes its last entry alone: the earlier ones write
  // nothing (and claim no key). Found by sorting (id, entry) pairs: one
  // allocation, where a map took one per memory.
  std::vector<std::pair<uint64_t, uint64_t>> by_id(count);
  for (uint64_t i = 0; i < count; ++i) by_id[i] = {ids[i], i};
  std::sort(by_id.begin(), by_id.end());
  std::vector<char> last(count, 0);
  for (uint64_t j = 0; j < count; ++j)
    if (j + 1 == count || by_id[j + 1].first != by_id[j].first) last[by_id[j].second] = 1;
  // Keys this call gives, viewed where the caller holds them.
  std::unordered_map<std::string_view, uint64_t> claimed;
  claimed.reserve(count);
  std::vector<std::pair<uint32_t, Value>> attrs;
  for (uint64_t i = 0; i < count; ++i) {
    if (!last[i]) continue;
    const FieldsIn& f = fields[i];
    FieldWrite& w = out[i];
    w.set = f.set;
    if (const Record* old = record_of(ids[i])) w.old_key = old->key;
    if ((f.set & kFieldKey) && !f.key.empty()) {
      auto it = t.key_ids.find(f.key);
      if (it != t.key_ids.end() && it->second != ids[i])
        fail(Code::invalid_argument,
             "fields[" + std::to_string(i) + "].key '" + f.key + "' is held by memory " + std::to_string(it->second));
      const auto [c, fresh] = claimed.emplace(std::string_view(f.key), ids[i]);
      if (!fresh && c->second != ids[i])
        fail(Code::invalid_argument, "fields[" + std::to_string(i) + "].key '" + f.key + "' is also given to id " +
                                         std::to_string(c->second) + " in this call");
      w.rec.key = f.key;
    }
    if ((f.set & kFieldNamespace) && !f.ns.empty()) {
      std::vector<uint32_t> parts;
      for (const auto& p : f.ns) parts.push_back(t.pool.intern(p));
      w.rec.ns = t.namespaces.intern(parts);
    }
    if (f.set & kFieldTags) {
      for (const auto& g : f.tags) w.rec.tags.push_back(t.pool.intern(g));
      std::sort(w.rec.tags.begin(), w.rec.tags.end());
      w.rec.tags.erase(std::unique(w.rec.tags.begin(), w.rec.tags.end()), w.rec.tags.end());
    }
    if (f.set & kFieldAttributes) {
      // By name, a name given twice keeping its last value (a stable sort,
      // then the last of each run).
      attrs.clear();
      for (const auto& [name, v] : f.attrs) {
        Value x;
        x.type = v.type;
        x.i = v.i;
        x.d = v.d;
        if (v.type == ValueType::str) x.s = t.pool.intern(v.s);
        attrs.emplace_back(t.pool.intern(name), x);
      }
      std::stable_sort(attrs.begin(), attrs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      w.rec.attrs.reserve(attrs.size());
      for (size_t j = 0; j < attrs.size(); ++j)
        if (j + 1 == attrs.size() || attrs[j + 1].first != attrs[j].first) w.rec.attrs.push_back(attrs[j]);
    }
    if (f.set & kFieldPayload) w.rec.payload = f.payload;
  }
  return out;
}

void Store::note_keys_locked(const uint64_t* ids, const std::vector<FieldWrite>& w) {
  // resolve_fields leaves a repeated id's earlier entries without fields,
  // so each id is named once here: old keys out first (a key may move to
  // another memory of this call), then the new ones in.
  auto& keys = tables_->key_ids;
  for (size_t i = 0; i < w.size(); ++i) {
    if (!(w[i].set & kFieldKey)) continue;
    auto it = keys.find(w[i].old_key);
    if (it != keys.end() && it->second == ids[i]) keys.erase(it);
  }
  for (size_t i = 0; i < w.size(); ++i)
    if ((w[i].set & kFieldKey) && !w[i].rec.key.empty()) keys[w[i].rec.key] = ids[i];
}

const Record* Store::record_of(uint64_t id) const {
  if (!shards_.empty()) {
    const size_t o = owner_of(id);
    return o < shards_.size() ? shards_[o]->record_of(id) : nullptr;
  }
  const auto* e = slot_of_.find(id);
  return e && e->second < recs_.size() ? recs_[e->second].get() : nullptr;
}

void Store::write_fields_locked(uint64_t slot, FieldWrite& w) {
  if (w.set == 0) return;
  auto& r = recs_[slot];
  const auto s32 = static_cast<uint32_t>(slot);
  if (r)
    postings_.remove(s32, *r);
  else
    r = std::make_unique<Record>();
  // Each write is used once: its tags, attributes and payload move into
  // the record (the key stays: note_keys_locked reads it after).
  if (w.set & kFieldKey) r->key = w.rec.key;
  if (w.set & kFieldNamespace) r->ns = w.rec.ns;
  if (w.set & kFieldTags) r->tags = std::move(w.rec.tags);
  if (w.set & kFieldAttributes) r->attrs = std::move(w.rec.attrs);
  if (w.set & kFieldPayload) r->payload = std::move(w.rec.payload);
  if (r->empty())
    r.reset();
  else
    postings_.add(s32, *r);
}

void Store::drop_fields_locked(uint64_t slot) {
  if (slot >= recs_.size() || !recs_[slot]) return;
  postings_.remove(static_cast<uint32_t>(slot), *recs_[slot]);
  recs_[slot].reset();
}

void Store::rebuild_postings_locked() {
  postings_.clear();
  for (uint64_t s = 0; s < recs_.size(); ++s)
    if (recs_[s] && slot_ids_[s] != kNoId) postings_.add(static_cast<uint32_t>(s), *recs_[s]);
}

FilterScope Store::scope_locked() const {
  FilterScope sc;
  sc.pool = &tables_->pool;
  sc.namespaces = &tables_->namespaces;
  sc.postings = &postings_;
  sc.slots = slot_ids_.size();
  sc.slot_ids = slot_ids_.data();
  sc.times = times_.data();
  sc.importance = importance_.data();
  sc.slot_of = &slot_of_;
  sc.key_ids = &tables_->key_ids;
  return sc;
}

void Store::update_fields(const uint64_t* ids, const FieldsIn* fields, uint64_t count) {
  auto lock = write_lock();
  for (uint64_t i = 0; i < count; ++i)
    if (!record_of(ids[i]) && (shards_.empty() ? !slot_of_.count(ids[i]) : owner_of(ids[i]) == shards_.size()))
      fail(Code::not_found, "ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) + " is not in the store");
  if (count == 0) return;
  auto w = resolve_fields(ids, fields, count);
  set_fields_locked(ids, w, true, fields);
}

void Store::set_fields_locked(const uint64_t* ids, std::vector<FieldWrite>& w, bool journal, const FieldsIn* given) {
  if (journal && journal_) {
    std::string blob;
    for (uint64_t i = 0; i < w.size(); ++i) encode_fields(given[i], blob);
    journal_->append(JournalOp::set_fields, w.size(), DType::f32, ids, blob.data(), blob.size());
  }
  for (uint64_t i = 0; i < w.size(); ++i) {
    Store* owner = this;
    if (!shards_.empty()) owner = shards_[owner_of(ids[i])].get();
    owner->write_fields_locked(owner->slot_of_.at(ids[i]), w[i]);
  }
  note_keys_locked(ids, w);
}

void Store::ids_of_keys(const std::string* keys, uint64_t count, uint64_t* ids) const {
  auto lock = read_lock();
  for (uint64_t i = 0; i < count; ++i) {
    auto it = tables_->key_ids.find(keys[i]);
    ids[i] = it == tables_->key_ids.end() ? kNoId : it->second;
  }
}

void record_strings(const Record& r, const FieldTables& t, FieldsIn& f, uint32_t wanted) {
  if ((wanted & kFieldKey) && !r.key.empty()) f.set |= kFieldKey, f.key = r.key;
  if ((wanted & kFieldNamespace) && r.ns) {
    f.set |= kFieldNamespace;
    for (uint32_t p : t.namespaces.path(r.ns)) f.ns.push_back(t.pool.str(p));
  }
  if ((wanted & kFieldTags) && !r.tags.empty()) {
    f.set |= kFieldTags;
    for (uint32_t g : r.tags) f.tags.push_back(t.pool.str(g));
    std::sort(f.tags.begin(), f.tags.end());
  }
  if ((wanted & kFieldAttributes) && !r.attrs.empty()) {
    f.set |= kFieldAttributes;
    for (const auto& [name, v] : r.attrs) {
      ValueIn x;
      x.type = v.type;
      x.i = v.i;
      x.d = v.d;
      if (v.type == ValueType::str) x.s = t.pool.str(v.s);
      f.attrs.emplace_back(t.pool.str(name), std::move(x));
    }
    std::sort(f.attrs.begin(), f.attrs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  if ((wanted & kFieldPayload) && !r.payload.empty()) f.set |= kFieldPayload, f.payload = r.payload;
}

std::vector<FieldsOut> Store::read(const uint64_t* ids, uint64_t count, uint32_t wanted, bool meta) const {
  auto lock = read_lock();
  const FieldTables& t = *tables_;
  std::vector<FieldsOut> out(count);
  for (uint64_t i = 0; i < count; ++i) {
    const Store* owner = this;
    if (!shards_.empty()) {
      const size_t o = owner_of(ids[i]);
      if (o == shards_.size()) continue;
      owner = shards_[o].get();
    }
    const auto* e = owner->slot_of_.find(ids[i]);
    if (!e) continue;
    FieldsOut& f = out[i];
    f.found = true;
    f.id = ids[i];
    if (meta) {
      f.time = owner->times_[e->second];
      f.importance = owner->importance_[e->second];
    }
    if (!wanted) continue;
    const Record* r = owner->recs_[e->second].get();
    if (r) record_strings(*r, t, f, wanted);
  }
  return out;
}

std::vector<const Store*> Store::parts() const {
  std::vector<const Store*> out;
  if (shards_.empty()) out.push_back(this);
  for (const auto& sh : shards_) out.push_back(sh.get());
  return out;
}

std::vector<uint64_t> Store::select(const Filter* f, uint64_t offset, uint64_t capacity, uint64_t* total) const {
  auto lock = read_lock();
  std::vector<uint64_t> ids;
  for (const Store* p : parts()) {
    const uint64_t* sid = p->slot_ids_.data();
    if (!f) {
      for (uint64_t s = 0; s < p->slot_ids_.size(); ++s)
        if (sid[s] != kNoId) ids.push_back(sid[s]);
      continue;
    }
    const Roaring r = evaluate(*f, p->scope_locked());
    for (uint32_t s : r)
      if (sid[s] != kNoId) ids.push_back(sid[s]);
  }
  std::sort(ids.begin(), ids.end());
  if (total) *total = ids.size();
  const uint64_t from = std::min<uint64_t>(offset, ids.size());
  const uint64_t n = std::min<uint64_t>(capacity, ids.size() - from);
  return std::vector<uint64_t>(ids.begin() + from, ids.begin() + from + n);
}

std::vector<std::pair<std::vector<std::string>, uint64_t>> Store::namespaces() const {
  auto lock = read_lock();
  std::map<uint32_t, uint64_t> counts;
  for (const Store* p : parts())
    for (const auto& [ns, set] : p->postings_.namespaces())
      if (!set.isEmpty()) counts[ns] += set.cardinality();
  std::vector<std::pair<std::vector<std::string>, uint64_t>> out;
  for (const auto& [ns, n] : counts) {
    std::vector<std::string> path;
    for (uint32_t p : tables_->namespaces.path(ns)) path.push_back(tables_->pool.str(p));
    out.emplace_back(std::move(path), n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

FilterPlan Store::last_plan() const {
  std::lock_guard<std::mutex> g(plan_mu_);
  return plan_;
}

Roaring Store::matches_locked(const Filter* where, const Filter* each, const SearchFilter& legacy) const {
  const uint64_t slots = slot_ids_.size();
  const FilterScope sc = scope_locked();
  Roaring r;
  if (where)
    r = evaluate(*where, sc);
  else if (slots > 0)
    r.addRange(0, slots);
  if (each) r &= evaluate(*each, sc);
  if (legacy.kind == FilterKind::ids) {
    std::vector<uint32_t> allowed;
    for_slots_of(legacy.ids, legacy.count, [&](uint64_t s) { allowed.push_back(static_cast<uint32_t>(s)); });
    std::sort(allowed.begin(), allowed.end());
    r &= Roaring(allowed.size(), allowed.data());
  }
  // Removed slots and the caller's bitmap: a pass over the matches, only
  // when there is something to drop.
  if (dead_ == 0 && legacy.kind != FilterKind::slot_bitmap) return r;
  std::vector<uint32_t> dead;
  for (uint32_t s : r)
    if (slot_ids_[s] == kNoId || (legacy.kind == FilterKind::slot_bitmap && !((legacy.bitmap[s >> 6] >> (s & 63)) & 1)))
      dead.push_back(s);
  if (!dead.empty()) r -= Roaring(dead.size(), dead.data());
  return r;
}

uint64_t Store::filter_bitmap_locked(const Filter* where, const Filter* each, const SearchFilter& legacy,
                                     std::vector<uint64_t>& words) const {
  uint64_t total = 0;
  for (const Store* p : parts()) total += p->slot_ids_.size();
  if (legacy.kind == FilterKind::slot_bitmap && legacy.count != total)
    fail(Code::shape, "filter bitmap covers " + std::to_string(legacy.count) + " slots but the store has " +
                          std::to_string(total) + " (see mnemo_store_slot_count)");
  words.assign((total + 63) / 64, 0);
  uint64_t matches = 0, base = 0;
  for (const Store* p : parts()) {
    // A shard reads the caller's bitmap from its first slot on.
    SearchFilter part = legacy;
    std::vector<uint64_t> shifted;
    if (legacy.kind == FilterKind::slot_bitmap && base % 64 != 0) {
      const uint64_t n = p->slot_ids_.size();
      shifted.assign((n + 63) / 64, 0);
      for (uint64_t s = 0; s < n; ++s)
        if ((legacy.bitmap[(base + s) >> 6] >> ((base + s) & 63)) & 1) shifted[s >> 6] |= uint64_t{1} << (s & 63);
      part.bitmap = shifted.data();
    } else if (legacy.kind == FilterKind::slot_bitmap) {
      part.bitmap = legacy.bitmap + base / 64;
    }
    const Roaring r = p->matches_locked(where, each, part);
    for (uint32_t s : r) {
      const uint64_t g = base + s;
      words[g >> 6] |= uint64_t{1} << (g & 63);
    }
    matches += r.cardinality();
    base += p->slot_ids_.size();
  }
  return matches;
}

namespace {

// Queries whose row holds fewer results than min(k, matches).
bool short_rows(const uint64_t* ids, uint64_t nq, uint64_t k, uint64_t matches) {
  const uint64_t want = std::min(k, matches);
  for (uint64_t q = 0; q < nq; ++q)
    if (want > 0 && ids[q * k + want - 1] == kNoId) return true;
  return false;
}

// A filter whose estimated share of the store lets an unfiltered search of
// kPostWant times the results that share suggests (at most kPostMax) hold
// k matches is post-filtered; otherwise one matching at most one slot in
// kSelective takes the selective plan (each query reads its matches), and
// a broader one the masked plan.
constexpr uint64_t kSelective = 4;
constexpr uint64_t kPostWant = 2;
constexpr uint64_t kPostMax = 256;
constexpr uint64_t kPostBatch = 64;
// An indexed search (nprobe below the lists) reads a filter's matches
// through the index when they are more than nprobe/kProbeShare of the
// store, and through their exact list otherwise; through the index, each
// query probes, nearest first, at least the lists that hold kProbeWant * k
// * nprobe of the matches (filter_probes). So nprobe trades speed for
// recall for filtered searches too. Filtered track, 1M x 192 f32, 2
// threads (batch of 1,000 / one query a call): the share fixed at 1/16 and
// no widening, nprobe 1: 3,727 / 1,375 queries/s at recall 0.9922; this
// rule: nprobe 1 5,327 / 2,426 at 0.9721, nprobe 2 4,614 at 0.9848,
// nprobe 4 3,740 at 0.9943. (Fixed at 1/64 without the widening: 5,816 /
// 2,617 at 0.9624.)
constexpr uint64_t kProbeShare = 64;
constexpr uint64_t kProbeWant = 16;
// The masked plan on an index: fewer matches than 1/kExactShare of the
// store are scanned exactly (an index would only skip some of them).
constexpr uint64_t kExactShare = 64;

}  // namespace

uint32_t Store::filter_probes(const float* queries, uint64_t nq, uint64_t k, const uint64_t* words,
                              uint32_t nprobe) const {
  const IvfIndex& ix = *index_;
  const Coarse& c = *ix.coarse;
  const uint32_t nlist = ix.nlist();
  if (nprobe >= nlist) return nprobe;
  // Each list's matches (lists are runs of slots), and the hot tier's,
  // which every query reads.
  auto count = [&](uint64_t lo, uint64_t hi) {
    uint64_t n = 0;
    for (uint64_t i = lo; i < hi;) {
      const uint64_t w = i >> 6, b = i & 63, e = std::min<uint64_t>(hi, (w + 1) << 6);
      uint64_t bits = words[w] >> b;
      if (e - i < 64) bits &= (uint64_t{1} << (e - i)) - 1;
      n += bit_count(bits);
      i = e;
    }
    return n;
  };
  const uint64_t total = slot_ids_.size();
  std::vector<uint64_t> in_list(nlist);
  for (uint32_t l = 0; l < nlist; ++l) in_list[l] = count(ix.offsets[l], std::min(ix.offsets[l + 1], total));
  const uint64_t hot = count(std::min(ix.hot_begin(), total), total);
  const uint64_t want = kProbeWant * k * nprobe;
  const Metric metric = c.metric();
  const bool l2 = metric == Metric::l2sq;
  std::vector<float> score(nlist);
  std::vector<uint32_t> order(nlist);
  uint64_t need = nprobe;
  for (uint64_t qi = 0; qi < nq && need < nlist; ++qi) {
    cpu::simd::score_rows(queries + qi * dim_, 1, c.centroids().data(), DType::f32, dim_, nlist, l2, score.data());
    for (uint32_t l = 0; l < nlist; ++l) {
      if (l2)
        score[l] = -score[l];
      else if (metric == Metric::cosine && c.view().norms[l] > 0.0f)
        score[l] /= c.view().norms[l];
      if (std::isnan(score[l])) score[l] = -std::numeric_limits<float>::infinity();
      order[l] = l;
    }
    // The lists nearest first, until they hold `want`: ordered a few at a
    // time (a broad filter's first lists hold enough; a full sort of the
    // lists each call was most of this function's time after the counts).
    auto nearer = [&](uint32_t a, uint32_t b) { return score[a] > score[b] || (score[a] == score[b] && a < b); };
    uint64_t got = hot, j = 0, sorted = 0;
    while (j < nlist && (j < nprobe || got < want)) {
      if (j == sorted) {
        const uint64_t next = std::min<uint64_t>(nlist, std::max<uint64_t>(2 * sorted, 4 * uint64_t{nprobe} + 16));
        std::partial_sort(order.begin() + static_cast<std::ptrdiff_t>(sorted),
                          order.begin() + static_cast<std::ptrdiff_t>(next), order.end(), nearer);
        sorted = next;
      }
      got += in_list[order[j++]];
    }
    need = std::max(need, j);
  }
  return need >= nlist ? 0 : static_cast<uint32_t>(need);
}

void Store::search_where(const float* queries, uint64_t nq, uint64_t k, const SearchFilter& filter,
                         const RankOptions& rank, uint64_t* out_ids, float* out_scores, const Placement& place) const {
  FilterPlan plan;
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  const auto t_start = Clock::now();
  std::vector<uint64_t> words;
  uint64_t total = 0;
  for (const Store* p : parts()) total += p->slot_ids_.size();
  // The masked plan, the filter as a bitmap over the slots (in `words`).
  // On an index, the lists a query reads may hold fewer than k of the
  // matches: then it is searched again over every memory, so no query
  // gets fewer than min(k, matches) results.
  auto masked = [&](const float* q, uint64_t m, uint64_t* ids, float* scores, uint64_t matches) {
    const auto t0 = Clock::now();
    struct Count {
      double& ms;
      Clock::time_point t0;
      ~Count() { ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
    } count{plan.masked_ms, t0};
    SearchFilter f;
    f.kind = FilterKind::slot_bitmap;
    f.bitmap = words.data();
    f.count = total;
    RankOptions r = rank;
    // Few matches: the exact scan of them reads little; an index would
    // only skip some of them.
    if (r.nprobe > 0 && matches * kExactShare <= total) r.nprobe = 0;
    if (r.nprobe > 0 && !place.on_device && index_ && index_->coarse && index_->hot_begin() <= total)
      r.nprobe = filter_probes(q, m, k, words.data(), r.nprobe);
    search_shared(q, m, k, f, r, ids, scores, place);
    ++plan.searches;
    if (r.nprobe == 0) return;
    bool redo;
    if (place.on_device) {
      std::vector<uint64_t> host(m * k);
      rt_.device_backend(Op::search).copy_to_host(host.data(), ids, host.size() * 8, place.stream);
      redo = short_rows(host.data(), m, k, matches);
    } else {
      redo = short_rows(ids, m, k, matches);
    }
    if (!redo) return;
    r.nprobe = 0;
    search_shared(q, m, k, f, r, ids, scores, place);
    ++plan.searches;
    ++plan.widened;
  };
  const bool lists_ok = shards_.empty() && !place.on_device && !rank.act.normalize;
  // A store whose device evaluates filters: every group goes there, each
  // query reading the driver slots its program passes (no host work per
  // match). The post-filter is then left out: on the H200 (10M x 192 f16,
  // the filtered track's 10,000 queries) the device answered the queries
  // the post-filter took in less time than the post-filter's unfiltered
  // search alone (13,528 queries/s without it, 7,717 with it).
  const bool device_ok = shards_.empty() && !place.on_device && filter.kind == FilterKind::none &&
                         !rank.act.normalize && mirror_ && mirror_->evaluates_filters(k) &&
                         &rt_.pick(Op::search, std::max<uint64_t>(total, 1) * row_bytes_) == home_;
  // MNEMO_FILTER_POST=0 turns the post-filter off, =1 keeps it even where
  // the device evaluates filters (for measuring the plans).
  static const int post_env = [] {
    const char* v = std::getenv("MNEMO_FILTER_POST");
    return v && *v == '0' ? 0 : v && *v == '1' ? 1 : -1;
  }();
  const bool post_on = post_env == 1 || (post_env == -1 && !device_ok);
  const bool post_ok = post_on && !place.on_device && !rank.act.normalize && k <= kPostMax / kPostWant;
  // Queries in a row naming the same filter form a group (one evaluation).
  struct Group {
    uint64_t q0, q1;
    const Filter* mine;
    uint64_t want = 0;                       // post-filter: results asked of the unfiltered search
    std::shared_ptr<Roaring> set = nullptr;  // its matches, where planning evaluated them already
  };
  // The ranged plan: a filter whose matches are mostly one run of slots
  // (a namespace of a clustered store, and the memories written to it
  // since) is an unfiltered search of that run alone, on the host, and a
  // search of the few matches after it, merged. The run [lo, hi) is the
  // set's first, at least three quarters of it (kRunShare). On an index read
  // below its list count, only where the exact list of the matches would be
  // read anyway (the listed plan), so an index's answers stay its own; and
  // not under activation ranking, whose keys the merge does not order.
  constexpr uint64_t kRunShare = 4;
  const bool probing = index_ && index_->coarse && rank.nprobe > 0 && rank.nprobe < index_->nlist();
  const bool range_ok = lists_ok && !place.on_device && !rank.act.on;
  auto one_run = [](const Roaring& set, uint64_t& lo, uint64_t& hi) {
    const uint64_t m = set.cardinality();
    if (m == 0) return false;
    lo = set.minimum();
    hi = uint64_t{set.maximum()} + 1;
    if (hi - lo == m) return true;  // one run, without the search below
    // The longest prefix [lo, lo + h) held whole: rank(x) counts members <= x.
    uint64_t h = 1, top = std::min<uint64_t>(m, hi - lo);
    while (h < top) {
      const uint64_t mid = h + (top - h + 1) / 2;
      if (set.rank(static_cast<uint32_t>(lo + mid - 1)) == mid)
        h = mid;
      else
        top = mid - 1;
    }
    hi = lo + h;
    return h * kRunShare >= m * (kRunShare - 1);
  };
  auto range_on_host = [&](uint64_t lo, uint64_t hi) {
    return &rt_.pick(Op::search, std::max<uint64_t>(hi - lo, 1) * row_bytes_) == &rt_.cpu();
  };
  std::vector<Group> all_groups, groups, broad;
  const Filter* const* each = filter.each;
  for (uint64_t q0 = 0; q0 < nq;) {
    uint64_t q1 = q0 + 1;
    while (each && q1 < nq && each[q1] == each[q0]) ++q1;
    if (!each) q1 = nq;
    all_groups.push_back(Group{q0, q1, each ? each[q0] : nullptr});
    q0 = q1;
  }
  // Each group's estimate (over the cores: they only read the postings).
  if (post_ok && filter.kind == FilterKind::none) {
    const auto ps = parts();
    cpu::ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 1) num_threads(rt_.threads()) if (all_groups.size() > 1)
    for (int64_t i = 0; i < static_cast<int64_t>(all_groups.size()); ++i)
      errors.run([&] {
        Group& g = all_groups[i];
        uint64_t est = 0;
        for (const Store* p : ps) {
          const FilterScope sc = p->scope_locked();
          uint64_t e = p->slot_ids_.size();
          if (filter.where) e = std::min(e, estimate_matches(*filter.where, sc));
          if (g.mine) e = std::min(e, estimate_matches(*g.mine, sc));
          est += e;
        }
        // The post-filter reads the whole store for its groups at once: worth
        // it for a batch (one pass shared by many queries) or a filter
        // broader than the selective plan takes; a few queries of a
        // narrower one read less through their lists.
        const uint64_t want = est == 0 ? UINT64_MAX : (k * total * kPostWant + est - 1) / est;
        const bool broad_enough = nq >= kPostBatch || est * kSelective > total;
        if (want <= kPostMax && broad_enough) g.want = std::max(k, want);
        // A clustered store's scopes are first tested for one run: reading
        // it beats reading the whole store (the evaluated set goes on to the
        // ranged plan below).
        uint64_t lo = 0, hi = 0;
        if (g.want && clustered_ && range_ok && !probing) {
          auto set = std::make_shared<Roaring>(matches_locked(filter.where, g.mine, filter));
          if (one_run(*set, lo, hi) && range_on_host(lo, hi)) g.want = 0, g.set = std::move(set);
        }
      });
    errors.rethrow();
  }
  for (const Group& g : all_groups) (g.want ? broad : groups).push_back(g);
  // Broad filters: one unfiltered search of all their queries, then each
  // query keeps the first k of its results that pass its filters. That is
  // the exact filtered answer whenever k of them pass (the k best matches
  // are then among the best `want` of all); a query short of k goes on to
  // the plans below.
  if (!broad.empty()) {
    uint64_t want = 0, n = 0;
    for (const Group& g : broad) want = std::max(want, g.want), n += g.q1 - g.q0;
    std::vector<float> q(n * dim_);
    std::vector<uint64_t> ids(n * want);
    std::vector<float> sc(n * want);
    uint64_t r = 0;
    for (const Group& g : broad)
      for (uint64_t i = g.q0; i < g.q1; ++i, ++r)
        std::copy(queries + i * dim_, queries + (i + 1) * dim_, q.begin() + r * dim_);
    const auto t0 = Clock::now();
    search_shared(q.data(), n, want, SearchFilter{}, rank, ids.data(), sc.data(), place);
    plan.post_search_ms += ms_since(t0);
    ++plan.searches;
    // Each group's queries are tested on their own (over the cores: the
    // tests only read the store, and each group writes its own rows).
    std::vector<uint64_t> first(broad.size());
    for (size_t b = 1; b < broad.size(); ++b) first[b] = first[b - 1] + broad[b - 1].q1 - broad[b - 1].q0;
    std::vector<char> whole(broad.size(), 1);
    const auto ps = parts();
    cpu::ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 1) num_threads(rt_.threads()) if (broad.size() > 1)
    for (int64_t b = 0; b < static_cast<int64_t>(broad.size()); ++b) {
      errors.run([&] {
        const Group& g = broad[b];
        std::vector<FilterTest> wt, mt;
        for (const Store* p : ps) {
          const FilterScope scope = p->scope_locked();
          if (filter.where) wt.emplace_back(*filter.where, scope);
          if (g.mine) mt.emplace_back(*g.mine, scope);
        }
        uint64_t r = first[b];
        for (uint64_t i = g.q0; i < g.q1; ++i, ++r) {
          uint64_t got = 0;
          for (uint64_t j = 0; j < want && got < k; ++j) {
            const uint64_t id = ids[r * want + j];
            if (id == kNoId) break;
            size_t pi = 0;
            const IdMap::Entry* e = nullptr;
            for (; pi < ps.size(); ++pi)
              if ((e = ps[pi]->slot_of_.find(id))) break;
            if (!e) continue;
            const Record* rec = ps[pi]->recs_[e->second].get();
            if (filter.where && !wt[pi].passes(e->second, rec)) continue;
            if (g.mine && !mt[pi].passes(e->second, rec)) continue;
            out_ids[i * k + got] = id;
            out_scores[i * k + got] = sc[r * want + j];
            ++got;
          }
          if (got < k) whole[b] = 0;
        }
      });
    }
    errors.rethrow();
    for (size_t b = 0; b < broad.size(); ++b) {
      if (whole[b])
        ++plan.post_filtered;
      else
        groups.push_back(Group{broad[b].q0, broad[b].q1, broad[b].mine});
    }
  }
  // The device evaluates the groups left (see device_ok).
  if (device_ok && !groups.empty()) {
    std::vector<uint64_t> picked;
    for (const Group& g : groups)
      for (uint64_t q = g.q0; q < g.q1; ++q) picked.push_back(q);
    std::sort(picked.begin(), picked.end());
    const auto t0 = Clock::now();
    if (search_programs_locked(queries, nq, k, filter.where, filter.each, picked, rank, out_ids, out_scores, place)) {
      plan.list_search_ms += ms_since(t0);
      ++plan.searches;
      plan.listed += picked.size();
      plan.on_device += picked.size();
      groups.clear();
    }
  }
  // The selective plan (one store, host buffers, no normalised ranking):
  // queries whose filters match few memories read just those, in one
  // backend search for all of them. Each group's filter is evaluated on
  // its own (over the cores).
  struct Evaluated {
    uint64_t m = 0;
    bool listed = false;
    bool ranged = false;  // the matches are slots [lo, hi) and then `after`
    uint64_t lo = 0, hi = 0;
    std::vector<uint32_t> after;
    Roaring set;
  };
  std::vector<Evaluated> ev(lists_ok ? groups.size() : 0);
  if (lists_ok) {
    cpu::ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 1) num_threads(rt_.threads()) if (groups.size() > 1)
    for (int64_t i = 0; i < static_cast<int64_t>(groups.size()); ++i) {
      errors.run([&] {
        Evaluated& e = ev[i];
        e.set = groups[i].set ? std::move(*groups[i].set) : matches_locked(filter.where, groups[i].mine, filter);
        e.m = e.set.cardinality();
        // On an index read below its list count, a filter matching more
        // than nprobe/kProbeShare of the store goes through the index (the
        // masked plan, its probes widened by filter_probes, and searched
        // again over every memory when its lists hold fewer than k
        // matches): its exact list would read many rows the index skips.
        e.listed = e.m * kSelective <= total && !(probing && e.m * kProbeShare > total * rank.nprobe);
        e.ranged = range_ok && (!probing || e.listed) && one_run(e.set, e.lo, e.hi) && range_on_host(e.lo, e.hi);
        if (e.ranged) {
          e.after.resize(e.m - (e.hi - e.lo));
          e.set.rangeUint32Array(e.after.data(), e.hi - e.lo, e.after.size());
          e.listed = false;
          e.set = Roaring();
        }
      });
    }
    errors.rethrow();
  }
  // The listed groups' slots end to end, each written by its own thread.
  std::vector<uint64_t> at(ev.size(), 0);
  uint64_t listed = 0;
  for (size_t gi = 0; gi < ev.size(); ++gi)
    if (ev[gi].listed) at[gi] = listed, listed += ev[gi].m;
  // Not zeroed: every entry is written below (lists of many queries run
  // to gigabytes).
  std::unique_ptr<uint32_t[]> slots(new uint32_t[std::max<uint64_t>(listed, 1)]);
  {
    cpu::ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 1) num_threads(rt_.threads()) if (ev.size() > 1)
    for (int64_t i = 0; i < static_cast<int64_t>(ev.size()); ++i)
      errors.run([&] {
        if (!ev[i].listed) return;
        ev[i].set.toUint32Array(slots.get() + at[i]);
        ev[i].set = Roaring();
      });
    errors.rethrow();
  }
  std::vector<uint64_t> bounds, picked;  // picked: the queries of the selective plan
  uint64_t longest = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const Group& g = groups[gi];
    if (lists_ok) {
      Evaluated& e = ev[gi];
      plan.matches += e.m;
      if (e.ranged) {
        const auto t0 = Clock::now();
        const uint64_t m = g.q1 - g.q0;
        const float* qg = queries + g.q0 * dim_;
        if (e.after.empty()) {
          search_range_locked(qg, m, k, e.lo, e.hi, rank, out_ids + g.q0 * k, out_scores + g.q0 * k, place);
          ++plan.searches;
        } else {
          // The run, then the matches after it (a list of their own), merged
          // in the library's order.
          std::vector<uint64_t> ids2(2 * m * k);
          std::vector<float> sc2(2 * m * k);
          search_range_locked(qg, m, k, e.lo, e.hi, rank, ids2.data(), sc2.data(), place);
          std::vector<uint64_t> tb;
          for (uint64_t q = 0; q < m; ++q) tb.push_back(0), tb.push_back(e.after.size());
          SlotLists tail;
          tail.bounds = tb.data();
          tail.slots = e.after.data();
          tail.longest = e.after.size();
          Backend& be = rt_.pick(Op::search, e.after.size() * row_bytes_);
          search_locked(qg, m, k, nullptr, rank, &be == home_, ids2.data() + m * k, sc2.data() + m * k, place, &tail);
          topk_merge(metric_, 2, m, k, ids2.data(), sc2.data(), k, out_ids + g.q0 * k, out_scores + g.q0 * k);
          plan.searches += 2;
        }
        plan.list_search_ms += ms_since(t0);
        plan.ranged += m;
      } else if (e.listed) {
        longest = std::max(longest, e.m);
        for (uint64_t q = g.q0; q < g.q1; ++q) {
          bounds.push_back(at[gi]);
          bounds.push_back(at[gi] + e.m);
          picked.push_back(q);
        }
      } else {
        words.assign((total + 63) / 64, 0);
        // Through an array: the set's own iterator took several times longer.
        std::vector<uint32_t> members(e.m);
        e.set.toUint32Array(members.data());
        for (uint32_t s : members) words[s >> 6] |= uint64_t{1} << (s & 63);
        masked(queries + g.q0 * dim_, g.q1 - g.q0, out_ids + g.q0 * k, out_scores + g.q0 * k, e.m);
      }
    } else {
      const uint64_t m = filter_bitmap_locked(filter.where, g.mine, filter, words);
      plan.matches += m;
      masked(queries + g.q0 * dim_, g.q1 - g.q0, out_ids + g.q0 * k, out_scores + g.q0 * k, m);
    }
  }
  if (!picked.empty()) {
    SlotLists lists;
    lists.bounds = bounds.data();
    lists.slots = slots.get();
    lists.longest = longest;
    const uint64_t n = picked.size();
    // Every query, in order: then the queries and outputs are the caller's own.
    bool all = n == nq;
    for (uint64_t i = 0; all && i < n; ++i) all = picked[i] == i;
    std::vector<float> q(all ? 0 : n * dim_), sc(all ? 0 : n * k);
    std::vector<uint64_t> ids(all ? 0 : n * k);
    for (uint64_t i = 0; !all && i < n; ++i)
      std::copy(queries + picked[i] * dim_, queries + (picked[i] + 1) * dim_, q.begin() + i * dim_);
    // Rows read: the backend pick weighs the candidates, not the store.
    uint64_t read = 0;
    for (uint64_t i = 0; i < n; ++i) read += bounds[2 * i + 1] - bounds[2 * i];
    Backend& be = rt_.pick(Op::search, std::max<uint64_t>(read, 1) * row_bytes_);
    const auto t0 = Clock::now();
    search_locked(all ? queries : q.data(), n, k, nullptr, rank, &be == home_, all ? out_ids : ids.data(),
                  all ? out_scores : sc.data(), place, &lists);
    plan.list_search_ms += ms_since(t0);
    ++plan.searches;
    plan.listed += n;
    for (uint64_t i = 0; !all && i < n; ++i) {
      std::copy(ids.begin() + i * k, ids.begin() + (i + 1) * k, out_ids + picked[i] * k);
      std::copy(sc.begin() + i * k, sc.begin() + (i + 1) * k, out_scores + picked[i] * k);
    }
  }
  plan.total_ms = ms_since(t_start);
  filtered_on_device_.fetch_add(plan.on_device, std::memory_order_relaxed);
  filtered_on_host_.fetch_add(nq - plan.on_device, std::memory_order_relaxed);
  filtered_ranged_.fetch_add(plan.ranged, std::memory_order_relaxed);
  // MNEMO_FILTER_TRACE=1: each filtered call's plan and times on stderr
  // (for measuring where a filtered search spends its time).
  static const bool trace = [] {
    const char* v = std::getenv("MNEMO_FILTER_TRACE");
    return v && *v == '1';
  }();
  if (trace)
    std::fprintf(stderr,
                 "mnemo filter: %llu queries, %llu post-filtered groups, %llu listed queries (%llu on the device), "
                 "%llu searches, matches %llu; total %.3f ms, post search %.3f ms, list search %.3f ms, masked %.3f "
                 "ms\n",
                 static_cast<unsigned long long>(nq), static_cast<unsigned long long>(plan.post_filtered),
                 static_cast<unsigned long long>(plan.listed), static_cast<unsigned long long>(plan.on_device),
                 static_cast<unsigned long long>(plan.searches), static_cast<unsigned long long>(plan.matches),
                 plan.total_ms, plan.post_search_ms, plan.list_search_ms, plan.masked_ms);
  std::lock_guard<std::mutex> g(plan_mu_);
  plan_ = plan;
}

bool Store::search_programs_locked(const float* queries, uint64_t nq, uint64_t k, const Filter* where,
                                   const Filter* const* each, const std::vector<uint64_t>& picked,
                                   const RankOptions& rank, uint64_t* out_ids, float* out_scores,
                                   const Placement& place) const {
  const uint64_t n = picked.size();
  if (place.on_device && n != nq) return false;  // device buffers are searched whole
  FilterPrograms progs;
  progs.group_of.resize(n);
  {
    std::lock_guard<std::mutex> g(columns_mu_);
    if (mirror_->fields_version() != postings_.version() || columns_.version != postings_.version()) {
      const FieldColumns c = build_columns(recs_, slot_ids_.data(), slot_ids_.size(), postings_, columns_);
      mirror_->update_fields(c);
    }
    // Queries in a row naming the same filter share a program.
    const FilterScope sc = scope_locked();
    for (uint64_t i = 0; i < n; ++i) {
      const Filter* mine = each ? each[picked[i]] : nullptr;
      const bool same = i > 0 && picked[i] == picked[i - 1] + 1 && (each ? each[picked[i - 1]] : nullptr) == mine;
      if (!same && !append_program(where, mine, sc, columns_, progs)) return false;
      progs.group_of[i] = static_cast<uint32_t>(progs.groups() - 1);
    }
  }
  // Every query, in order: then the queries and outputs are the caller's own.
  const bool all = n == nq;
  std::vector<float> q(all ? 0 : n * dim_), sc(all ? 0 : n * k);
  std::vector<uint64_t> ids(all ? 0 : n * k);
  for (uint64_t i = 0; !all && i < n; ++i)
    std::copy(queries + picked[i] * dim_, queries + (picked[i] + 1) * dim_, q.begin() + i * dim_);
  search_locked(all ? queries : q.data(), n, k, nullptr, rank, true, all ? out_ids : ids.data(),
                all ? out_scores : sc.data(), place, nullptr, &progs);
  for (uint64_t i = 0; !all && i < n; ++i) {
    std::copy(ids.begin() + i * k, ids.begin() + (i + 1) * k, out_ids + picked[i] * k);
    std::copy(sc.begin() + i * k, sc.begin() + (i + 1) * k, out_scores + picked[i] * k);
  }
  return true;
}

}  // namespace mnemo
