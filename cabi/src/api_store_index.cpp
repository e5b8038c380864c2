// The inverted-file index entry points.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>

#include "arg_checks.h"
#include "barrier.h"
#include "handles.h"
#include "mnemo.h"

using namespace mnemo;

namespace {

constexpr uint32_t kIndexOptionsV1 = sizeof(mnemo_index_options);
constexpr uint32_t kIndexInfoV1 = sizeof(mnemo_index_info);

IndexOptions index_options(const mnemo_index_options* opts) {
  mnemo_index_options o = mnemo_index_options_default();
  if (opts) {
    if (opts->struct_size < kIndexOptionsV1)
      fail(Code::invalid_argument, "opts->struct_size must be set to sizeof(mnemo_index_options)");
    std::memcpy(&o, opts, kIndexOptionsV1);
  }
  if (o.nlist > kMaxLists)
    fail(Code::invalid_argument,
         "opts->nlist = " + std::to_string(o.nlist) + " is over the limit of " + std::to_string(kMaxLists) + " lists");
  if (!(o.rebuild_hot_fraction > 0))
    fail(Code::invalid_argument, "opts->rebuild_hot_fraction must be > 0 (+infinity: never)");
  if (!(o.rebuild_skew > 0)) fail(Code::invalid_argument, "opts->rebuild_skew must be > 0 (+infinity: never)");
  if (o.background > 1) fail(Code::invalid_argument, "opts->background must be 0 or 1");
  if (o.reserved0 != 0) fail(Code::invalid_argument, "opts->reserved0 must be zero");
  IndexOptions r;
  r.nlist = o.nlist;
  r.iters = o.train_iters;
  r.per_list = o.train_per_list;
  r.seed = o.seed;
  r.hot_fraction = o.rebuild_hot_fraction;
  r.hot_min = o.rebuild_hot_min;
  r.skew = o.rebuild_skew;
  r.background = o.background == 1;
  return r;
}

}  // namespace

extern "C" {

MNEMO_API mnemo_index_options mnemo_index_options_default(void) {
  mnemo_index_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.seed = 1;
  o.rebuild_hot_fraction = 0.25;
  o.rebuild_hot_min = 4096;
  o.rebuild_skew = 8.0;
  o.background = 1;
  return o;
}

MNEMO_API mnemo_status mnemo_store_build_index(mnemo_store* store, const mnemo_index_options* opts) {
  return cabi::guarded("mnemo_store_build_index", [&] {
    Store& s = cabi::store_of(store);
    const IndexOptions o = index_options(opts);
    s.build_index(o);
  });
}

MNEMO_API mnemo_status mnemo_store_drop_index(mnemo_store* store) {
  return cabi::guarded("mnemo_store_drop_index", [&] { cabi::store_of(store).drop_index(); });
}

MNEMO_API mnemo_status mnemo_store_wait_index(mnemo_store* store) {
  return cabi::guarded("mnemo_store_wait_index", [&] { cabi::store_of(store).wait_index(); });
}

MNEMO_API mnemo_status mnemo_store_index_info(const mnemo_store* store, mnemo_index_info* out) {
  return cabi::guarded("mnemo_store_index_info", [&] {
    const Store& s = cabi::store_of(store);
    cabi::need_nonnull(out, "out");
    if (out->struct_size < kIndexInfoV1)
      fail(Code::invalid_argument, "out->struct_size must be set to sizeof(mnemo_index_info)");
    const IndexInfo i = s.index_info();
    mnemo_index_info o;
    std::memset(&o, 0, sizeof o);
    o.struct_size = out->struct_size;
    o.nlist = i.nlist;
    o.indexed = i.indexed;
    o.hot = i.hot;
    o.largest_list = i.largest_list;
    o.builds = i.builds;
    o.rebuilding = i.rebuilding ? 1u : 0u;
    o.last_build_seconds = i.last_build_seconds;
    std::memcpy(out, &o, sizeof o);
  });
}

}  // extern "C"
