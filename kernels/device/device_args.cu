#include <string>

#include "device/device_args.h"

namespace mnemo::cuda {

void need_device_memory(const void* p, const char* name, int device) {
  cudaPointerAttributes attr{};
  MNEMO_CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
  switch (attr.type) {
    case cudaMemoryTypeHost: return;
    case cudaMemoryTypeManaged:
    case cudaMemoryTypeDevice:
      if (attr.device == device) return;
      fail(Code::invalid_argument, std::string(name) + " is memory of device " + std::to_string(attr.device) +
                                       ", not of this runtime's device " + std::to_string(device));
    default:
      fail(Code::invalid_argument, std::string(name) +
                                       " is not device memory (pageable host memory); use the host entry point or "
                                       "cudaMalloc / cudaHostAlloc memory");
  }
}

void need_finite_on_device(ExecContext& ctx, cudaStream_t st, const void* data, DType t, uint64_t n, const char* name) {
  const uint64_t* w = ctx.check_words(st, 1, [&](unsigned long long* d) { launch_find_non_finite(data, t, n, d, st); });
  if (w[0] != UINT64_MAX)
    fail(Code::non_finite, std::string(name) + "[" + std::to_string(w[0]) + "] is NaN or infinite");
}

void check_resample_on_device(ExecContext& ctx, cudaStream_t st, const ResampleRef& r, bool finite) {
  const uint64_t* w = ctx.check_words(st, 5, [&](unsigned long long* d) { launch_check_resample(r, finite, d, st); });
  if (w[0] != UINT64_MAX) {
    // Lengths are read back for the message only.
    uint64_t s = r.n_src, t = r.n_tgt;
    if (r.src_lengths) MNEMO_CUDA_CHECK(cudaMemcpy(&s, r.src_lengths + w[0], 8, cudaMemcpyDeviceToHost));
    if (r.tgt_lengths) MNEMO_CUDA_CHECK(cudaMemcpy(&t, r.tgt_lengths + w[0], 8, cudaMemcpyDeviceToHost));
    const std::string b = std::to_string(w[0]);
    if (s == 0 || s > r.n_src)
      fail(Code::invalid_argument, "opts->src_lengths[" + b + "] = " + std::to_string(s) + " is not in [1, n_src]");
    fail(Code::invalid_argument, "opts->tgt_lengths[" + b + "] = " + std::to_string(t) + " exceeds n_tgt");
  }
  // The host checks row by row: source times finite, target times finite,
  // source times sorted, data finite. Report the first row's first failure.
  struct Found {
    uint64_t row;
    int order;
  };
  Found best{UINT64_MAX, 0};
  auto consider = [&](uint64_t row, int order) {
    if (row < best.row || (row == best.row && order < best.order)) best = {row, order};
  };
  if (w[2] != UINT64_MAX) consider(w[2] / r.n_src, 0);
  if (w[3] != UINT64_MAX) consider(w[3] / r.n_tgt, 1);
  if (w[1] != UINT64_MAX) consider(w[1] / r.n_src, 2);
  if (w[4] != UINT64_MAX) consider(w[4] / (r.n_src * r.dim), 3);
  if (best.row == UINT64_MAX) return;
  const std::string row = std::to_string(best.row);
  switch (best.order) {
    case 0: fail(Code::non_finite, "src_times (valid part)[" + std::to_string(w[2] % r.n_src) + "] is NaN or infinite");
    case 1: fail(Code::non_finite, "tgt_times (valid part)[" + std::to_string(w[3] % r.n_tgt) + "] is NaN or infinite");
    case 2: fail(Code::not_sorted, "src_times of row " + row + " decrease at index " + std::to_string(w[1] % r.n_src));
    default:
      fail(Code::non_finite, "data (valid part)[" + std::to_string(w[4] % (r.n_src * r.dim)) + "] is NaN or infinite");
  }
}

}  // namespace mnemo::cuda
