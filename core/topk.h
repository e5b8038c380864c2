// Bounded top-k selection with the library's total order: a larger key is
// better, equal keys go to the smaller id. Keys are "goodness" values (a
// similarity, or a negated distance); NaN keys are never kept.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace mnemo {

struct Hit {
  float key;
  uint64_t id;
};

// True when a ranks strictly before b.
inline bool better(const Hit& a, const Hit& b) { return a.key > b.key || (a.key == b.key && a.id < b.id); }

class TopK {
 public:
  explicit TopK(uint64_t k);

  // Offers one candidate; cheap rejection once full.
  inline void push(float key, uint64_t id) {
    if (std::isnan(key)) return;
    if (buffered_) {
      // Long lists: candidates at or above the bound are appended, and a
      // selection keeps the k best when the buffer holds twice that. A heap
      // of 1000 cost about 0.1-0.2 us an entry, each a chain of cache
      // misses down its levels.
      if (full_ && key < bound_) return;
      heap_.push_back({key, id});
      if (heap_.size() >= 2 * k_ + 64) compact();
      return;
    }
    if (heap_.size() < k_) {
      push_new({key, id});
    } else if (better({key, id}, heap_.front())) {
      replace_worst({key, id});
    }
  }
  void merge(const TopK& other);
  // Whether k hits are held; then worst_key() is the key a candidate must
  // reach to enter (for long lists: the k-th best key at the last
  // selection, which only rises, so a key below it never enters).
  bool full() const { return buffered_ ? full_ : heap_.size() >= k_; }
  float worst_key() const { return buffered_ ? bound_ : heap_.front().key; }
  // Best first; leaves the selector empty.
  std::vector<Hit> take_sorted();

  // Lists at least this long are kept as a buffer and a selection.
  static constexpr uint64_t kBufferedMin = 64;

 private:
  void push_new(Hit h);
  void replace_worst(Hit h);
  void compact();
  uint64_t k_;
  bool buffered_ = false;
  bool full_ = false;
  float bound_ = 0.0f;
  std::vector<Hit> heap_;  // heap whose front is the worst kept hit; the buffer for long lists
};

}  // namespace mnemo
