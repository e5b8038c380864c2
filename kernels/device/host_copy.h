// Host-to-host copies of store rows into pinned staging, over several
// threads: one thread's memcpy (about 15 GB/s) is slower than the copy
// engine takes pinned memory (about 55 GB/s on PCIe 5).
#pragma once

#include <cstddef>

namespace mnemo::cuda {

// Copies `rows` rows of `row_bytes` from src to dst (both dense) with up to
// `threads` threads, one for every `per_thread` bytes.
constexpr size_t kCopyBytesPerThread = size_t{4} << 20;
void copy_rows(void* dst, const void* src, size_t rows, size_t row_bytes, int threads,
               size_t per_thread = kCopyBytesPerThread);

}  // namespace mnemo::cuda
