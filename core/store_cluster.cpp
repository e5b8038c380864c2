// A store laid out by namespace (Store::cluster): each namespace's live
// memories, and those of the paths under it, become one run of slots
// (within each list of an index, and its hot tier), so that a search scoped
// to one reads a run of rows, as an unfiltered search of a store holding
// only them would (search_where's ranged plan).
#include <algorithm>

#include "store.h"

namespace mnemo {

void Store::cluster() {
  auto lock = write_lock();
  if (shards_.empty()) {
    cluster_locked();
  } else {
    for (auto& sh : shards_) sh->cluster_locked();
  }
  clustered_ = true;
}

void Store::cluster_locked() {
  const uint64_t S = slot_ids_.size();
  // The runs whose slots move only among themselves: the index's lists and
  // hot tier, or the whole store.
  std::vector<uint64_t> bounds = index_ ? index_->offsets : std::vector<uint64_t>{0};
  bounds.push_back(S);
  for (uint64_t& b : bounds) b = std::min(b, S);
  // A slot's key: its namespace's place among the paths (no namespace
  // first), then its slot (a stable order).
  const std::vector<uint32_t> place = tables_->namespaces.places();
  auto key_of_slot = [&](uint64_t s) -> uint32_t {
    const Record* r = s < recs_.size() ? recs_[s].get() : nullptr;
    return r && r->ns ? place[r->ns - 1] + 1 : 0;
  };
  std::vector<uint64_t> order;
  order.reserve(S - dead_);
  std::vector<uint64_t> nbounds(bounds.size());
  for (size_t b = 0; b + 1 < bounds.size(); ++b) {
    nbounds[b] = order.size();
    const size_t from = order.size();
    for (uint64_t s = bounds[b]; s < bounds[b + 1]; ++s)
      if (slot_ids_[s] != kNoId) order.push_back(s);
    std::vector<uint32_t> keys(order.size() - from);
    for (size_t i = from; i < order.size(); ++i) keys[i - from] = key_of_slot(order[i]);
    std::vector<uint32_t> idx(keys.size());
    for (uint32_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](uint32_t x, uint32_t y) { return keys[x] < keys[y]; });
    std::vector<uint64_t> run(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) run[i] = order[from + idx[i]];
    std::copy(run.begin(), run.end(), order.begin() + static_cast<std::ptrdiff_t>(from));
  }
  nbounds.back() = order.size();
  reorder_slots_locked(order);
  if (index_) {
    nbounds.pop_back();  // the store's end: not a bound of the index
    index_->set_offsets(std::move(nbounds));
    if (index_->dev_offsets)
      index_->dev_offsets = home_->copy_to_device(index_->offsets.data(), index_->offsets.size() * 8);
  }
}

}  // namespace mnemo
