// Scalar row kernels over the storage dtypes, accumulating in double so the
// CPU backend is the reference-grade implementation every other path is
// compared against.
#pragma once

#include <cmath>
#include <cstdint>

#include "../dtype.h"

namespace mnemo::cpu {

struct F32Elem {
  using type = float;
  static float get(const float* p, uint64_t i) { return p[i]; }
};
struct F16Elem {
  using type = uint16_t;
  static float get(const uint16_t* p, uint64_t i) { return f16_to_f32(p[i]); }
};
struct BF16Elem {
  using type = uint16_t;
  static float get(const uint16_t* p, uint64_t i) { return bf16_to_f32(p[i]); }
};

template <class E>
inline double dot_row(const float* q, const void* row, uint64_t dim) {
  const auto* x = static_cast<const typename E::type*>(row);
  double acc = 0.0;
  for (uint64_t i = 0; i < dim; ++i) acc += static_cast<double>(q[i]) * E::get(x, i);
  return acc;
}

template <class E>
inline double l2sq_row(const float* q, const void* row, uint64_t dim) {
  const auto* x = static_cast<const typename E::type*>(row);
  double acc = 0.0;
  for (uint64_t i = 0; i < dim; ++i) {
    const double d = static_cast<double>(q[i]) - E::get(x, i);
    acc += d * d;
  }
  return acc;
}

// Both operands of a storage type (pair scoring).
template <class E>
inline void pair_terms(const void* a, const void* b, uint64_t dim, double& dot, double& na, double& nb, double& l2) {
  const auto* x = static_cast<const typename E::type*>(a);
  const auto* y = static_cast<const typename E::type*>(b);
  double d = 0, sa = 0, sb = 0, s2 = 0;
  for (uint64_t i = 0; i < dim; ++i) {
    const double u = E::get(x, i), v = E::get(y, i);
    d += u * v;
    sa += u * u;
    sb += v * v;
    s2 += (u - v) * (u - v);
  }
  dot = d;
  na = std::sqrt(sa);
  nb = std::sqrt(sb);
  l2 = s2;
}

template <class E>
inline double norm_row(const void* row, uint64_t dim) {
  // Eight independent float64 sums: the compiler keeps them in vector
  // registers, where one running sum would wait on each add in turn (the
  // norms of a 1 GB store took a third of its open). Still a float64 sum of
  // exact float64 squares, so within the contract's bound; the store uses
  // this one function for every norm, so added and reopened rows agree.
  const auto* x = static_cast<const typename E::type*>(row);
  constexpr uint64_t kLanes = 8;
  double acc[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  uint64_t i = 0;
  for (; i + kLanes <= dim; i += kLanes)
    for (uint64_t j = 0; j < kLanes; ++j) {
      const double v = E::get(x, i + j);
      acc[j] += v * v;
    }
  for (; i < dim; ++i) {
    const double v = E::get(x, i);
    acc[i % kLanes] += v * v;
  }
  const double s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  return std::sqrt(s);
}

inline double norm_f32(const float* q, uint64_t dim) {
  double acc = 0.0;
  for (uint64_t i = 0; i < dim; ++i) acc += static_cast<double>(q[i]) * q[i];
  return std::sqrt(acc);
}

// Cosine with the zero-norm rule of the contract.
inline double cosine_of(double dot, double na, double nb) { return (na == 0.0 || nb == 0.0) ? 0.0 : dot / (na * nb); }

// Calls f.template operator()<E>() with the element type of a storage dtype.
template <class F>
inline decltype(auto) with_elem(DType t, F&& f) {
  switch (t) {
    case DType::f16: return f(F16Elem{});
    case DType::bf16: return f(BF16Elem{});
    default: return f(F32Elem{});
  }
}

// Row norm of any storage row (used by the store).
inline double row_norm(const void* row, DType t, uint64_t dim) {
  return with_elem(t, [&](auto e) { return norm_row<decltype(e)>(row, dim); });
}

}  // namespace mnemo::cpu
