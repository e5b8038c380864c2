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
    if (heap_.size() < k_) {
      push_new({key, id});
    } else if (better({key, id}, heap_.front())) {
      replace_worst({key, id});
    }
  }
  void merge(const TopK& other);
  // Whether k hits are held; then worst_key() is the key a candidate must
  // reach to enter.
  bool full() const { return heap_.size() >= k_; }
  float worst_key() const { return heap_.front().key; }
  // Best first; leaves the selector empty.
  std::vector<Hit> take_sorted();

 private:
  void push_new(Hit h);
  void replace_worst(Hit h);
  uint64_t k_;
  std::vector<Hit> heap_;  // heap whose front is the worst kept hit
};

}  // namespace mnemo
