// A sharded store: one sub-store per shard (a GPU each, or N on the CPU),
// under the parent's lock and journal. New ids go to the shard holding the
// fewest memories, so shards stay balanced by count; every other call is
// routed to the shard holding the id; an add runs on every shard at once (the
// store's worker thread per shard beyond the first). A search on GPU shards runs on all
// at once the same way, each shard on its own device's stream waiting only
// for itself; CPU shards are searched in turn with the whole thread team.
// The per-shard lists are merged by topk_merge (host buffers) or on the
// caller's GPU (device buffers: the backend's ShardGather). Each row's score is computed by the same kernel as
// in an unsharded store and does not depend on the shard's size, and ids
// are unique across shards, so the merged result equals an unsharded
// store's bit for bit, ties included.
#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "checked.h"
#include "error.h"
#include "store.h"
#include "topk_merge.h"

namespace mnemo {

namespace {

// Runs fn(i) for the busy i in [0, n): i > 0 on the store's shard workers
// (threads of their own while another call holds those), 0 on the caller's;
// the first failure (by shard order) is rethrown after all have finished.
// With `threaded` false all run on the caller's thread, one after another.
void for_each_shard(ShardWorkers* workers, size_t n, const std::vector<char>& busy, bool threaded,
                    const std::function<void(size_t)>& fn) {
  // A single busy shard needs no thread of its own.
  if (std::count(busy.begin(), busy.end(), 1) < 2) threaded = false;
  std::vector<std::exception_ptr> errs(n);
  auto one = [&](size_t i) {
    try {
      fn(i);
    } catch (...) {
      errs[i] = std::current_exception();
    }
  };
  if (!threaded) {
    for (size_t i = 0; i < n; ++i)
      if (busy[i]) one(i);
  } else if (!workers || !workers->try_run(busy, fn, errs)) {
    std::vector<std::thread> threads;
    for (size_t i = 1; i < n; ++i)
      if (busy[i]) threads.emplace_back(one, i);
    if (n > 0 && busy[0]) one(0);
    for (auto& t : threads) t.join();
  }
  for (auto& e : errs)
    if (e) std::rethrow_exception(e);
}

}  // namespace

size_t Store::owner_of(uint64_t id) const {
  for (size_t s = 0; s < shards_.size(); ++s)
    if (shards_[s]->slot_of_.count(id)) return s;
  return shards_.size();
}

void Store::sharded_add(const uint64_t* ids, const void* vectors, DType vdt, uint64_t count, const double* times,
                        const float* importance, FieldWrite* fields) {
  const size_t n = shards_.size();
  // Route: existing ids to their shard, new ones to the least-filled shard
  // (counting what this call already sent there); a repeated id follows its
  // first place.
  std::vector<uint64_t> load(n);
  for (size_t s = 0; s < n; ++s) load[s] = shards_[s]->slot_of_.size();
  // The owners' lookups only read the shards' maps: over the cores.
  std::vector<uint32_t> owner(count);
  constexpr uint64_t kTeamIds = 1 << 14;
#pragma omp parallel for schedule(static) if (count >= kTeamIds) num_threads(rt_.threads())
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) owner[i] = static_cast<uint32_t>(owner_of(ids[i]));
  IdMap fresh;  // new id -> its shard
  fresh.reserve(std::min<uint64_t>(count, uint64_t{1} << 24));
  std::vector<std::vector<uint64_t>> rows(n);
  for (uint64_t i = 0; i < count; ++i) {
    size_t o = owner[i];
    if (o == n) {
      const auto [it, inserted] = fresh.try_emplace(ids[i], 0);
      if (inserted) {
        it->second = static_cast<uint32_t>(std::min_element(load.begin(), load.end()) - load.begin());
        ++load[it->second];
      }
      o = it->second;
    }
    rows[o].push_back(i);
  }
  // Room first in every shard, so a failed allocation changes none of them.
  for (size_t s = 0; s < n; ++s) shards_[s]->reserve_slots(shards_[s]->slot_ids_.size() + rows[s].size());
  std::vector<char> busy(n);
  for (size_t s = 0; s < n; ++s) busy[s] = !rows[s].empty();
  // Each shard adds its rows on its own thread (the device uploads of a GPU
  // shard overlap the others'), reading them where the caller has them (no
  // gathered copy) with its share of the cores.
  const int busy_shards = static_cast<int>(std::max<ptrdiff_t>(1, std::count(busy.begin(), busy.end(), 1)));
  const int team = std::max(1, rt_.threads() / busy_shards);
  for_each_shard(workers_.get(), n, busy, true, [&](size_t s) {
    const std::vector<uint64_t>& r = rows[s];
    std::vector<uint64_t> sub(r.size());
    for (size_t j = 0; j < r.size(); ++j) sub[j] = ids[r[j]];
    shards_[s]->add_locked(sub.data(), vectors, vdt, sub.size(), false, times, importance, r.data(), team, fields);
  });
}

