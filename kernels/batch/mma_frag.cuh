// Warp-level tensor-core pieces shared by the fused GEMM kernels: the
// ldmatrix fragment load and one mma.sync k-step per storage dtype (TF32
// over f32 rows, FP16/BF16 over 16-bit rows). A k-step covers 32 bytes of
// each row in both cases, so one ldmatrix.x4 gives one A fragment.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace mnemo::cuda {

// Four 8x8 matrices of 16-bit pairs (also 8 rows x 4 words of TF32):
// thread l gets word l % 4 of row l / 4 of each.
__device__ __forceinline__ void ldsm4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
// Two such matrices (lanes 0-15 give the row addresses).
__device__ __forceinline__ void ldsm2(uint32_t& r0, uint32_t& r1, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}
// One k-step of a 16 x 8 tile: a[4] and b[2] are 32-bit fragment registers
// (the PTX m16n8k8 tf32 / m16n8k16 16-bit layouts); frag() turns a loaded
// word into an operand (rounding to TF32 for f32).
template <class T>
struct Mma;
template <>
struct Mma<float> {
  __device__ __forceinline__ static uint32_t frag(uint32_t w) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(w)));
    return r;
  }
  __device__ __forceinline__ static void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
// w as a TF32 value and the TF32 value of what is left (w ~ hi + lo to
// about 2^-22 of w).
__device__ __forceinline__ void split_tf32(uint32_t w, uint32_t& hi, uint32_t& lo) {
  hi = Mma<float>::frag(w);
  lo = Mma<float>::frag(__float_as_uint(__uint_as_float(w) - __uint_as_float(hi)));
}
template <>
struct Mma<__half> {
  __device__ __forceinline__ static uint32_t frag(uint32_t w) { return w; }
  __device__ __forceinline__ static void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <>
struct Mma<__nv_bfloat16> {
  __device__ __forceinline__ static uint32_t frag(uint32_t w) { return w; }
  __device__ __forceinline__ static void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

}  // namespace mnemo::cuda
