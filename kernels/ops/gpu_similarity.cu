// The raw score matrix on the GPU for host inputs: targets and queries are
// uploaded (rows padded to 8 elements), keys computed by the exact scan
// kernels (or a TF32/f16 GEMM in FAST mode for dot and cosine), and the
// matrix copied back row block by row block.
#include <algorithm>

#include "device/cuda_backend.h"
#include "device/device_args.h"
#include "search/search_kernels.h"

namespace mnemo::cuda {

namespace {

// What bf16 rounding left of each query entry, itself in bf16: hi + lo
// carries 16 significant bits, where hi alone (8 bits) is off by up to
// 2^-8 of each product, past FAST's 2e-3 bound.
__global__ void bf16_remainder_kernel(const float* src, const __nv_bfloat16* hi, __nv_bfloat16* lo, uint64_t n) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) lo[i] = __float2bfloat16(src[i] - __bfloat162float(hi[i]));
}

}  // namespace

void CudaBackend::similarity(const SimilarityArgs& a) {
  const uint64_t n = a.targets.rows, dim = a.targets.cols, nq = a.nq, ld = (dim + 7) / 8 * 8;
  if (n >= 0xffffffffull) fail(Code::unsupported, "the CUDA backend scores at most 2^32 - 2 targets per call");
  const DType dt = a.targets.dtype;
  const size_t esz = dtype_size(dt);
  auto ctx = pool_.acquire();
  const bool dev = a.place.on_device;
  cudaStream_t st = dev ? static_cast<cudaStream_t>(a.place.stream) : ctx->stream;
  if (dev) {
    need_device_memory(a.queries, "queries", cfg_.device_id);
    need_device_memory(a.targets.data, "targets", cfg_.device_id);
    need_device_memory(a.scores, "scores", cfg_.device_id);
    ctx->begin_on(st);
  }
  const bool gemm_wanted = cfg_.precision == Precision::fast && a.metric != Metric::l2sq && nq >= kGemmMinQueries;
  bool fits = true;
  if (dev && (a.place.validate || (gemm_wanted && dt == DType::f16))) {
    const uint64_t* w = ctx->check_words(st, 3, [&](unsigned long long* d) {
      if (a.place.validate) {
        launch_find_non_finite(a.queries, DType::f32, nq * dim, d, st);
        launch_find_non_finite(a.targets.data, dt, n * dim, d + 1, st);
      }
      if (gemm_wanted && dt == DType::f16) launch_find_f16_misfit(a.queries, nq, dim, d + 2, st);
    });
    if (w[0] != UINT64_MAX) fail(Code::non_finite, "queries[" + std::to_string(w[0]) + "] is NaN or infinite");
    if (w[1] != UINT64_MAX) fail(Code::non_finite, "targets[" + std::to_string(w[1]) + "] is NaN or infinite");
    fits = w[2] == UINT64_MAX;
  } else if (!dev) {
    fits = fast_queries_fit(dt, a.queries, nq, dim);
  }
  const bool gemm = gemm_wanted && fits;
  // Device rows already padded to 8 elements are read in place; device
  // scores are written in place, host ones through a tile of qc rows.
  const bool copy_rows = !dev || ld != dim;
  const uint64_t budget = std::max<uint64_t>(cfg_.workspace_bytes, 64ull << 20);
  const uint64_t qc = dev ? nq : std::max<uint64_t>(1, std::min<uint64_t>(nq, budget / 2 / (n * 4)));

  size_t total = 0;
  auto add = [&](size_t bytes) {
    const size_t at = total;
    total += (bytes + 255) / 256 * 256;
    return at;
  };
  const size_t o_t = add(copy_rows ? n * ld * esz : 0), o_n = add(n * 4), o_q = add(copy_rows ? nq * ld * 4 : 0),
               o_qn = add(nq * 4), o_k = add(dev ? 0 : qc * n * 4),
               o_qc = add(gemm && dt != DType::f32 ? nq * ld * 2 : 0),
               o_lo = add(gemm && dt == DType::bf16 ? nq * ld * 2 : 0);
  auto* base = static_cast<unsigned char*>(ctx->scratch(total));
  const void* targets = copy_rows ? static_cast<const void*>(base + o_t) : a.targets.data;
  float* norms = reinterpret_cast<float*>(base + o_n);
  const float* queries = copy_rows ? reinterpret_cast<const float*>(base + o_q) : a.queries;
  float* qnorms = reinterpret_cast<float*>(base + o_qn);
  void* qconv = base + o_qc;
  if (copy_rows) {
    const cudaMemcpyKind kind = dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
    MNEMO_CUDA_CHECK(cudaMemsetAsync(base + o_t, 0, n * ld * esz, st));
    MNEMO_CUDA_CHECK(cudaMemsetAsync(base + o_q, 0, nq * ld * 4, st));
    MNEMO_CUDA_CHECK(cudaMemcpy2DAsync(base + o_t, ld * esz, a.targets.data, dim * esz, dim * esz, n, kind, st));
    MNEMO_CUDA_CHECK(cudaMemcpy2DAsync(base + o_q, ld * 4, a.queries, dim * 4, dim * 4, nq, kind, st));
  }
  launch_stored_norms(targets, dt, n, ld, norms, st);
  launch_row_norms(queries, static_cast<uint32_t>(nq), ld, qnorms, st);

  const KeyMetric km = a.metric == Metric::l2sq  ? KeyMetric::l2
                       : a.metric == Metric::dot ? KeyMetric::dot
                                                 : KeyMetric::cosine;
  StoreRef s{targets, dt, ld,  static_cast<uint32_t>(dim), static_cast<uint32_t>(n), nullptr, norms, nullptr, nullptr,
             false,   km, true};
  if (gemm && dt != DType::f32) launch_f32_to(dt, queries, qconv, nq * ld, st);
  auto* qlo = reinterpret_cast<__nv_bfloat16*>(base + o_lo);
  if (gemm && dt == DType::bf16) {
    bf16_remainder_kernel<<<ceil_div(nq * ld, 256), 256, 0, st>>>(queries, static_cast<const __nv_bfloat16*>(qconv),
                                                                  qlo, nq * ld);
    MNEMO_CUDA_LAUNCHED("bf16_remainder_kernel");
  }

  for (uint64_t q0 = 0; q0 < nq; q0 += qc) {
    const uint32_t m = static_cast<uint32_t>(std::min<uint64_t>(qc, nq - q0));
    float* out = dev ? a.scores + q0 * n : reinterpret_cast<float*>(base + o_k);
    if (gemm) {
      const float alpha = 1.0f, beta = 0.0f;
      const bool f32 = dt == DType::f32;
      const void* qm = f32 ? static_cast<const void*>(queries + q0 * ld)
                           : static_cast<const void*>(static_cast<unsigned char*>(qconv) + q0 * ld * 2);
      const cudaDataType_t t = f32 ? CUDA_R_32F : (dt == DType::f16 ? CUDA_R_16F : CUDA_R_16BF);
      MNEMO_BLAS_CHECK(cublasSetStream(ctx->blas, st));
      auto product = [&](const void* qpart, const float* b) {
        return cublasGemmEx(ctx->blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                            static_cast<int>(dim), &alpha, targets, t, static_cast<int>(ld), qpart, t,
                            static_cast<int>(ld), b, out, CUDA_R_32F, static_cast<int>(n),
                            f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      };
      // bf16: the rounded queries, then what their rounding left (added).
      const float one = 1.0f;
      cublasStatus_t rc = product(qm, &beta);
      if (rc == CUBLAS_STATUS_SUCCESS && dt == DType::bf16) rc = product(qlo + q0 * ld, &one);
      cublasSetStream(ctx->blas, ctx->stream);
      MNEMO_BLAS_CHECK(rc);
      launch_finish_keys(s, qnorms + q0, m, 0, static_cast<uint32_t>(n), out, st);
    } else {
      launch_score_rows(s, queries + q0 * ld, qnorms + q0, m, out, static_cast<unsigned>(sm_count_), st);
    }
    if (dev) continue;
    MNEMO_CUDA_CHECK(
        cudaMemcpyAsync(a.scores + q0 * n, out, static_cast<size_t>(m) * n * 4, cudaMemcpyDeviceToHost, st));
    ctx->sync();
  }
  // Keys of L2 are negated distances.
  if (dev) {
    if (km == KeyMetric::l2) launch_negate(a.scores, nq * n, st);
    ctx->end_on(st);
    return;
  }
  if (km == KeyMetric::l2)
    for (uint64_t i = 0; i < nq * n; ++i) a.scores[i] = -a.scores[i];
}

}  // namespace mnemo::cuda
