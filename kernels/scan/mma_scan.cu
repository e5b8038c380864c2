// The tensor-core scan's entry point: whether it serves a search, its
// margin, and the launch of the instance set for the store's dtype and
// metric.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "device/device_caps.h"
#include "scan/mma_scan.h"
#include "scan/mma_scan_kernel.cuh"

namespace mnemo::cuda {

float mma_scan_margin(DType t, uint64_t ld) {
  const double u = std::ldexp(1.0, -24);
  // The exact scan: a lane sums its vectors (8 elements each) in one FMA
  // chain, then five reduction steps and the key's rounding.
  const double lane_vectors = std::ceil(static_cast<double>(ld) / 8.0 / 32.0);
  const double exact = (8.0 * lane_vectors + 7.0) * u;
  // The MMA: exact 16-bit products, each k-step's sum within a few units
  // of 2^-23 of the magnitudes summed (truncating adders), plus the
  // final hi + lo add.
  const double mma = (static_cast<double>(ld) / 16.0 + 3.0) * 4.0 * u;
  // The query's parts: hi + lo is within 2^-22 (f16) or 2^-17 (bf16) of
  // each scaled element, or 2^-25 absolute where lo is an f16 subnormal,
  // which |row|_1 <= sqrt(ld) |row| bounds.
  const double split = (t == DType::bf16 ? std::ldexp(1.0, -16) : std::ldexp(1.0, -21)) +
                       std::sqrt(static_cast<double>(ld)) * std::ldexp(1.0, -24);
  return static_cast<float>(4.0 * (exact + mma + split));
}

bool mma_scan_usable(const StoreRef& s, uint32_t nq, uint32_t k) {
  static const int forced = [] {
    const char* e = std::getenv("MNEMO_SCAN_MMA");
    return e ? std::atoi(e) : -1;
  }();
  if (forced == 0) return false;
  // Shared memory: the rings, the queries' columns and the lists must fit
  // a block (wider rows take the row-by-row scans).
  const int qb = nq <= 1 ? 1 : nq <= 2 ? 2 : 4;
  return (s.dtype == DType::f16 || s.dtype == DType::bf16) && nq >= 1 && nq <= 4 && k >= 1 &&
         k <= static_cast<uint32_t>(kSmallKMax) && s.ld % 8 == 0 && device_major() >= 8 &&
         MmaSmem::bytes(qb, s.ld, k) <= 227 * 1024;
}

unsigned mma_scan_blocks(const StoreRef& s, unsigned sm_count) {
  // Three blocks an SM are resident (the kernel's bounds): one wave, and at
  // least two groups of 16 rows a warp.
  const unsigned by_rows = static_cast<unsigned>((static_cast<uint64_t>(s.slots) + 16 * 2 * 8 - 1) / (16 * 2 * 8));
  return std::max(1u, std::min(sm_count * 3, by_rows));
}

unsigned launch_mma_scan(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t k,
                         Cand* cand, unsigned blocks_wanted, const ScanTail& tail, cudaStream_t st) {
  const unsigned blocks = std::max(1u, blocks_wanted);
  const float e_rel = mma_scan_margin(s.dtype, s.ld);
  const bool l2 = s.metric == KeyMetric::l2;
  if (s.dtype == DType::f16)
    (l2 ? launch_mma_scan_typed<__half, true> : launch_mma_scan_typed<__half, false>)(s, queries, qnorms, nq, k, e_rel,
                                                                                      cand, blocks, tail, st);
  else
    (l2 ? launch_mma_scan_typed<__nv_bfloat16, true>
        : launch_mma_scan_typed<__nv_bfloat16, false>)(s, queries, qnorms, nq, k, e_rel, cand, blocks, tail, st);
  MNEMO_CUDA_LAUNCHED("mma_scan_kernel");
  return blocks;
}

}  // namespace mnemo::cuda
