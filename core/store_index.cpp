// The inverted-file index of a store. A layout is computed without holding
// the store (the read lock is taken in short pieces to copy a training
// sample and each chunk of rows to assign), so searches and writes go on
// meanwhile; ids written in that time are noted and stay in the hot tier.
// The layout is then applied under the write lock: the slots are rewritten
// list by list (live memories only, so it also compacts), the hot tier last.
// A sharded store trains one set of centroids over all its shards and each
// shard lays its own memories out by it, so a snapshot or journal record
// holds one layout whatever the sharding.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include "checked.h"
#include "error.h"
#include "store.h"

namespace mnemo {

void encode_index_options(const IndexOptions& o, unsigned char* out) {
  std::memset(out, 0, kIndexOptionBytes);
  const uint32_t u[4] = {o.nlist, o.iters, o.per_list, o.background ? 1u : 0u};
  std::memcpy(out, u, 16);
  std::memcpy(out + 16, &o.seed, 8);
  std::memcpy(out + 24, &o.hot_fraction, 8);
  std::memcpy(out + 32, &o.hot_min, 8);
  std::memcpy(out + 40, &o.skew, 8);
}

IndexOptions decode_index_options(const unsigned char* in) {
  IndexOptions o;
  uint32_t u[4];
  std::memcpy(u, in, 16);
  o.nlist = u[0], o.iters = u[1], o.per_list = u[2];
  std::memcpy(&o.seed, in + 16, 8);
  std::memcpy(&o.hot_fraction, in + 24, 8);
  std::memcpy(&o.hot_min, in + 32, 8);
  std::memcpy(&o.skew, in + 40, 8);
  if (u[3] > 1 || !(o.hot_fraction > 0) || !(o.skew > 0) || o.nlist > kMaxLists)
    fail(Code::corrupt, "an index's options hold values no build could have made");
  o.background = u[3] == 1;
  return o;
}

namespace {

constexpr uint64_t kAssignChunk = 16384;

uint32_t pick_nlist(const IndexOptions& o, uint64_t live) {
  if (live == 0) return 0;
  const uint64_t want = o.nlist ? o.nlist : static_cast<uint64_t>(std::llround(std::sqrt(double(live))));
  return static_cast<uint32_t>(std::clamp<uint64_t>(want, 1, std::min<uint64_t>(live, kMaxLists)));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

IndexLayout Store::compute_layout(const IndexOptions& o, bool take_locks) {
  IndexLayout L;
  L.opts = o;
  std::vector<Store*> parts;
  if (shards_.empty())
    parts.push_back(this);
  else
    for (auto& sh : shards_) parts.push_back(sh.get());
  auto lock_if = [&] {
    std::shared_lock<std::shared_mutex> lk;
    if (take_locks) lk = read_lock();
    return lk;
  };
  // 1. A training sample of the live memories, as f32.
  std::vector<float> sample;
  uint64_t m = 0;
  {
    auto lk = lock_if();
    std::vector<std::pair<uint32_t, uint64_t>> live;
    for (uint32_t p = 0; p < parts.size(); ++p)
      for (uint64_t s = 0; s < parts[p]->slot_ids_.size(); ++s)
        if (parts[p]->slot_ids_[s] != kNoId) live.emplace_back(p, s);
    L.nlist = pick_nlist(o, live.size());
    if (L.nlist == 0) return L;
    const uint64_t per = o.per_list ? o.per_list : kDefaultPerList;
    m = std::min<uint64_t>(live.size(), checked_mul(L.nlist, per, "training sample"));
    std::mt19937_64 rng(o.seed ^ 0x5ca1ab1eull);
    for (uint64_t i = 0; i < m; ++i) std::swap(live[i], live[i + rng() % (live.size() - i)]);
    sample.resize(checked_bytes(checked_mul(m, dim_, 4, "training sample"), "training sample") / 4);
    // Rows holding a non-finite value (written with validation off) stay
    // out of the training: one would make its centroid non-finite, which a
    // later open refuses as damage.
    uint64_t kept = 0;
    for (uint64_t i = 0; i < m; ++i) {
      const Store& p = *parts[live[i].first];
      float* row = sample.data() + kept * dim_;
      convert(p.vectors_.data() + live[i].second * row_bytes_, dtype_, row, DType::f32, dim_);
      if (std::all_of(row, row + dim_, [](float v) { return std::isfinite(v); })) ++kept;
    }
    m = kept;
    L.nlist = static_cast<uint32_t>(std::min<uint64_t>(L.nlist, m));
    if (L.nlist == 0) return L;
  }
  // 2. Centroids, trained on the backend the (first) part lives in.
  Backend& be = *parts[0]->home_;
  L.centroids = train_kmeans(be, sample.data(), m, dim_, L.nlist, o.iters ? o.iters : kDefaultIters, o.seed, metric_,
                             rt_.threads());
  sample = {};
  // 3. Every live memory's list, a chunk of slots at a time.
  const Coarse coarse(be, dim_, metric_, L.centroids);
  std::vector<float> rows;
  std::vector<uint32_t> lists;
  for (Store* p : parts) {
    for (uint64_t c = 0;; c += kAssignChunk) {
      uint64_t n = 0;
      {
        auto lk = lock_if();
        if (c >= p->slot_ids_.size()) break;
        const uint64_t hi = std::min<uint64_t>(p->slot_ids_.size(), c + kAssignChunk);
        rows.resize((hi - c) * dim_);
        for (uint64_t s = c; s < hi; ++s) {
          if (p->slot_ids_[s] == kNoId) continue;
          convert(p->vectors_.data() + s * row_bytes_, dtype_, rows.data() + n * dim_, DType::f32, dim_);
          L.ids.push_back(p->slot_ids_[s]);
          ++n;
        }
      }
      lists.resize(n);
      coarse.assign(rows.data(), n, lists.data(), rt_.threads());
      L.lists.insert(L.lists.end(), lists.begin(), lists.end());
    }
  }
  return L;
}

void Store::relayout_locked(const IndexLayout& L, const std::unordered_map<uint64_t, uint32_t>& list_of) {
  const uint64_t S = slot_ids_.size();
  const uint32_t nlist = L.nlist;
  std::vector<uint32_t> lst(S, kHotList);
  std::vector<uint64_t> pos(uint64_t{nlist} + 2, 0);
  for (uint64_t s = 0; s < S; ++s) {
    if (slot_ids_[s] == kNoId) continue;
    auto it = list_of.find(slot_ids_[s]);
    const uint32_t l = it == list_of.end() ? nlist : it->second;
    lst[s] = l;
    ++pos[uint64_t{l} + 1];
  }
  for (uint64_t l = 1; l < pos.size(); ++l) pos[l] += pos[l - 1];
  const uint64_t live = pos.back();
  auto index = std::make_unique<IvfIndex>();
  index->opts = L.opts;
  index->set_offsets({pos.begin(), pos.end() - 1});  // [nlist + 1], the last = hot_begin
  // The index is made before the store changes; reorder_slots_locked
  // allocates its own arrays before it does.
  if (nlist > 0) {
    index->coarse = std::make_unique<Coarse>(*home_, dim_, metric_, L.centroids);
    index->dev_offsets = home_->copy_to_device(index->offsets.data(), index->offsets.size() * 8);
  }
  std::vector<uint64_t> order(live);
  for (uint64_t s = 0; s < S; ++s)
    if (lst[s] != kHotList) order[pos[lst[s]]++] = s;
  reorder_slots_locked(order);
  index_ = std::move(index);
}

void Store::apply_layout_locked(const IndexLayout& L, bool journal) {
  if (journal && journal_) {
    std::vector<unsigned char> opts(kIndexOptionBytes);
    encode_index_options(L.opts, opts.data());
    journal_->append(JournalOp::index_layout, L.ids.size(), DType::f32, L.nlist, L.ids.data(),
                     {{L.lists.data(), L.lists.size() * 4},
                      {opts.data(), opts.size()},
                      {L.centroids.data(), L.centroids.size() * 4}});
  }
  std::unordered_map<uint64_t, uint32_t> list_of;
  list_of.reserve(L.ids.size());
  for (uint64_t i = 0; i < L.ids.size(); ++i)
    if (!dirty_.count(L.ids[i]) && L.lists[i] < L.nlist) list_of.emplace(L.ids[i], L.lists[i]);
  if (shards_.empty())
    relayout_locked(L, list_of);
  else
    for (auto& sh : shards_) sh->relayout_locked(L, list_of);
  index_opts_ = L.opts;
  indexed_ = true;
  stop_tracking_locked();
}

void Store::commit_layout_locked(const IndexLayout& L, std::chrono::steady_clock::time_point t0) {
  apply_layout_locked(L, true);
  ++index_builds_;
  index_seconds_ = seconds_since(t0);
}

void Store::stop_tracking_locked() {
  track_dirty_ = false;
  dirty_.clear();
}

void Store::adopt_layout(const IndexLayout& l) {
  auto lock = write_lock();
  apply_layout_locked(l, false);
}

void Store::drop_index_locked(bool journal) {
  if (!indexed_) return;
  const uint64_t none = 0;
  if (journal && journal_) journal_->append(JournalOp::index_drop, 0, DType::f32, &none, &none, 0);
  index_.reset();
  for (auto& sh : shards_) sh->index_.reset();
  indexed_ = false;
}

void Store::build_with_locks(const IndexOptions& o, bool rebuild) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    IndexLayout L = compute_layout(o, true);
    auto lock = write_lock();
    // A rebuild whose index was dropped, or rebuilt by a build_index,
    // meanwhile has nothing to do.
    if (!rebuild || (indexed_ && track_dirty_)) commit_layout_locked(L, t0);
  } catch (...) {
    auto lock = write_lock();
    stop_tracking_locked();
    throw;
  }
}

void Store::build_index(const IndexOptions& o) {
  {
    std::lock_guard<std::mutex> g(rebuild_mu_);
    if (rebuild_.joinable()) rebuild_.join();
    rebuild_error_ = nullptr;
  }
  std::lock_guard<std::mutex> b(build_mu_);
  {
    auto lock = write_lock();
    track_dirty_ = true;
    dirty_.clear();
  }
  build_with_locks(o, false);
}

void Store::drop_index() {
  {
    std::lock_guard<std::mutex> g(rebuild_mu_);
    if (rebuild_.joinable()) rebuild_.join();
  }
  std::lock_guard<std::mutex> b(build_mu_);
  auto lock = write_lock();
  drop_index_locked(true);
}

void Store::wait_index() {
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> g(rebuild_mu_);
    if (rebuild_.joinable()) rebuild_.join();
    e = rebuild_error_;
    rebuild_error_ = nullptr;
  }
  if (e) std::rethrow_exception(e);
}

