// Durable stores (snapshot + journal) and store statistics.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "arg_checks.h"
#include "barrier.h"
#include "handles.h"
#include "mnemo.h"

using namespace mnemo;

namespace {

constexpr uint32_t kDurableOptionsV1 = sizeof(mnemo_durable_options);
constexpr uint32_t kStatisticsV1 = offsetof(mnemo_store_statistics, shards);
constexpr uint64_t kMaxDim = 65536;

}  // namespace

extern "C" {

MNEMO_API mnemo_durable_options mnemo_durable_options_default(void) {
  mnemo_durable_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.sync = MNEMO_SYNC_EACH_WRITE;
  o.journal_path = nullptr;
  o.dim = 0;
  o.dtype = MNEMO_DTYPE_F32;
  o.metric = MNEMO_METRIC_COSINE;
  return o;
}

MNEMO_API mnemo_status mnemo_store_open_durable(mnemo_runtime* rt, const char* path, const mnemo_durable_options* opts,
                                                mnemo_store** out) {
  return cabi::guarded("mnemo_store_open_durable", [&] {
    Runtime& r = cabi::runtime_of(rt);
    cabi::need_nonnull(path, "path");
    cabi::need_nonnull(out, "out");
    const mnemo_durable_options o = opts ? *opts : mnemo_durable_options_default();
    if (o.struct_size < kDurableOptionsV1)
      fail(Code::invalid_argument, "opts->struct_size is smaller than sizeof(mnemo_durable_options) of ABI 1");
    if (o.sync != MNEMO_SYNC_EACH_WRITE && o.sync != MNEMO_SYNC_OS)
      fail(Code::invalid_argument, "opts->sync = " + std::to_string(o.sync) + " is not a mnemo_sync_policy");
    DurableOptions d;
    d.path = path;
    if (o.journal_path) d.journal_path = o.journal_path;
    d.sync_each = o.sync == MNEMO_SYNC_EACH_WRITE;
    d.dim = o.dim;
    if (o.dim != 0) {
      if (o.dim > kMaxDim) fail(Code::invalid_argument, "opts->dim must be in [1, 65536] (or 0 to open only)");
      d.dtype = cabi::storage_dtype(o.dtype, "opts->dtype");
      d.metric = cabi::metric_of(o.metric);
    }
    if (d.path.empty()) fail(Code::invalid_argument, "path is empty");
    auto store = open_durable(r, d);
    auto h = std::make_unique<mnemo_store>();
    h->store = std::move(store);
    *out = h.release();
  });
}

MNEMO_API mnemo_status mnemo_store_checkpoint(mnemo_store* store) {
  return cabi::guarded("mnemo_store_checkpoint", [&] { cabi::store_of(store).checkpoint(); });
}

MNEMO_API mnemo_status mnemo_store_stats(const mnemo_store* store, mnemo_store_statistics* out) {
  return cabi::guarded("mnemo_store_stats", [&] {
    Store& s = cabi::store_of(store);
    cabi::need_nonnull(out, "out");
    if (out->struct_size < kStatisticsV1)
      fail(Code::invalid_argument, "out->struct_size must be set to sizeof(mnemo_store_statistics)");
    const StoreStats st = s.stats();
    mnemo_store_statistics o;
    std::memset(&o, 0, sizeof o);
    o.struct_size = out->struct_size;
    o.durable = st.durable ? 1u : 0u;
    o.vectors = st.vectors;
    o.tombstones = st.tombstones;
    o.slots = st.slots;
    o.host_bytes = st.host_bytes;
    o.device_bytes = st.device_bytes;
    o.journal_records = st.journal_records;
    o.journal_bytes = st.journal_bytes;
    o.sequence = st.seq;
    o.shards = static_cast<uint32_t>(st.shard_vectors.size());
    for (size_t i = 0; i < st.shard_vectors.size() && i < MNEMO_MAX_SHARDS; ++i)
      o.shard_vectors[i] = st.shard_vectors[i];
    o.filtered_on_device = st.filtered_on_device;
    o.filtered_on_host = st.filtered_on_host;
    o.filtered_ranged = st.filtered_ranged;
    // Only the prefix both this library and the caller know.
    std::memcpy(out, &o, std::min<size_t>(out->struct_size, sizeof o));
  });
}

}  // extern "C"
