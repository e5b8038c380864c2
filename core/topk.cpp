#include "topk.h"

#include <algorithm>

namespace mnemo {

namespace {
// Heap order: the front is the hit that ranks last.
bool heap_less(const Hit& a, const Hit& b) { return better(a, b); }
}  // namespace

TopK::TopK(uint64_t k) : k_(k), buffered_(k >= kBufferedMin) {
  // Reserve lazily for huge k: the heap only grows with real candidates.
  heap_.reserve(static_cast<size_t>(std::min<uint64_t>(buffered_ ? 2 * k + 64 : k, 4096)));
}

void TopK::compact() {
  // The k best to the front (nth_element with the total order), the rest
  // dropped; their worst key is the new bound (k entries reach it).
  std::nth_element(heap_.begin(), heap_.begin() + static_cast<std::ptrdiff_t>(k_ - 1), heap_.end(), better);
  heap_.resize(static_cast<size_t>(k_));
  bound_ = heap_[static_cast<size_t>(k_ - 1)].key;
  full_ = true;
}

void TopK::push_new(Hit h) {
  heap_.push_back(h);
  std::push_heap(heap_.begin(), heap_.end(), heap_less);
}

void TopK::replace_worst(Hit h) {
  std::pop_heap(heap_.begin(), heap_.end(), heap_less);
  heap_.back() = h;
  std::push_heap(heap_.begin(), heap_.end(), heap_less);
}

void TopK::merge(const TopK& other) {
  for (const Hit& h : other.heap_) push(h.key, h.id);
}

std::vector<Hit> TopK::take_sorted() {
  if (buffered_ && heap_.size() > k_) compact();
  std::vector<Hit> out;
  out.swap(heap_);
  full_ = false;
  std::sort(out.begin(), out.end(), better);
  return out;
}

}  // namespace mnemo
