// An independent reading of the store file format (described in
// core/store_file.cpp): version 1, version 2 whose header adds a u64 journal
// sequence number before its checksum, version 3 with two more sections
// (last-access times f64 and importance f32), version 4 with an index section
// after them, and version 5, whose header adds u32 flags (bit 0: an index
// section follows) and a zero u32, and whose fields section (tag 7) follows
// the first five: writes valid images, repairs checksums after a mutation,
// and decides whether an image is a valid store file.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "store_fields_model.h"

namespace fz {

// The index section: its list count, options block, centroids and each
// memory's list (0xffffffff: the hot tier).
struct IndexImage {
  uint32_t nlist = 0;
  uint32_t zero = 0;
  std::string options;  // 48 bytes
  std::vector<float> centroids;
  std::vector<uint32_t> lists;
};

struct StoreImage {
  uint32_t version = 1;  // 1 to 5
  uint64_t seq = 0;      // version 2 and later
  uint64_t dim = 1;
  int32_t dtype = 1, metric = 1;
  std::vector<uint64_t> ids;
  std::vector<unsigned char> vectors;  // [ids.size() x dim] of dtype
  std::vector<float> biases;
  // Version 3 sections; read from an older file as zeros.
  std::vector<double> times;
  std::vector<float> importance;
  // Version 5: the fields section's entries in file order (an id and the
  // memory's fields as written).
  std::vector<std::pair<uint64_t, fm::Write>> fields;
  // Version 4 always, version 5 with flag 1.
  bool has_index = false;
  IndexImage index;
};

// An options block a build could have made (nlist, iters, per_list,
// background 0 or 1, seed, hot_fraction > 0, hot_min, skew > 0).
std::string index_options(uint32_t nlist, uint32_t iters, uint32_t per_list, uint32_t background, uint64_t seed,
                          double hot_fraction, uint64_t hot_min, double skew);

// The bytes of a valid file holding `s`.
std::string write_image(const StoreImage& s);
// Recomputes the header checksum and that of every section whose declared
// length fits in the image, so a mutation reaches the checks behind them.
void fix_checksums(std::string& bytes);
// True when `bytes` is a store file the format accepts (magic, version in
// [1, max_version], header size and checksum, version 5's flags, dim in
// [1, 65536], known dtype and metric, the sections of the version in order
// with zero reserved fields, exact sizes and checksums, nothing after them,
// ids unique and not MNEMO_NO_ID, every bias, time, importance and vector
// element finite; fields entries each of a memory of the file, at most one
// a memory, bytes a reader accepts (fields_image.h) naming exactly the
// fields they hold, keys unique; an index of at most 2^23 - 1 lists with
// options a build could make, finite centroids and lists below nlist or the
// hot tier); then *out holds its contents.
bool parse_image(const std::string& bytes, StoreImage* out, std::string* why, uint32_t max_version);

}  // namespace fz
