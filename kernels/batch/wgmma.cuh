// Warpgroup MMA pieces (sm_90a): shared-memory matrix descriptors over
// 128-byte-swizzled K-major tiles (as the tensor copies lay them out) and
// asynchronous m64 MMAs a k-step of 32 bytes: m64 x n56 with both operands
// in shared memory (the fused wide-row kernel), m64 x n64 with A in
// registers (the short-row kernel over f32 rows). Compiled only where the
// architecture-specific features are (MNEMO_WGMMA); elsewhere the
// warp-level MMAs of mma_frag.cuh serve.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MNEMO_WGMMA 1
#else
#define MNEMO_WGMMA 0
#endif

namespace mnemo::cuda {

// Descriptor of a K-major operand at shared address addr: rows of 128
// bytes, 128-byte swizzle, 8-row groups 1024 bytes apart. The tile's base
// must be 1024-byte aligned; addr may sit 32 * j bytes past it (k-step j),
// as the unit applies the swizzle to the final address.
__device__ __forceinline__ uint64_t wg_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3ffffu) >> 4) | (1ull << 16) | (static_cast<uint64_t>(1024 >> 4) << 32) |
         (1ull << 62);
}

// Orders this thread's register accesses before the warpgroup's MMAs.
__device__ __forceinline__ void wg_fence() {
#if MNEMO_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if MNEMO_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups are in flight.
template <int N>
__device__ __forceinline__ void wg_wait() {
#if MNEMO_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving accesses of an accumulator across the
// asynchronous MMAs that write it.
template <int N>
__device__ __forceinline__ void wg_pin(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define MNEMO_WG_D28                                                                                           \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27}"
#define MNEMO_WG_OUT28(d)                                                                                     \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),  \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27])

// d (64 x 56, f32) += A (64 rows x one k-step) . B (56 rows x the same
// k-step)^T, both K-major in shared memory. Thread (warp w of the group,
// lane g * 4 + t) holds d[4 j + 2 h + e] = row 16 w + g + 8 h, column
// 8 j + 2 t + e: the m16n8 accumulator layout, once per 8 columns.
template <class T>
struct Wgmma;
template <>
struct Wgmma<__half> {
  __device__ __forceinline__ static void mma(float (&d)[28], uint64_t a, uint64_t b) {
#if MNEMO_WGMMA
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %30, 0;\n wgmma.mma_async.sync.aligned.m64n56k16.f32.f16.f16 " MNEMO_WG_D28
        ", %28, %29, p, 1, 1, 0, 0;\n}\n"
        : MNEMO_WG_OUT28(d)
        : "l"(a), "l"(b), "r"(1));
#endif
  }
};
template <>
struct Wgmma<__nv_bfloat16> {
  __device__ __forceinline__ static void mma(float (&d)[28], uint64_t a, uint64_t b) {
#if MNEMO_WGMMA
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %30, 0;\n "
        "wgmma.mma_async.sync.aligned.m64n56k16.f32.bf16.bf16 " MNEMO_WG_D28 ", %28, %29, p, 1, 1, 0, 0;\n}\n"
        : MNEMO_WG_OUT28(d)
        : "l"(a), "l"(b), "r"(1));
#endif
  }
};
// f32 rows (FAST): TF32 MMAs over the words as stored (the unit reads
// their TF32 bits); k-steps of 8 values.
template <>
struct Wgmma<float> {
  __device__ __forceinline__ static void mma(float (&d)[28], uint64_t a, uint64_t b) {
#if MNEMO_WGMMA
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %30, 0;\n wgmma.mma_async.sync.aligned.m64n56k8.f32.tf32.tf32 " MNEMO_WG_D28
        ", %28, %29, p, 1, 1;\n}\n"
        : MNEMO_WG_OUT28(d)
        : "l"(a), "l"(b), "r"(1));
#endif
  }
};

#undef MNEMO_WG_D28
#undef MNEMO_WG_OUT28

// The same with A from registers and N = 64: d (64 x 64, f32) = (acc ? d :
// 0) + A (64 rows x one k-step, the warp's 16 rows in the m16n8k16 / m16n8k8
// A-fragment layout: a[c] is row g + 8 (c & 1), word t + 4 (c >> 1) of the
// k-step's 32 bytes) . B (64 rows x the k-step, K-major in shared memory)^T.
// Thread (warp w, lane g * 4 + t) holds d[4 j + 2 h + e] = row 16 w + g +
// 8 h, column 8 j + 2 t + e.
#define MNEMO_WG_D32                                                                                           \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define MNEMO_WG_OUT32(d)                                                                                     \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),  \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define MNEMO_WG_RS(shape_types, tail)                                                                  \
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n wgmma.mma_async.sync.aligned." shape_types \
               " " MNEMO_WG_D32 ", {%32, %33, %34, %35}, %36, p, 1, 1" tail ";\n}\n"                    \
               : MNEMO_WG_OUT32(d)                                                                      \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(static_cast<uint32_t>(acc)))
template <class T>
struct WgmmaRs;
template <>
struct WgmmaRs<__half> {
  __device__ __forceinline__ static void mma(float (&d)[32], const uint32_t (&a)[4], uint64_t b, bool acc) {
#if MNEMO_WGMMA
    MNEMO_WG_RS("m64n64k16.f32.f16.f16", ", 0");
#endif
  }
};
template <>
struct WgmmaRs<__nv_bfloat16> {
  __device__ __forceinline__ static void mma(float (&d)[32], const uint32_t (&a)[4], uint64_t b, bool acc) {
#if MNEMO_WGMMA
    MNEMO_WG_RS("m64n64k16.f32.bf16.bf16", ", 0");
#endif
  }
};
template <>
struct WgmmaRs<float> {
  __device__ __forceinline__ static void mma(float (&d)[32], const uint32_t (&a)[4], uint64_t b, bool acc) {
#if MNEMO_WGMMA
    MNEMO_WG_RS("m64n64k8.f32.tf32.tf32", "");
#endif
  }
};

#undef MNEMO_WG_RS
#undef MNEMO_WG_D32
#undef MNEMO_WG_OUT32

}  // namespace mnemo::cuda
