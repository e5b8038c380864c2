// 16-byte loads of stored rows, widened to f32. One "vector" is 16 bytes:
// 4 f32 or 8 f16/bf16 elements.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace mnemo::cuda {

template <class T>
struct Vec16;

template <>
struct Vec16<float> {
  static constexpr int kElems = 4;
  __device__ __forceinline__ static void load(const void* p, float (&x)[4]) {
    const float4 v = __ldg(static_cast<const float4*>(p));
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
  }
  // The same from shared memory.
  __device__ __forceinline__ static void load_shared(const void* p, float (&x)[4]) {
    const float4 v = *static_cast<const float4*>(p);
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
  }
  // From raw bits already loaded.
  __device__ __forceinline__ static void widen(const uint4 v, float (&x)[4]) {
    x[0] = __uint_as_float(v.x), x[1] = __uint_as_float(v.y), x[2] = __uint_as_float(v.z), x[3] = __uint_as_float(v.w);
  }
};

template <>
struct Vec16<__half> {
  static constexpr int kElems = 8;
  __device__ __forceinline__ static void load(const void* p, float (&x)[8]) {
    widen(__ldg(static_cast<const uint4*>(p)), x);
  }
  __device__ __forceinline__ static void load_shared(const void* p, float (&x)[8]) {
    widen(*static_cast<const uint4*>(p), x);
  }
  __device__ __forceinline__ static void widen(const uint4 v, float (&x)[8]) {
    const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      x[2 * i] = f.x, x[2 * i + 1] = f.y;
    }
  }
};

template <>
struct Vec16<__nv_bfloat16> {
  static constexpr int kElems = 8;
  __device__ __forceinline__ static void load(const void* p, float (&x)[8]) {
    widen(__ldg(static_cast<const uint4*>(p)), x);
  }
  __device__ __forceinline__ static void load_shared(const void* p, float (&x)[8]) {
    widen(*static_cast<const uint4*>(p), x);
  }
  __device__ __forceinline__ static void widen(const uint4 v, float (&x)[8]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // bf16 -> f32 is a shift: exact and cheaper than the intrinsic pair.
      x[2 * i] = __uint_as_float(w[i] << 16);
      x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
};

template <class T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float to_f32<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

}  // namespace mnemo::cuda
