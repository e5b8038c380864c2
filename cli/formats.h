// Vector files: .fvecs .ivecs .bvecs (TexMex), .fbin .ibin (big-ann), .npy
// (f32 or f16, two dimensions). Readers check every size against the file
// and throw cli::Error naming the file and what is wrong; they never read
// past what the file holds.
#pragma once

#include <cstdint>
#include <string>

#include "common.h"

namespace cli {

struct FloatRows {  // [rows x dim] f32, aligned for mnemo
  uint64_t rows = 0, dim = 0;
  AVec<float> v;
  const float* row(uint64_t i) const { return v.data() + i * dim; }
};

struct IntRows {  // [rows x dim] int32 (ground truth, neighbour lists)
  uint64_t rows = 0, dim = 0;
  std::vector<int32_t> v;
  const int32_t* row(uint64_t i) const { return v.data() + i * dim; }
};

// By extension: .fvecs .bvecs .fbin .npy (u8 and f16 widened to f32).
FloatRows read_vectors(const std::string& path);
// By extension: .ivecs .ibin.
IntRows read_ints(const std::string& path);

// Per format (also used by the tests).
FloatRows read_fvecs(const std::string& path);
FloatRows read_bvecs(const std::string& path);
IntRows read_ivecs(const std::string& path);
FloatRows read_fbin(const std::string& path);
IntRows read_ibin(const std::string& path);
FloatRows read_npy(const std::string& path);

void write_fvecs(const std::string& path, const FloatRows& m);
void write_ivecs(const std::string& path, const IntRows& m);

// Largest dimension accepted from a file (mnemo's own limit).
constexpr uint64_t kMaxFileDim = 65536;

}  // namespace cli
