// Non-owning views of the caller's buffers, as the backends receive them.
#pragma once

#include <cstdint>

#include "dtype.h"

namespace mnemo {

constexpr uint64_t kNoId = UINT64_MAX;

// A dense row-major [rows x cols] matrix of a storage dtype.
struct MatrixView {
  const void* data = nullptr;
  DType dtype = DType::f32;
  uint64_t rows = 0;
  uint64_t cols = 0;
};

// What a backend sees of a store: slots in order, tombstones marked kNoId.
struct StoreView {
  const void* vectors = nullptr;  // [slots x dim] of dtype
  DType dtype = DType::f32;
  Metric metric = Metric::cosine;
  uint64_t dim = 0;
  uint64_t slots = 0;
  const uint64_t* ids = nullptr;      // [slots]
  const float* norms = nullptr;       // [slots] L2 norms of the stored vectors
  const float* biases = nullptr;      // [slots]
  const double* times = nullptr;      // [slots] last-access times (seconds)
  const float* importance = nullptr;  // [slots]
  int threads = 1;                    // host threads an update may use to stage rows
};

}  // namespace mnemo
