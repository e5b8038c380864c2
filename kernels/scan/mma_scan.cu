// The tensor-core scan's entry point: whether it serves a search, its
// margin, and the launch of the instance set for the store's dtype and
// metric.
#include <algorithm>
#include <cmath>

#include "device/device_caps.h"
#include "device/env_knob.h"
#include "scan/mma_scan.h"
#include "scan/mma_scan_kernel.cuh"

namespace mnemo::cuda {

float mma_scan_margin(DType t, uint64_t ld) {
  const double u = std::ldexp(1.0, -24);
  const bool f32 = t == DType::f32;
  // The exact scan: a lane sums its vectors (16 bytes each) in one FMA
  // chain, then five reduction steps and the key's rounding.
  const double per_vector = f32 ? 4.0 : 8.0;
  const double lane_vectors = std::ceil(static_cast<double>(ld) / per_vector / 32.0);
  const double exact = (per_vector * lane_vectors + 7.0) * u;
  // The MMA: exact products (16-bit, or TF32 by TF32), each k-step's sum
  // within a few units of 2^-23 of the magnitudes summed (truncating
  // adders), plus the final hi + lo add.
  const double mma = (static_cast<double>(ld) / (f32 ? 8.0 : 16.0) + 3.0) * 4.0 * u;
  // The query's parts: hi + lo is within 2^-22 (f16, TF32) or 2^-17 (bf16)
  // of each scaled element, or 2^-25 absolute where lo is an f16
  // subnormal, which |row|_1 <= sqrt(ld) |row| bounds.
  const double split = (t == DType::bf16 ? std::ldexp(1.0, -16) : std::ldexp(1.0, -21)) +
                       std::sqrt(static_cast<double>(ld)) * std::ldexp(1.0, -24);
  // f32 rows enter the MMA as TF32, their low 13 bits dropped: each
  // product within 2^-10 of itself, so the sum within 2^-10 |row| |query|
  // (Cauchy-Schwarz). That term is a bound, not an estimate: no spare.
  const double rows = f32 ? std::ldexp(1.0, -10) : 0.0;
  return static_cast<float>(rows + 4.0 * (exact + mma + split));
}

namespace {

// f32 rows take the TF32 scan where the row-by-row scan is bound by its
// instructions a row: rows of up to 256 dims. Measured on the H200 (1 GB,
// one query, kernel ms, row scan -> TF32 scan): 32 wide k 10 0.447 ->
// 0.339, k 100 0.770 -> 0.391; 128 wide 0.404 -> 0.284 and 0.784 -> 0.333;
// 1024 wide 0.255 -> 0.300 and 0.457 -> 0.353; 3072 wide 0.270 -> 0.415 and
// 0.327 -> 0.584 (wide rows read B from shared memory every step).
// MNEMO_SCAN_MMA = 1 takes it at every width, 0 never (for measuring).
constexpr uint64_t kMmaF32MaxDim = 256;
bool mma_scan_f32_wanted(const StoreRef& s, int forced) { return forced == 1 || s.ld <= kMmaF32MaxDim; }

// One query over 16-bit rows longer than 1 KB takes the row-by-row scan
// (its L2 prefetch off there, gpu_search.cu). Measured on the H200 (1 GiB,
// GPU ms, this scan -> the row scan, a process each): 1000 wide k 10 0.343
// -> 0.295, k 100 0.384 -> 0.349; 2048 wide 0.312 -> 0.271 and 0.364 ->
// 0.331; 3072 wide 0.327 -> 0.270 and 0.404 -> 0.332; 4096 wide 0.334 ->
// 0.271 and 0.428 -> 0.335. Over rows of 128-400 bytes this scan is far
// ahead (200 wide, k 100: 0.426 against 1.071).
constexpr uint64_t kMma16OneQueryMaxBytes = 1024;
bool mma_scan_16_wanted(const StoreRef& s, uint32_t nq, int forced) {
  return forced == 1 || nq > 1 || s.ld * 2 <= kMma16OneQueryMaxBytes;
}

}  // namespace

bool mma_scan_usable(const StoreRef& s, uint32_t nq, uint32_t k) {
  static const int forced = env_int("MNEMO_SCAN_MMA", -1);
  if (forced == 0) return false;
  // Shared memory: the rings, the queries' columns and the lists must fit
  // a block (wider rows take the row-by-row scans).
  const int qb = nq <= 1 ? 1 : nq <= 2 ? 2 : 4;
  const uint32_t eb = s.dtype == DType::f32 ? 4 : 2;
  if (s.dtype == DType::f32 && !mma_scan_f32_wanted(s, forced)) return false;
  if (s.dtype != DType::f32 && !mma_scan_16_wanted(s, nq, forced)) return false;
  // Rows are read in 16-byte pieces.
  return nq >= 1 && nq <= 4 && k >= 1 && k <= static_cast<uint32_t>(kSmallKMax) && (s.ld * eb) % 16 == 0 &&
         device_major() >= 8 && MmaSmem::bytes(qb, s.ld, k, eb) <= 227 * 1024;
}

unsigned mma_scan_blocks(const StoreRef& s, uint32_t nq, uint32_t k, unsigned sm_count) {
  // One wave of the blocks an SM holds: up to kMmaMaxBlocks (the kernel's bounds),
  // fewer where their shared memory does not fit (228 KB an SM, 1 KB of it
  // reserved a block). Each warp's rows are fixed at launch, so blocks past
  // the wave would run after it: four queries at k = 100 (two blocks an
  // SM) took 1.5 waves. And at least two groups of 16 rows a warp.
  const int qb = nq <= 1 ? 1 : nq <= 2 ? 2 : 4;
  const size_t smem = MmaSmem::bytes(qb, s.ld, k, s.dtype == DType::f32 ? 4 : 2) + 1024;
  const unsigned fit = static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(kMmaMaxBlocks, 228 * 1024 / smem)));
  const unsigned by_rows = static_cast<unsigned>((static_cast<uint64_t>(s.slots) + 16 * 2 * 8 - 1) / (16 * 2 * 8));
  return std::max(1u, std::min(sm_count * fit, by_rows));
}

unsigned launch_mma_scan(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t k,
                         Cand* cand, unsigned blocks_wanted, const ScanTail& tail, cudaStream_t st) {
  const unsigned blocks = std::max(1u, blocks_wanted);
  const float e_rel = mma_scan_margin(s.dtype, s.ld);
  const bool l2 = s.metric == KeyMetric::l2;
  if (s.dtype == DType::f32)
    (l2 ? launch_mma_scan_typed<float, true> : launch_mma_scan_typed<float, false>)(s, queries, qnorms, nq, k, e_rel,
                                                                                    cand, blocks, tail, st);
  else if (s.dtype == DType::f16)
    (l2 ? launch_mma_scan_typed<__half, true> : launch_mma_scan_typed<__half, false>)(s, queries, qnorms, nq, k, e_rel,
                                                                                      cand, blocks, tail, st);
  else
    (l2 ? launch_mma_scan_typed<__nv_bfloat16, true>
        : launch_mma_scan_typed<__nv_bfloat16, false>)(s, queries, qnorms, nq, k, e_rel, cand, blocks, tail, st);
  MNEMO_CUDA_LAUNCHED("mma_scan_kernel");
  return blocks;
}

}  // namespace mnemo::cuda
