// Runtime creation, destruction and reporting.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "arg_checks.h"
#include "barrier.h"
#include "mnemo.h"

using namespace mnemo;

namespace {
// The first published size of each options struct: older callers may pass
// exactly this much; newer fields then take their defaults.
constexpr uint32_t kRuntimeOptionsV1 = offsetof(mnemo_runtime_options, cpu_shards);
constexpr uint32_t kRuntimeReportV1 = offsetof(mnemo_runtime_report, shards);

void copy_text(char* dst, size_t cap, const std::string& s) {
  const size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}
}  // namespace

extern "C" {

MNEMO_API mnemo_runtime_options mnemo_runtime_options_default(void) {
  mnemo_runtime_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.backend = MNEMO_BACKEND_AUTO;
  o.precision = MNEMO_PRECISION_EXACT;
  o.device_id = 0;
  o.num_threads = 0;
  o.validate = 1;
  o.workspace_bytes = 0;
  return o;
}

MNEMO_API mnemo_status mnemo_runtime_create(const mnemo_runtime_options* opts, mnemo_runtime** out) {
  return cabi::guarded("mnemo_runtime_create", [&] {
    cabi::need_nonnull(out, "out");
    mnemo_runtime_options o = mnemo_runtime_options_default();
    if (opts) {
      if (opts->struct_size < kRuntimeOptionsV1)
        fail(Code::invalid_argument, "opts->struct_size = " + std::to_string(opts->struct_size) +
                                         " is smaller than sizeof(mnemo_runtime_options) of ABI 1");
      // Only the fields the caller's struct has; the rest keep defaults.
      std::memcpy(&o, opts, std::min<size_t>(opts->struct_size, sizeof o));
    }
    if (o.backend < MNEMO_BACKEND_AUTO || o.backend > MNEMO_BACKEND_CUDA)
      fail(Code::invalid_argument, "opts->backend = " + std::to_string(o.backend) + " is not a mnemo_backend");
    if (o.precision != MNEMO_PRECISION_EXACT && o.precision != MNEMO_PRECISION_FAST)
      fail(Code::invalid_argument, "opts->precision = " + std::to_string(o.precision) + " is not a mnemo_precision");
    if (o.validate > 1) fail(Code::invalid_argument, "opts->validate must be 0 or 1");
    if (o.device_id < 0) fail(Code::out_of_range, "opts->device_id must not be negative");
    if (o.num_threads > 4096) fail(Code::invalid_argument, "opts->num_threads is larger than 4096");
    RuntimeOptions ro;
    ro.backend = static_cast<BackendKind>(o.backend);
    ro.precision = static_cast<Precision>(o.precision);
    ro.device_id = o.device_id;
    ro.num_threads = o.num_threads;
    ro.validate = o.validate != 0;
    ro.workspace_bytes = o.workspace_bytes;
    if (o.cpu_shards > MNEMO_MAX_SHARDS)
      fail(Code::invalid_argument, "opts->cpu_shards = " + std::to_string(o.cpu_shards) + " is above MNEMO_MAX_SHARDS");
    ro.cpu_shards = o.cpu_shards;
    if (o.device_count == MNEMO_ALL_DEVICES) {
      ro.all_devices = true;
    } else if (o.device_count > MNEMO_MAX_SHARDS) {
      fail(Code::invalid_argument,
           "opts->device_count = " + std::to_string(o.device_count) + " is above MNEMO_MAX_SHARDS");
    } else if (o.device_count > 0) {
      if (o.device_ids) cabi::need_aligned(o.device_ids, "opts->device_ids");
      for (uint32_t i = 0; i < o.device_count; ++i) {
        const int32_t d = o.device_ids ? o.device_ids[i] : static_cast<int32_t>(i);
        if (d < 0) fail(Code::out_of_range, "opts->device_ids[" + std::to_string(i) + "] is negative");
        if (std::find(ro.devices.begin(), ro.devices.end(), d) != ro.devices.end())
          fail(Code::invalid_argument,
               "opts->device_ids[" + std::to_string(i) + "] = " + std::to_string(d) + " is repeated");
        ro.devices.push_back(d);
      }
    }
    auto h = std::make_unique<mnemo_runtime>();
    h->rt = std::make_unique<Runtime>(ro);
    *out = h.release();
  });
}

MNEMO_API void mnemo_runtime_destroy(mnemo_runtime* rt) {
  // Destruction must not throw across the ABI either.
  try {
    delete rt;
  } catch (...) {
  }
}

MNEMO_API mnemo_status mnemo_runtime_info(const mnemo_runtime* rt, mnemo_runtime_report* info) {
  return cabi::guarded("mnemo_runtime_info", [&] {
    cabi::need_nonnull(rt, "rt");
    cabi::need_nonnull(info, "info");
    if (info->struct_size < kRuntimeReportV1)
      fail(Code::invalid_argument, "info->struct_size must be set to sizeof(mnemo_runtime_report)");
    const RuntimeReport r = rt->rt->report();
    mnemo_runtime_report o;
    std::memset(&o, 0, sizeof o);
    o.struct_size = info->struct_size;
    o.backend_requested = static_cast<int32_t>(r.requested);
    o.backend_active = static_cast<int32_t>(r.active);
    o.precision = static_cast<int32_t>(r.precision);
    o.device_id = r.device_id;
    o.num_threads = r.num_threads;
    o.cuda_available = r.cuda_available ? 1u : 0u;
    o.auto_gpu_min_bytes = r.auto_gpu_min_bytes;
    copy_text(o.device_name, sizeof o.device_name, r.device_name);
    copy_text(o.reason, sizeof o.reason, r.reason);
    o.shards = r.shards;
    o.device_count = static_cast<uint32_t>(r.devices.size());
    for (size_t i = 0; i < r.devices.size() && i < MNEMO_MAX_SHARDS; ++i) o.devices[i] = r.devices[i];
    // Only the prefix both this library and the caller know.
    std::memcpy(info, &o, std::min<size_t>(info->struct_size, sizeof o));
  });
}

}  // extern "C"
