#include "device/host_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace mnemo::cuda {

void copy_rows(void* dst, const void* src, size_t rows, size_t row_bytes, int threads, size_t per_thread) {
  const size_t bytes = rows * row_bytes;
  // Below a few MB a thread team costs more than it saves (unless a copy
  // is on a latency path, which passes a smaller share).
  const int team = static_cast<int>(std::max<size_t>(1, std::min<size_t>(threads, bytes / per_thread)));
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
#pragma omp parallel for schedule(static) num_threads(team) if (team > 1)
  for (int t = 0; t < team; ++t) {
    const size_t lo = bytes * static_cast<size_t>(t) / team, hi = bytes * static_cast<size_t>(t + 1) / team;
    std::memcpy(d + lo, s + lo, hi - lo);
  }
}

}  // namespace mnemo::cuda