void Store::index_counts(IndexInfo& info) const {
  const uint64_t S = slot_ids_.size();
  if (!index_) return;
  info.nlist = std::max(info.nlist, index_->nlist());  // shards share the centroids
  const uint64_t hb = std::min(index_->hot_begin(), S);
  for (uint64_t s = 0; s < S; ++s)
    if (slot_ids_[s] != kNoId) ++(s < hb ? info.indexed : info.hot);
  info.largest_list = std::max(info.largest_list, index_->largest);
}

IndexInfo Store::index_info() const {
  auto lock = read_lock();
  IndexInfo info;
  if (!indexed_) return info;
  if (shards_.empty())
    index_counts(info);
  else
    for (const auto& sh : shards_) sh->index_counts(info);
  info.builds = index_builds_;
  info.rebuilding = rebuilding_.load();
  info.last_build_seconds = index_seconds_;
  return info;
}

IndexLayout Store::layout_locked() const {
  IndexLayout L;
  if (!indexed_) return L;
  L.opts = index_opts_;
  std::vector<const Store*> parts;
  if (shards_.empty())
    parts.push_back(this);
  else
    for (const auto& sh : shards_) parts.push_back(sh.get());
  for (const Store* p : parts) {
    if (!p->index_ || !p->index_->coarse) continue;
    L.nlist = p->index_->nlist();
    L.centroids = p->index_->coarse->centroids();
    const auto& off = p->index_->offsets;
    for (uint32_t l = 0; l < L.nlist; ++l)
      for (uint64_t s = off[l]; s < off[l + 1] && s < p->slot_ids_.size(); ++s)
        if (p->slot_ids_[s] != kNoId) L.ids.push_back(p->slot_ids_[s]), L.lists.push_back(l);
  }
  return L;
}

