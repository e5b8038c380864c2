// Row L2-normalisation and LayerNorm on the GPU, for host buffers (staged
// through the device) or device buffers on the caller's stream.
#include "device/cuda_backend.h"
#include "device/device_args.h"
#include "ops/op_kernels.h"

namespace mnemo::cuda {

namespace {

template <class Launch>
void run_rows(ContextPool& pool, int device, const NormArgs& a, Launch&& launch) {
  const uint64_t bytes = a.rows * a.dim * dtype_size(a.dtype);
  auto ctx = pool.acquire();
  RowsRef r{a.in, a.out, a.dtype, a.rows, a.dim, a.gamma, a.beta, a.eps};
  if (a.place.on_device) {
    cudaStream_t st = static_cast<cudaStream_t>(a.place.stream);
    need_device_memory(a.in, "in", device);
    need_device_memory(a.out, "out", device);
    if (a.gamma) need_device_memory(a.gamma, "gamma", device);
    if (a.beta) need_device_memory(a.beta, "beta", device);
    ctx->begin_on(st);
    if (a.place.validate) {
      need_finite_on_device(*ctx, st, a.in, a.dtype, a.rows * a.dim, "in");
      if (a.gamma) need_finite_on_device(*ctx, st, a.gamma, DType::f32, a.dim, "gamma");
      if (a.beta) need_finite_on_device(*ctx, st, a.beta, DType::f32, a.dim, "beta");
    }
    launch(r, st);
    ctx->end_on(st);
    return;
  }
  cudaStream_t st = ctx->stream;
  const size_t rows_at = 0, gamma_at = (bytes + 255) / 256 * 256, beta_at = gamma_at + (a.dim * 4 + 255) / 256 * 256;
  auto* base = static_cast<unsigned char*>(ctx->scratch(beta_at + a.dim * 4));
  MNEMO_CUDA_CHECK(cudaMemcpyAsync(base + rows_at, a.in, bytes, cudaMemcpyHostToDevice, st));
  if (a.gamma) {
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(base + gamma_at, a.gamma, a.dim * 4, cudaMemcpyHostToDevice, st));
    r.gamma = reinterpret_cast<const float*>(base + gamma_at);
  }
  if (a.beta) {
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(base + beta_at, a.beta, a.dim * 4, cudaMemcpyHostToDevice, st));
    r.beta = reinterpret_cast<const float*>(base + beta_at);
  }
  // In place on the device copy: one buffer serves as input and output.
  r.in = base + rows_at;
  r.out = base + rows_at;
  launch(r, st);
  MNEMO_CUDA_CHECK(cudaMemcpyAsync(a.out, base + rows_at, bytes, cudaMemcpyDeviceToHost, st));
  ctx->sync();
}

}  // namespace

void CudaBackend::normalize_rows(const NormArgs& a) {
  run_rows(pool_, cfg_.device_id, a, [](const RowsRef& r, cudaStream_t st) { launch_normalize_rows(r, st); });
}

void CudaBackend::layer_norm(const NormArgs& a) {
  run_rows(pool_, cfg_.device_id, a, [](const RowsRef& r, cudaStream_t st) { launch_layer_norm(r, st); });
}

}  // namespace mnemo::cuda
