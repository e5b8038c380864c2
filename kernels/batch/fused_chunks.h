// How the fused GEMM + selection kernels split the store among the blocks
// of a query tile.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "device/env_knob.h"

namespace mnemo::cuda {

// Chunks per query tile for kernels that run one block per SM: at least
// min_waves waves, then the count whose last wave is fullest, each chunk
// min_tiles tiles of tile_rows or more so the thresholds settle before most
// of its keys.
// MNEMO_CHUNK_TILES sets that least count of tiles (for measuring).
inline unsigned chunk_min_tiles(unsigned fallback) {
  static const unsigned forced = static_cast<unsigned>(env_positive("MNEMO_CHUNK_TILES", 0));
  return forced ? forced : fallback;
}

// fill_down: where the store is too small for min_waves waves of such
// chunks, the count of at most that many chunks whose last wave is fullest
// (larger counts first), not the most chunks: 100 queries over 1 GB of
// 3072 x f32 took 171 chunks of 4 tiles, two waves the second of them 30%
// full, 0.573 ms on an H200, against 0.452-0.467 in one wave of 132.
inline unsigned fused_chunk_count(unsigned qtiles, uint32_t slots, uint32_t tile_rows, unsigned sm_count,
                                  unsigned min_waves, unsigned min_tiles = 16, bool fill_down = false) {
  const uint32_t least = chunk_min_tiles(min_tiles) * tile_rows;
  const unsigned max_chunks = std::max(1u, (slots + least - 1) / least);
  const unsigned want = std::max(1u, (min_waves * sm_count + qtiles - 1) / qtiles);
  const bool down = fill_down && max_chunks < want;
  const unsigned first = down ? std::max(1u, max_chunks / 2) : std::min(max_chunks, want);
  unsigned best = first;
  double best_eff = 0.0;
  for (unsigned c = first; c <= std::min(max_chunks, 2 * first); ++c) {
    const double blocks = static_cast<double>(qtiles) * c;
    const double waves = std::ceil(blocks / sm_count);
    const double eff = blocks / (waves * sm_count);
    if (eff > best_eff + 1e-9 || (down && eff > best_eff - 1e-9)) best_eff = eff, best = c;
  }
  return best;
}

}  // namespace mnemo::cuda
