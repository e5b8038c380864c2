// Library information, status names, last error and aligned memory.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "barrier.h"
#include "build_info.h"
#include "core/cpu/simd_kernels.h"
#include "core/dtype.h"
#include "core/error.h"
#include "mnemo.h"

using namespace mnemo;

static_assert(static_cast<int32_t>(Code::internal) == MNEMO_E_INTERNAL, "core codes must match mnemo.h");
static_assert(static_cast<int32_t>(Code::corrupt) == MNEMO_E_CORRUPT, "core codes must match mnemo.h");
static_assert(static_cast<int32_t>(Code::misaligned) == MNEMO_E_MISALIGNED, "core codes must match mnemo.h");
static_assert(static_cast<int32_t>(DType::u64) == MNEMO_DTYPE_U64, "core dtypes must match mnemo.h");
static_assert(static_cast<int32_t>(Metric::l2sq) == MNEMO_METRIC_L2SQ, "core metrics must match mnemo.h");

extern "C" {

MNEMO_API const char* mnemo_status_name(mnemo_status s) {
  switch (s) {
    case MNEMO_OK: return "MNEMO_OK";
    case MNEMO_E_INVALID_ARGUMENT: return "MNEMO_E_INVALID_ARGUMENT";
    case MNEMO_E_NULL_POINTER: return "MNEMO_E_NULL_POINTER";
    case MNEMO_E_MISALIGNED: return "MNEMO_E_MISALIGNED";
    case MNEMO_E_OVERFLOW: return "MNEMO_E_OVERFLOW";
    case MNEMO_E_OUT_OF_RANGE: return "MNEMO_E_OUT_OF_RANGE";
    case MNEMO_E_NON_FINITE: return "MNEMO_E_NON_FINITE";
    case MNEMO_E_NOT_SORTED: return "MNEMO_E_NOT_SORTED";
    case MNEMO_E_DTYPE: return "MNEMO_E_DTYPE";
    case MNEMO_E_SHAPE: return "MNEMO_E_SHAPE";
    case MNEMO_E_OUT_OF_MEMORY: return "MNEMO_E_OUT_OF_MEMORY";
    case MNEMO_E_BACKEND_UNAVAILABLE: return "MNEMO_E_BACKEND_UNAVAILABLE";
    case MNEMO_E_BACKEND: return "MNEMO_E_BACKEND";
    case MNEMO_E_NOT_FOUND: return "MNEMO_E_NOT_FOUND";
    case MNEMO_E_IO: return "MNEMO_E_IO";
    case MNEMO_E_CORRUPT: return "MNEMO_E_CORRUPT";
    case MNEMO_E_UNSUPPORTED: return "MNEMO_E_UNSUPPORTED";
    case MNEMO_E_INTERNAL: return "MNEMO_E_INTERNAL";
    default: return "MNEMO_E_UNKNOWN";
  }
}

MNEMO_API const char* mnemo_last_error(void) { return cabi::last_error(); }

MNEMO_API const char* mnemo_version(void) { return MNEMO_BUILD_VERSION; }

MNEMO_API uint32_t mnemo_abi_version(void) { return MNEMO_ABI_VERSION; }

namespace {
// The build text plus the SIMD target chosen at run time on this CPU; built
// once (without allocating, so nothing can throw here).
struct BuildInfoText {
  char text[512];
  BuildInfoText() noexcept {
    std::snprintf(text, sizeof(text), "%s (running %s)", MNEMO_BUILD_INFO, mnemo::cpu::simd::target_name());
  }
};
}  // namespace

MNEMO_API const char* mnemo_build_info(void) {
  static const BuildInfoText info;
  return info.text;
}

MNEMO_API mnemo_status mnemo_alloc(uint64_t bytes, void** out) {
  return cabi::guarded("mnemo_alloc", [&] {
    if (out == nullptr) fail(Code::null_pointer, "out is NULL");
    if (bytes == 0) fail(Code::invalid_argument, "bytes must be at least 1");
    if (bytes > (UINT64_MAX >> 1)) fail(Code::overflow, "bytes is larger than the address space");
    // aligned_alloc wants a multiple of the alignment.
    const uint64_t rounded = (bytes + MNEMO_ALIGNMENT - 1) / MNEMO_ALIGNMENT * MNEMO_ALIGNMENT;
    void* p = std::aligned_alloc(MNEMO_ALIGNMENT, static_cast<size_t>(rounded));
    if (p == nullptr) fail(Code::out_of_memory, "cannot allocate " + std::to_string(bytes) + " bytes");
    *out = p;
  });
}

MNEMO_API void mnemo_free(void* ptr) { std::free(ptr); }

}  // extern "C"
