// Ampere-style asynchronous copies into shared memory (cp.async), shared by
// the kernels that stage rows through a ring of stages.
#pragma once

#include <cstdint>

namespace mnemo::cuda {

// 16 bytes from global to shared memory, bypassing L1; pred = false
// zero-fills them instead (no read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool pred) {
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int n = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(src), "r"(n));
}
// The same without the zero-fill operand, for copies known to be in range
// (no per-lane range test to compute).
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace mnemo::cuda
