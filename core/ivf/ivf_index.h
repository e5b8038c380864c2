// An inverted-file index on a store (store_index.cpp): the store's slots
// [0, hot_begin) are laid out list by list, list l = [offsets[l],
// offsets[l+1]), and slots [hot_begin, slots) are the hot tier, the
// memories written since the layout was made, scanned by every search.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "../backend.h"
#include "coarse.h"

namespace mnemo {

struct IndexOptions {
  uint32_t nlist = 0;     // 0: round(sqrt(count))
  uint32_t iters = 0;     // 0: kDefaultIters
  uint32_t per_list = 0;  // 0: kDefaultPerList
  uint64_t seed = 1;
  double hot_fraction = 0.25;
  uint64_t hot_min = 4096;
  double skew = 8.0;
  bool background = true;
};

constexpr uint32_t kDefaultIters = 10;
constexpr uint32_t kDefaultPerList = 256;
// Lists a layout may have: the journal carries the count in 23 bits.
constexpr uint32_t kMaxLists = (1u << 23) - 1;
constexpr uint32_t kHotList = 0xffffffffu;  // a memory of the hot tier

// A layout as it is journaled and saved: the centroids and each indexed
// memory's list (memories not named are in the hot tier).
struct IndexLayout {
  IndexOptions opts;
  uint32_t nlist = 0;
  std::vector<float> centroids;  // [nlist x dim]
  std::vector<uint64_t> ids;
  std::vector<uint32_t> lists;  // [ids.size()], each < nlist
};

struct IndexInfo {
  uint32_t nlist = 0;
  uint64_t indexed = 0, hot = 0, largest_list = 0, builds = 0;
  bool rebuilding = false;
  double last_build_seconds = 0;
};

// Walks over every list's bounds (IvfIndex::set_offsets) in this process:
// layouts and compactions make them, writes and probes read the kept longest
// list instead (tests/core/test_ivf_walks.cpp counts them).
inline std::atomic<uint64_t>& list_walks() {
  static std::atomic<uint64_t> n{0};
  return n;
}

// The index of one (unsharded) store or shard.
struct IvfIndex {
  IndexOptions opts;
  std::unique_ptr<Coarse> coarse;           // null when nlist = 0
  std::vector<uint64_t> offsets;            // [nlist + 1]; set through set_offsets
  uint64_t largest = 0;                     // slots of the longest list
  std::unique_ptr<DeviceCopy> dev_offsets;  // on the store's backend, or null
  uint32_t nlist() const { return static_cast<uint32_t>(offsets.size() - 1); }
  // The lists' bounds and their longest, which every write's rebuild check
  // and every GPU probe's grid read (so it is not recounted there).
  void set_offsets(std::vector<uint64_t> o) {
    offsets = std::move(o);
    list_walks().fetch_add(1, std::memory_order_relaxed);
    largest = 0;
    for (size_t l = 0; l + 1 < offsets.size(); ++l) largest = std::max(largest, offsets[l + 1] - offsets[l]);
  }
  uint64_t hot_begin() const { return offsets.back(); }
};

// The fixed-size options block of a journal record or snapshot section.
constexpr uint64_t kIndexOptionBytes = 48;
void encode_index_options(const IndexOptions& o, unsigned char* out);
// Throws corrupt for values no build could have made.
IndexOptions decode_index_options(const unsigned char* in);

}  // namespace mnemo