uint64_t Store::sharded_remove(const uint64_t* ids, uint64_t count) {
  const size_t n = shards_.size();
  std::vector<std::vector<uint64_t>> sub(n);
  for (uint64_t i = 0; i < count; ++i) {
    const size_t o = owner_of(ids[i]);
    if (o < n) sub[o].push_back(ids[i]);
  }
  uint64_t removed = 0;
  for (size_t s = 0; s < n; ++s)
    if (!sub[s].empty()) removed += shards_[s]->remove_locked(sub[s].data(), sub[s].size(), false);
  return removed;
}

void Store::sharded_set_field(const uint64_t* ids, const void* values, size_t bytes, const uint64_t* owners,
                              uint64_t count, JournalOp field) {
  const size_t n = shards_.size();
  std::vector<std::vector<uint64_t>> sub(n);
  std::vector<std::vector<unsigned char>> val(n);
  const auto* v = static_cast<const unsigned char*>(values);
  for (uint64_t i = 0; i < count; ++i) {
    sub[owners[i]].push_back(ids[i]);
    val[owners[i]].insert(val[owners[i]].end(), v + i * bytes, v + (i + 1) * bytes);
  }
  for (size_t s = 0; s < n; ++s)
    if (!sub[s].empty()) shards_[s]->set_field_locked(field, sub[s].data(), val[s].data(), sub[s].size(), false);
}

