// An independent reading of the store file format (described in
// core/store_file.cpp; version 1, version 2 whose header adds a u64 journal
// sequence number before its checksum, and version 3 with two more sections:
// last-access times f64 and importance f32): writes valid images, repairs
// checksums after a mutation, and decides whether an image is a valid store
// file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fz {

struct StoreImage {
  uint32_t version = 1;  // 1, 2 or 3
  uint64_t seq = 0;      // version 2 and later
  uint64_t dim = 1;
  int32_t dtype = 1, metric = 1;
  std::vector<uint64_t> ids;
  std::vector<unsigned char> vectors;  // [ids.size() x dim] of dtype
  std::vector<float> biases;
  // Version 3 sections; read from an older file as zeros.
  std::vector<double> times;
  std::vector<float> importance;
};

// The bytes of a valid file holding `s`.
std::string write_image(const StoreImage& s);
// Recomputes the header checksum and that of every section whose declared
// length fits in the image, so a mutation reaches the checks behind them.
void fix_checksums(std::string& bytes);
// True when `bytes` is a store file the format accepts (magic, version in
// [1, max_version],
// header size and checksum, dim in [1, 65536], known dtype and metric,
// sections 1..3 (1..5 from version 3) in order with zero reserved fields,
// exact sizes and checksums, nothing after them, ids unique and not
// MNEMO_NO_ID, every bias, time, importance and vector element finite); then
// *out holds its contents.
bool parse_image(const std::string& bytes, StoreImage* out, std::string* why, uint32_t max_version);

}  // namespace fz
