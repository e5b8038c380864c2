// mnemo_resample: trajectories interpolated at new times.
#include <string>

#include "arg_checks.h"
#include "barrier.h"
#include "core/checked.h"
#include "core/validate.h"
#include "mnemo.h"

using namespace mnemo;

namespace {
constexpr uint32_t kResampleOptionsV1 = sizeof(mnemo_resample_options);
}

extern "C" {

MNEMO_API mnemo_resample_options mnemo_resample_options_default(void) {
  mnemo_resample_options o{};
  o.struct_size = sizeof o;
  return o;
}

}  // extern "C"

namespace {

// Both entry points: the same argument checks; contents (lengths, times,
// values) are checked here for host buffers and by the backend for device
// ones.
void resample(mnemo_runtime* rt, const void* data, int32_t data_dtype, uint64_t batch, uint64_t n_src, uint64_t dim,
              const void* src_times, const void* tgt_times, int32_t time_dtype, uint64_t n_tgt,
              const mnemo_resample_options* opts, void* out, const Placement& place) {
  Runtime& r = cabi::runtime_of(rt);
  ResampleArgs a;
  a.data_dtype = cabi::storage_dtype(data_dtype, "data_dtype");
  a.time_dtype = cabi::time_dtype(time_dtype, "time_dtype");
  cabi::need_positive(n_src, "n_src");
  cabi::need_positive(dim, "dim");
  const mnemo_resample_options o = opts ? *opts : mnemo_resample_options_default();
  if (o.struct_size < kResampleOptionsV1)
    fail(Code::invalid_argument, "opts->struct_size is smaller than sizeof(mnemo_resample_options) of ABI 1");
  cabi::need_data(data, "data");
  cabi::need_data(src_times, "src_times");
  cabi::need_data(tgt_times, "tgt_times");
  cabi::need_data(out, "out");
  if (o.src_lengths) cabi::need_aligned(o.src_lengths, "opts->src_lengths");
  if (o.tgt_lengths) cabi::need_aligned(o.tgt_lengths, "opts->tgt_lengths");
  const size_t esz = dtype_size(a.data_dtype), tsz = dtype_size(a.time_dtype);
  const uint64_t in_elems = checked_mul(batch, n_src, dim, "data");
  const uint64_t out_elems = checked_mul(batch, n_tgt, dim, "out");
  const uint64_t st_elems = checked_mul(batch, n_src, "src_times");
  const uint64_t tt_elems = checked_mul(batch, n_tgt, "tgt_times");
  checked_bytes(checked_mul(in_elems, esz, "data"), "data");
  checked_bytes(checked_mul(out_elems, esz, "out"), "out");
  checked_bytes(checked_mul(st_elems, tsz, "src_times"), "src_times");
  checked_bytes(checked_mul(tt_elems, tsz, "tgt_times"), "tgt_times");
  checked_bytes(checked_mul(batch, 8, "lengths"), "lengths");
  if (batch == 0 || n_tgt == 0) return;
  const uint64_t out_bytes = out_elems * esz;
  cabi::need_disjoint(out, out_bytes, data, in_elems * esz, "out and data", false);
  cabi::need_disjoint(out, out_bytes, src_times, st_elems * tsz, "out and src_times", false);
  cabi::need_disjoint(out, out_bytes, tgt_times, tt_elems * tsz, "out and tgt_times", false);
  a.place = place;
  a.place.validate = r.validate();
  for (uint64_t b = 0; b < batch && !place.on_device; ++b) {
    const uint64_t S = o.src_lengths ? o.src_lengths[b] : n_src;
    if (S == 0 || S > n_src)
      fail(Code::invalid_argument,
           "opts->src_lengths[" + std::to_string(b) + "] = " + std::to_string(S) + " is not in [1, n_src]");
    if (o.tgt_lengths && o.tgt_lengths[b] > n_tgt)
      fail(Code::invalid_argument,
           "opts->tgt_lengths[" + std::to_string(b) + "] = " + std::to_string(o.tgt_lengths[b]) + " exceeds n_tgt");
    const unsigned char* times = static_cast<const unsigned char*>(src_times) + b * n_src * tsz;
    cabi::need_finite(r, times, a.time_dtype, S, "src_times (valid part)");
    const uint64_t T = o.tgt_lengths ? o.tgt_lengths[b] : n_tgt;
    cabi::need_finite(r, static_cast<const unsigned char*>(tgt_times) + b * n_tgt * tsz, a.time_dtype, T,
                      "tgt_times (valid part)");
    const uint64_t bad = find_decreasing(times, a.time_dtype, S);
    if (bad != kNotFound)
      fail(Code::not_sorted, "src_times of row " + std::to_string(b) + " decrease at index " + std::to_string(bad));
    cabi::need_finite(r, static_cast<const unsigned char*>(data) + b * n_src * dim * esz, a.data_dtype, S * dim,
                      "data (valid part)");
  }
  a.data = data;
  a.batch = batch;
  a.n_src = n_src;
  a.dim = dim;
  a.n_tgt = n_tgt;
  a.src_times = src_times;
  a.tgt_times = tgt_times;
  a.src_lengths = o.src_lengths;
  a.tgt_lengths = o.tgt_lengths;
  a.out = out;
  if (place.on_device)
    r.device_backend(Op::resample).resample(a);
  else
    r.pick(Op::resample, in_elems * esz + out_bytes).resample(a);
}

}  // namespace

extern "C" {

MNEMO_API mnemo_status mnemo_resample(mnemo_runtime* rt, const void* data, int32_t data_dtype, uint64_t batch,
                                      uint64_t n_src, uint64_t dim, const void* src_times, const void* tgt_times,
                                      int32_t time_dtype, uint64_t n_tgt, const mnemo_resample_options* opts,
                                      void* out) {
  return cabi::guarded("mnemo_resample", [&] {
    resample(rt, data, data_dtype, batch, n_src, dim, src_times, tgt_times, time_dtype, n_tgt, opts, out, Placement{});
  });
}

MNEMO_API mnemo_status mnemo_resample_device(mnemo_runtime* rt, const void* data, int32_t data_dtype, uint64_t batch,
                                             uint64_t n_src, uint64_t dim, const void* src_times, const void* tgt_times,
                                             int32_t time_dtype, uint64_t n_tgt, const mnemo_resample_options* opts,
                                             void* out, void* stream) {
  return cabi::guarded("mnemo_resample_device", [&] {
    resample(rt, data, data_dtype, batch, n_src, dim, src_times, tgt_times, time_dtype, n_tgt, opts, out,
             Placement{true, stream, true});
  });
}

}  // extern "C"
