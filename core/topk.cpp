#include "topk.h"

#include <algorithm>

namespace mnemo {

namespace {
// Heap order: the front is the hit that ranks last.
bool heap_less(const Hit& a, const Hit& b) { return better(a, b); }
}  // namespace

TopK::TopK(uint64_t k) : k_(k) {
  // Reserve lazily for huge k: the heap only grows with real candidates.
  heap_.reserve(static_cast<size_t>(std::min<uint64_t>(k, 4096)));
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
  std::vector<Hit> out;
  out.swap(heap_);
  std::sort(out.begin(), out.end(), better);
  return out;
}

}  // namespace mnemo