void Store::sharded_search(const float* queries, uint64_t nq, uint64_t k, const SearchFilter& filter,
                           const RankOptions& rank, uint64_t* out_ids, float* out_scores,
                           const Placement& place) const {
  const size_t n = shards_.size();
  uint64_t slots = 0;
  std::vector<uint64_t> first(n);
  for (size_t s = 0; s < n; ++s) {
    first[s] = slots;
    slots += shards_[s]->slot_ids_.size();
  }
  if (filter.kind == FilterKind::slot_bitmap && filter.count != slots)
    fail(Code::shape, "filter bitmap covers " + std::to_string(filter.count) + " slots but the store has " +
                          std::to_string(slots) + " (see mnemo_store_slot_count)");
  // Each shard's part of the filter, as a bitmap over its own slots.
  std::vector<std::vector<uint64_t>> allow(filter.kind == FilterKind::none ? 0 : n);
  for (size_t s = 0; s < allow.size(); ++s) {
    const Store& sh = *shards_[s];
    const uint64_t m = sh.slot_ids_.size();
    allow[s].assign((m + 63) / 64, 0);
    if (filter.kind == FilterKind::slot_bitmap) {
      for (uint64_t j = 0; j < m; ++j) {
        const uint64_t g = first[s] + j;
        if ((filter.bitmap[g >> 6] >> (g & 63)) & 1) allow[s][j >> 6] |= uint64_t{1} << (j & 63);
      }
    } else {
      for (uint64_t i = 0; i < filter.count; ++i) {
        auto it = sh.slot_of_.find(filter.ids[i]);
        if (it != sh.slot_of_.end()) allow[s][it->second >> 6] |= uint64_t{1} << (it->second & 63);
      }
    }
  }
  // One decision for all shards, from the whole store's size, as AUTO makes
  // it for an unsharded store; device pointers are searched where the shards
  // live, each shard's lists gathered on the caller's device.
  const bool on_home = place.on_device ||
                       &rt_.pick(Op::search, slots * row_bytes_ * std::max<uint64_t>(nq, 1)) != &rt_.cpu() ||
                       home_ == &rt_.cpu();
  const uint64_t per = checked_mul(nq, k, "nq * k");
  const uint64_t lists = checked_mul(per, n, "nq * k * shards");
  // GPU shards: the backend may gather every shard's lists on the first
  // device and merge them there (always for device buffers; host calls where
  // it prefers that to a download and host merge per shard).
  const bool gpu = on_home && home_ != &rt_.cpu();
  // The shard threads wake while the gather is set up.
  if (gpu && workers_) workers_->nudge();
  std::unique_ptr<ShardGather> gather;
  if (gpu) {
    std::vector<Backend*> homes(n);
    for (size_t s = 0; s < n; ++s) homes[s] = shards_[s]->home_;
    Placement p = place;
    p.validate = place.validate && rt_.validate();
    gather = homes[0]->gather_shards(homes, p, metric_, queries, nq, dim_, k, out_ids, out_scores);
  }
  if (place.on_device && !gather) fail(Code::unsupported, "device-pointer search of a store sharded over host memory");
  std::vector<uint64_t> ids(gather ? 0 : lists);
  std::vector<float> scores(ids.size());
  // Shard s's search, on the caller's buffers (host) or its part of the
  // gather (device).
  auto search_shard = [&](size_t s, const RankOptions& r, uint64_t* host_ids, float* host_scores) {
    const uint64_t* allow_s = allow.empty() ? nullptr : allow[s].data();
    if (!gather) return shards_[s]->search_locked(queries, nq, k, allow_s, r, on_home, host_ids, host_scores);
    const ShardGather::Part p = gather->part(s);
    shards_[s]->search_locked(p.queries, nq, k, allow_s, r, true, p.ids, p.scores, p.place);
  };
  std::vector<char> busy(n, 1);
  // GPU shards search concurrently, each thread waiting only for its own
  // device; CPU shards take turns on the caller's thread, each with the whole
  // OpenMP team (threads of their own would only compete for the cores).
  RankOptions each = rank;
  std::vector<ActRanges> ranges;
  if (rank.act.on && rank.act.normalize) {
    // Min-max scaling is over the whole store's candidates: every shard
    // reports its ranges first, and all search with the combined ones.
    std::vector<std::vector<ActRanges>> part(n, std::vector<ActRanges>(nq));
    for_each_shard(workers_.get(), n, busy, gpu, [&](size_t s) {
      RankOptions first = rank;
      first.act.ranges_out = part[s].data();
      search_shard(s, first, nullptr, nullptr);
    });
    ranges = part[0];
    for (size_t s = 1; s < n; ++s)
      for (uint64_t q = 0; q < nq; ++q) {
        ActRanges& r = ranges[q];
        const ActRanges& p = part[s][q];
        if (p.candidates == 0) continue;
        if (r.candidates == 0) {
          r = p;
          continue;
        }
        r.rel_min = std::min(r.rel_min, p.rel_min);
        r.rel_max = std::max(r.rel_max, p.rel_max);
        r.t_min = std::min(r.t_min, p.t_min);
        r.t_max = std::max(r.t_max, p.t_max);
        r.imp_min = std::min(r.imp_min, p.imp_min);
        r.imp_max = std::max(r.imp_max, p.imp_max);
        r.candidates += p.candidates;
      }
    each.act.ranges = ranges.data();
  }
  for_each_shard(workers_.get(), n, busy, gpu, [&](size_t s) {
    search_shard(s, each, gather ? nullptr : ids.data() + s * per, gather ? nullptr : scores.data() + s * per);
  });
  if (gather) return gather->merge();
  topk_merge(metric_, n, nq, k, ids.data(), scores.data(), k, out_ids, out_scores);
}

}  // namespace mnemo
