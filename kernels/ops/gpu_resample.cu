// Trajectory resampling on the GPU, for host buffers (staged through the
// device) or device buffers on the caller's stream.
#include "device/cuda_backend.h"
#include "device/device_args.h"
#include "ops/op_kernels.h"

namespace mnemo::cuda {

void CudaBackend::resample(const ResampleArgs& a) {
  const size_t esz = dtype_size(a.data_dtype), tsz = dtype_size(a.time_dtype);
  const uint64_t in_bytes = a.batch * a.n_src * a.dim * esz, out_bytes = a.batch * a.n_tgt * a.dim * esz;
  const uint64_t st_bytes = a.batch * a.n_src * tsz, tt_bytes = a.batch * a.n_tgt * tsz;
  auto ctx = pool_.acquire();
  const bool dev = a.place.on_device;
  cudaStream_t st = dev ? static_cast<cudaStream_t>(a.place.stream) : ctx->stream;
  ResampleRef r{a.data,        a.data_dtype,  a.batch,
                a.n_src,       a.dim,         a.n_tgt,
                a.src_times,   a.tgt_times,   a.time_dtype == DType::f64,
                a.src_lengths, a.tgt_lengths, a.out};
  if (dev) {
    need_device_memory(a.data, "data", cfg_.device_id);
    need_device_memory(a.src_times, "src_times", cfg_.device_id);
    need_device_memory(a.tgt_times, "tgt_times", cfg_.device_id);
    need_device_memory(a.out, "out", cfg_.device_id);
    if (a.src_lengths) need_device_memory(a.src_lengths, "opts->src_lengths", cfg_.device_id);
    if (a.tgt_lengths) need_device_memory(a.tgt_lengths, "opts->tgt_lengths", cfg_.device_id);
    ctx->begin_on(st);
    check_resample_on_device(*ctx, st, r, a.place.validate);
    launch_resample(r, st);
    ctx->end_on(st);
    return;
  }
  size_t total = 0;
  auto add = [&](size_t bytes) {
    const size_t at = total;
    total += (bytes + 255) / 256 * 256;
    return at;
  };
  const size_t o_in = add(in_bytes), o_out = add(out_bytes), o_st = add(st_bytes), o_tt = add(tt_bytes),
               o_sl = add(a.src_lengths ? a.batch * 8 : 0), o_tl = add(a.tgt_lengths ? a.batch * 8 : 0);
  auto* base = static_cast<unsigned char*>(ctx->scratch(total));
  auto up = [&](size_t at, const void* p, size_t bytes) {
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(base + at, p, bytes, cudaMemcpyHostToDevice, st));
    return static_cast<const void*>(base + at);
  };
  r.data = up(o_in, a.data, in_bytes);
  r.src_times = up(o_st, a.src_times, st_bytes);
  r.tgt_times = up(o_tt, a.tgt_times, tt_bytes);
  if (a.src_lengths) r.src_lengths = static_cast<const uint64_t*>(up(o_sl, a.src_lengths, a.batch * 8));
  if (a.tgt_lengths) r.tgt_lengths = static_cast<const uint64_t*>(up(o_tl, a.tgt_lengths, a.batch * 8));
  r.out = base + o_out;
  launch_resample(r, st);
  MNEMO_CUDA_CHECK(cudaMemcpyAsync(a.out, r.out, out_bytes, cudaMemcpyDeviceToHost, st));
  ctx->sync();
}

}  // namespace mnemo::cuda
