// The map from a memory's id to its slot: open addressing with linear
// probing over one array of (id, slot) pairs. A store's adds, removes and
// lookups go through it once per id; std::unordered_map paid a node
// allocation, a pointer chase and a rehash of every node on growth, which
// was the largest host cost of adding rows in bulk. Ids are any value but
// kNoId, which marks an empty cell. Inserts allocate only when the map
// grows, so after reserve(n) up to n entries go in without allocating.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace mnemo {

class IdMap {
 public:
  struct Entry {
    uint64_t first;   // the id; kEmpty when the cell is free
    uint64_t second;  // the slot
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  IdMap() = default;
  IdMap(IdMap&& o) noexcept { swap(o); }
  IdMap& operator=(IdMap&& o) noexcept {
    IdMap t(std::move(o));
    swap(t);
    return *this;
  }
  IdMap(const IdMap&) = delete;
  IdMap& operator=(const IdMap&) = delete;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cells_ ? mask_ + 1 : 0; }
  size_t memory_bytes() const { return cells_ ? (mask_ + 1) * sizeof(Entry) : 0; }

  // Room for n entries without growing (may throw std::bad_alloc; the map
  // is unchanged then).
  void reserve(size_t n) {
    if (n <= limit_) return;
    size_t cap = 16;
    while (cap - cap / 4 < n) cap *= 2;  // at most 3/4 full
    rehash(cap);
  }

  Entry* end() { return nullptr; }
  const Entry* end() const { return nullptr; }
  Entry* find(uint64_t id) { return const_cast<Entry*>(static_cast<const IdMap*>(this)->find(id)); }
  const Entry* find(uint64_t id) const {
    if (size_ == 0 || id == kEmpty) return nullptr;
    for (size_t i = home(id);; i = (i + 1) & mask_) {
      if (cells_[i].first == id) return &cells_[i];
      if (cells_[i].first == kEmpty) return nullptr;
    }
  }
  size_t count(uint64_t id) const { return find(id) ? 1 : 0; }
  // Starts loading id's home cell: a loop over many ids prefetches a few
  // ahead, so the cache misses of a large map overlap.
  void prefetch(uint64_t id) const {
    if (cells_) __builtin_prefetch(&cells_[home(id)]);
  }
  const uint64_t& at(uint64_t id) const { return find(id)->second; }

  // Inserts (id, slot) unless id is present; the entry and whether it was
  // inserted. id must not be kEmpty (callers refuse kNoId first).
  std::pair<Entry*, bool> try_emplace(uint64_t id, uint64_t slot) {
    if (size_ + 1 > limit_) reserve(size_ + 1 > 2 * size_ ? size_ + 1 : 2 * size_);
    size_t i = home(id);
    for (; cells_[i].first != kEmpty; i = (i + 1) & mask_)
      if (cells_[i].first == id) return {&cells_[i], false};
    cells_[i] = {id, slot};
    ++size_;
    return {&cells_[i], true};
  }
  std::pair<Entry*, bool> emplace(uint64_t id, uint64_t slot) { return try_emplace(id, slot); }
  uint64_t& operator[](uint64_t id) { return try_emplace(id, 0).first->second; }

  size_t erase(uint64_t id) {
    Entry* e = find(id);
    if (!e) return 0;
    erase(e);
    return 1;
  }
  // Removes the entry at e, moving later entries of its probe run back so
  // that no lookup passes an empty cell before its id (no tombstones).
  void erase(Entry* e) {
    size_t hole = static_cast<size_t>(e - cells_.get());
    for (size_t i = (hole + 1) & mask_; cells_[i].first != kEmpty; i = (i + 1) & mask_) {
      const size_t h = home(cells_[i].first);
      // Entry i may fill the hole when its home is not in (hole, i].
      if (((i - h) & mask_) >= ((i - hole) & mask_)) {
        cells_[hole] = cells_[i];
        hole = i;
      }
    }
    cells_[hole].first = kEmpty;
    --size_;
  }

  void clear() {
    for (size_t i = 0; cells_ && i <= mask_; ++i) cells_[i].first = kEmpty;
    size_ = 0;
  }
  void swap(IdMap& o) noexcept {
    std::swap(cells_, o.cells_);
    std::swap(mask_, o.mask_);
    std::swap(size_, o.size_);
    std::swap(limit_, o.limit_);
  }

  // The 64-bit mixer (the finaliser of splitmix64) whose low bits pick an
  // id's home cell: sequential ids spread over the array, and so do ids a
  // caller picked with patterns.
  static uint64_t mix(uint64_t id) {
    id ^= id >> 30;
    id *= 0xbf58476d1ce4e5b9ULL;
    id ^= id >> 27;
    id *= 0x94d049bb133111ebULL;
    return id ^ (id >> 31);
  }

 private:
  size_t home(uint64_t id) const { return static_cast<size_t>(mix(id)) & mask_; }
  void rehash(size_t cap) {
    std::unique_ptr<Entry[]> cells(new Entry[cap]);
    for (size_t i = 0; i < cap; ++i) cells[i].first = kEmpty;
    IdMap n;
    n.cells_ = std::move(cells);
    n.mask_ = cap - 1;
    n.limit_ = cap - cap / 4;
    for (size_t i = 0; cells_ && i <= mask_; ++i)
      if (cells_[i].first != kEmpty) n.insert_new(cells_[i].first, cells_[i].second);
    n.size_ = size_;
    swap(n);
  }
  void insert_new(uint64_t id, uint64_t slot) {
    size_t i = home(id);
    while (cells_[i].first != kEmpty) i = (i + 1) & mask_;
    cells_[i] = {id, slot};
  }

  std::unique_ptr<Entry[]> cells_;
  size_t mask_ = 0;  // capacity - 1 (capacity a power of two)
  size_t size_ = 0;
  size_t limit_ = 0;  // entries allowed before growing
};

}  // namespace mnemo
