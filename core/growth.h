// Room for n elements with geometric growth. A plain reserve(n) allocates
// exactly n, so a store filled by many adds would copy everything it holds
// on every call; doubling keeps that amortised.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace mnemo {

template <class T, class A>
void reserve_geometric(std::vector<T, A>& v, size_t n) {
  if (n > v.capacity()) v.reserve(std::max(n, v.capacity() * 2));
}

}  // namespace mnemo