bool Store::index_bound_passed() const {
  if (!indexed_) return false;
  uint64_t hot = 0, indexed = 0, largest = 0, nlist = 0;
  auto count = [&](const Store& p) {
    if (!p.index_) return;
    const uint64_t hb = std::min<uint64_t>(p.index_->hot_begin(), p.slot_ids_.size());
    hot += p.slot_ids_.size() - hb;
    indexed += hb;
    nlist += p.index_->nlist();
    largest = std::max(largest, p.index_->largest);
  };
  if (shards_.empty())
    count(*this);
  else
    for (const auto& sh : shards_) count(*sh);
  const IndexOptions& o = index_opts_;
  if (double(hot) > std::max(double(o.hot_min), o.hot_fraction * double(indexed))) return true;
  return nlist > 1 && indexed > 0 && double(largest) > o.skew * double(indexed) / double(nlist) &&
         largest > o.hot_min / 4;
}

void Store::maybe_rebuild_locked() {
  // Not while a layout is being computed (its noted ids must stay noted).
  if (track_dirty_ || !index_bound_passed() || rebuilding_.load()) return;
  if (!index_opts_.background) {
    // Inside the write, unless a build is under way (it lays out next).
    std::unique_lock<std::mutex> b(build_mu_, std::try_to_lock);
    if (!b.owns_lock()) return;
    const auto t0 = std::chrono::steady_clock::now();
    commit_layout_locked(compute_layout(index_opts_, false), t0);
    return;
  }
  std::unique_lock<std::mutex> g(rebuild_mu_, std::try_to_lock);
  if (!g.owns_lock()) return;                // a build is waiting for the last rebuild
  if (rebuild_.joinable()) rebuild_.join();  // finished: rebuilding_ was false
  rebuilding_ = true;
  track_dirty_ = true;
  dirty_.clear();
  rebuild_ = std::thread(&Store::run_rebuild, this, index_opts_);
}

void Store::run_rebuild(IndexOptions o) {
  try {
    std::lock_guard<std::mutex> b(build_mu_);
    build_with_locks(o, true);
  } catch (...) {
    rebuild_error_ = std::current_exception();
  }
  rebuilding_ = false;
}

}  // namespace mnemo
