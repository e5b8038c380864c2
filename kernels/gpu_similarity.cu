// The raw score matrix on the GPU for host inputs: targets and queries are
// uploaded (rows padded to 8 elements), keys computed by the exact scan
// kernels (or a TF32/f16 GEMM in FAST mode for dot and cosine), and the
// matrix copied back row block by row block.
#include <algorithm>

#include "cuda_backend.h"
#include "search_kernels.h"

namespace mnemo::cuda {

void CudaBackend::similarity(const SimilarityArgs& a) {
  const uint64_t n = a.targets.rows, dim = a.targets.cols, nq = a.nq, ld = (dim + 7) / 8 * 8;
  if (n >= 0xffffffffull) fail(Code::unsupported, "the CUDA backend scores at most 2^32 - 2 targets per call");
  const DType dt = a.targets.dtype;
  const size_t esz = dtype_size(dt);
  auto ctx = pool_.acquire();
  cudaStream_t st = ctx->stream;
  const uint64_t budget = std::max<uint64_t>(cfg_.workspace_bytes, 64ull << 20);
  const uint64_t qc = std::max<uint64_t>(1, std::min<uint64_t>(nq, budget / 2 / (n * 4)));

  size_t total = 0;
  auto add = [&](size_t bytes) {
    const size_t at = total;
    total += (bytes + 255) / 256 * 256;
    return at;
  };
  const bool gemm = cfg_.precision == Precision::fast && a.metric != Metric::l2sq && nq >= kGemmMinQueries &&
                    fast_queries_fit(dt, a.queries, nq, dim);
  const size_t o_t = add(n * ld * esz), o_n = add(n * 4), o_q = add(nq * ld * 4), o_qn = add(nq * 4),
               o_k = add(qc * n * 4), o_qc = add(gemm && dt != DType::f32 ? nq * ld * 2 : 0);
  auto* base = static_cast<unsigned char*>(ctx->scratch(total));
  void* targets = base + o_t;
  float* norms = reinterpret_cast<float*>(base + o_n);
  float* queries = reinterpret_cast<float*>(base + o_q);
  float* qnorms = reinterpret_cast<float*>(base + o_qn);
  float* keys = reinterpret_cast<float*>(base + o_k);
  void* qconv = base + o_qc;
  MNEMO_CUDA_CHECK(cudaMemsetAsync(targets, 0, n * ld * esz, st));
  MNEMO_CUDA_CHECK(cudaMemsetAsync(queries, 0, nq * ld * 4, st));
  MNEMO_CUDA_CHECK(
      cudaMemcpy2DAsync(targets, ld * esz, a.targets.data, dim * esz, dim * esz, n, cudaMemcpyHostToDevice, st));
  MNEMO_CUDA_CHECK(cudaMemcpy2DAsync(queries, ld * 4, a.queries, dim * 4, dim * 4, nq, cudaMemcpyHostToDevice, st));
  launch_stored_norms(targets, dt, n, ld, norms, st);
  launch_row_norms(queries, static_cast<uint32_t>(nq), ld, qnorms, st);

  const KeyMetric km = a.metric == Metric::l2sq  ? KeyMetric::l2
                       : a.metric == Metric::dot ? KeyMetric::dot
                                                 : KeyMetric::cosine;
  StoreRef s{targets, dt, ld,  static_cast<uint32_t>(dim), static_cast<uint32_t>(n), nullptr, norms, nullptr, nullptr,
             false,   km, true};
  if (gemm && dt != DType::f32) launch_f32_to(dt, queries, qconv, nq * ld, st);

  for (uint64_t q0 = 0; q0 < nq; q0 += qc) {
    const uint32_t m = static_cast<uint32_t>(std::min<uint64_t>(qc, nq - q0));
    float* out = keys;
    if (gemm) {
      const float alpha = 1.0f, beta = 0.0f;
      const bool f32 = dt == DType::f32;
      const void* qm = f32 ? static_cast<const void*>(queries + q0 * ld)
                           : static_cast<const void*>(static_cast<unsigned char*>(qconv) + q0 * ld * 2);
      const cudaDataType_t t = f32 ? CUDA_R_32F : (dt == DType::f16 ? CUDA_R_16F : CUDA_R_16BF);
      MNEMO_BLAS_CHECK(cublasGemmEx(ctx->blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                    static_cast<int>(dim), &alpha, targets, t, static_cast<int>(ld), qm, t,
                                    static_cast<int>(ld), &beta, out, CUDA_R_32F, static_cast<int>(n),
                                    f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      launch_finish_keys(s, qnorms + q0, m, 0, static_cast<uint32_t>(n), out, st);
    } else {
      launch_score_rows(s, queries + q0 * ld, qnorms + q0, m, out, static_cast<unsigned>(sm_count_), st);
    }
    MNEMO_CUDA_CHECK(
        cudaMemcpyAsync(a.scores + q0 * n, out, static_cast<size_t>(m) * n * 4, cudaMemcpyDeviceToHost, st));
    ctx->sync();
  }
  // Keys of L2 are negated distances.
  if (km == KeyMetric::l2)
    for (uint64_t i = 0; i < nq * n; ++i) a.scores[i] = -a.scores[i];
}

}  // namespace mnemo::cuda
