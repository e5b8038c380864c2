// Search over an inverted-file index on the GPU (see ivf_search.h). The
// candidates of a query are the live, allowed slots of its nprobe best
// lists and of the hot tier, as on the CPU (core/cpu/ivf_search.cpp); the
// order of the spans does not matter, since every selection keeps the
// library's total order.
#include <algorithm>

#include "device/arena.h"
#include "device/exec_context.h"
#include "scan/scan_tail.cuh"
#include "search/ivf_search.h"

namespace mnemo::cuda {

namespace {

constexpr int kSpanWarps = 4;

// One warp per query: its probed lists (list numbers from the coarse step;
// entries past the lists, as padding, are skipped) and the hot tier into
// the span table (spans, or null) and the list bitmap (bits, or null).
__global__ void __launch_bounds__(kSpanWarps * 32)
    ivf_spans_kernel(const uint64_t* __restrict__ lists, uint32_t nprobe, const uint64_t* __restrict__ offsets,
                     uint32_t nlist, uint32_t hot_begin, uint32_t slots, uint32_t nq, uint2* spans, uint32_t* bits,
                     uint32_t words) {
  const uint32_t q = blockIdx.x * kSpanWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (q >= nq) return;  // the whole warp
  if (bits) {
    for (uint32_t w = lane; w < words; w += 32) bits[static_cast<uint64_t>(q) * words + w] = 0;
    __syncwarp();
  }
  const uint32_t stride = nprobe + 1;
  uint32_t carry = 0;
  for (uint32_t j0 = 0; j0 < stride; j0 += 32) {
    const uint32_t j = j0 + lane;
    uint32_t lo = 0, len = 0;
    if (j < nprobe) {
      const uint64_t l = lists[static_cast<uint64_t>(q) * nprobe + j];
      if (l < nlist) {
        if (bits) atomicOr(bits + static_cast<uint64_t>(q) * words + l / 32, 1u << (l % 32));
        const uint64_t a = min(offsets[l], static_cast<uint64_t>(slots)),
                       b = min(offsets[l + 1], static_cast<uint64_t>(slots));
        if (a < b) {
          lo = static_cast<uint32_t>(a);
          len = static_cast<uint32_t>(b - a);
        }
      }
    } else if (j == nprobe && hot_begin < slots) {
      lo = hot_begin;
      len = slots - hot_begin;
    }
    uint32_t inc = len;  // inclusive prefix sum over the warp
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const uint32_t v = __shfl_up_sync(kFullMask, inc, off);
      if (lane >= off) inc += v;
    }
    inc += carry;
    if (spans && j < stride) spans[static_cast<uint64_t>(q) * stride + j] = make_uint2(lo - (inc - len), inc);
    carry = __shfl_sync(kFullMask, inc, 31);
  }
}

// keys [m][n] of queries q0..: NaN where the slot lies before the hot tier
// in a list the query does not probe.
__global__ void __launch_bounds__(256) ivf_mask_kernel(IvfLists c, uint32_t q0, uint32_t n, float* keys) {
  const uint32_t row = blockIdx.y;
  const uint32_t* bits = c.list_bits + static_cast<uint64_t>(q0 + row) * c.words;
  float* out = keys + static_cast<uint64_t>(row) * n;
  const uint32_t end = min(n, c.hot_begin);
  for (uint32_t i = blockIdx.x * 256 + threadIdx.x; i < end; i += gridDim.x * 256) {
    bool keep = false;
    if (c.nlist > 0 && c.offsets[0] <= i) {
      // The list holding slot i: the last l < nlist with offsets[l] <= i.
      uint32_t lo = 0, hi = c.nlist - 1;
      while (lo < hi) {
        const uint32_t mid = (lo + hi + 1) / 2;
        if (c.offsets[mid] <= i)
          lo = mid;
        else
          hi = mid - 1;
      }
      keep = (bits[lo / 32] >> (lo % 32)) & 1u;
    }
    if (!keep) out[i] = __int_as_float(0x7fc00000);
  }
}

// Scratch of at least `bytes` for a phase after the coarse step: that
// step's work on st may still read the scratch, so a growth (rare: buffers
// only grow) first waits for it.
void* later_scratch(ExecContext& ctx, cudaStream_t st, size_t bytes) {
  if (bytes > ctx.work.size()) MNEMO_CUDA_CHECK(cudaStreamSynchronize(st));
  return ctx.scratch(bytes);
}

}  // namespace

void launch_ivf_mask(const IvfLists& c, uint32_t q0, uint32_t m, uint32_t n, float* keys, cudaStream_t st) {
  const uint32_t end = std::min(n, c.hot_begin);
  if (end == 0 || m == 0) return;
  const unsigned bx = std::max(1u, std::min(ceil_div(end, 256u * 4), 1024u));
  for (uint32_t r0 = 0; r0 < m; r0 += 65535) {  // grid.y limit
    const uint32_t rows = std::min<uint32_t>(65535, m - r0);
    ivf_mask_kernel<<<dim3(bx, rows), 256, 0, st>>>(c, q0 + r0, n, keys + static_cast<uint64_t>(r0) * n);
    MNEMO_CUDA_LAUNCHED("ivf_mask_kernel");
  }
}

void ivf_device_search(ExecContext& ctx, cudaStream_t st, const StoreRef& s, const IvfDevice& ivf,
                       const Activation* normalized, const float* q, const float* qn, uint64_t nq, uint64_t k,
                       uint64_t k_out, uint64_t workspace, int sm_count, uint64_t* d_ids, float* d_scores) {
  // Coarse step: each query's nprobe best lists (the centroids' ids are the
  // list numbers), kept on the device. EXACT: the lists are those the CPU
  // picks.
  device_search(ctx, st, ivf.centroids, q, qn, nq, ivf.nprobe, ivf.nprobe, false, workspace, sm_count, ivf.coarse_ids,
                ivf.coarse_scores);
  const bool scan = ivf_scans(ivf.max_rows, k, normalized != nullptr);
  const uint32_t words = ivf_words(ivf.nlist);
  ivf_spans_kernel<<<ceil_div(nq, kSpanWarps), kSpanWarps * 32, 0, st>>>(
      ivf.coarse_ids, ivf.nprobe, ivf.offsets, ivf.nlist, ivf.hot_begin, s.slots, static_cast<uint32_t>(nq),
      scan ? ivf.spans : nullptr, scan ? nullptr : ivf.list_bits, words);
  MNEMO_CUDA_LAUNCHED("ivf_spans_kernel");
  const IvfLists lists{ivf.offsets, ivf.list_bits, words, ivf.nlist, ivf.hot_begin};
  if (normalized) {
    // A growth of its buffers first waits for the coarse step.
    normalized_device_search(ctx, st, s, *normalized, q, qn, nq, k, k_out, workspace, sm_count, d_ids, d_scores,
                             &lists);
    return;
  }
  if (ivf.max_rows == 0 || s.slots == 0) {  // no candidates: padding only
    launch_emit(nullptr, static_cast<uint32_t>(nq), 1, 0, k_out, s.ids, s.metric, d_ids, d_scores, st);
    return;
  }
  const uint64_t budget = std::max<uint64_t>(workspace, 64ull << 20);
  const uint32_t kc = ivf_list_length(ivf.max_rows, k);
  const auto sms = static_cast<unsigned>(sm_count);
  if (!scan) {
    // Large k: exact keys of every slot, the other lists' slots masked,
    // then radix selection, query chunk by chunk (as device_search's
    // exact-keys path).
    const uint32_t n = s.slots;
    const uint64_t row = static_cast<uint64_t>(n) * 4;
    const uint64_t qc = std::max<uint64_t>(1, std::min<uint64_t>(nq, budget / 2 / row));
    const size_t sel = large_select_temp_bytes(static_cast<uint32_t>(qc), kc);
    Arena ar;
    const size_t o_keys = ar.add(qc * row), o_sel = ar.add(sel);
    const size_t list_bytes = nq * kc * sizeof(Cand);
    if (list_bytes > ctx.work2.size()) MNEMO_CUDA_CHECK(cudaStreamSynchronize(st));
    ctx.work2.reserve(list_bytes);
    Cand* out = ctx.work2.get<Cand>();
    void* w = later_scratch(ctx, st, ar.size());
    for (uint64_t q0 = 0; q0 < nq; q0 += qc) {
      const uint32_t m = static_cast<uint32_t>(std::min<uint64_t>(qc, nq - q0));
      float* keys = at<float>(w, o_keys);
      launch_score_rows(s, q + q0 * s.ld, qn + q0, m, keys, sms, st);
      launch_ivf_mask(lists, static_cast<uint32_t>(q0), m, n, keys, st);
      launch_large_select(keys, m, n, kc, s.ids, out + q0 * kc, at<void>(w, o_sel), sel, st);
    }
    const uint32_t emit_k = static_cast<uint32_t>(std::min<uint64_t>(k, kc));
    launch_emit(out, static_cast<uint32_t>(nq), kc, emit_k, k_out, s.ids, s.metric, d_ids, d_scores, st);
    return;
  }
  // The span scan: grid (blocks, queries of a chunk), blocks per query from
  // the bound on its rows (as scan_blocks: four rows per warp at least),
  // fewer where many queries fill the machine; cand [chunk][blocks][kc].
  const unsigned by_rows = std::max(1u, std::min(sms * 4, ceil_div(ivf.max_rows, kScanWarps * 4)));
  const unsigned blocks = std::max(1u, std::min(by_rows, ceil_div(4ull * sms, nq)));
  auto bytes_for = [&](uint64_t qc) { return qc * blocks * kc * sizeof(Cand) + 256 + (qc + qc * kc) * 4; };
  uint64_t qc = std::min<uint64_t>(nq, 65535);
  while (qc > 1 && bytes_for(qc) > budget / 2) qc = (qc + 1) / 2;
  Arena ar;
  const size_t o_cand = ar.add(qc * blocks * kc * sizeof(Cand)), o_words = ar.add((qc + qc * kc) * 4);
  void* w = later_scratch(ctx, st, ar.size());
  Cand* cand = at<Cand>(w, o_cand);
  unsigned* tickets = at<unsigned>(w, o_words);
  const uint32_t stride = ivf.nprobe + 1;
  for (uint64_t q0 = 0; q0 < nq; q0 += qc) {
    const uint32_t m = static_cast<uint32_t>(std::min<uint64_t>(qc, nq - q0));
    // The tickets and bound groups start zero (the last block of each
    // query leaves its own zero again).
    MNEMO_CUDA_CHECK(cudaMemsetAsync(tickets, 0, (qc + qc * kc) * 4, st));
    ScanTail tail;
    tail.ticket = tickets;
    tail.groups = tickets + qc;
    tail.out_ids = d_ids + q0 * k_out;
    tail.out_scores = d_scores + q0 * k_out;
    tail.k_out = k_out;
    tail.negate = s.metric == KeyMetric::l2;
    const ScanSpans sp{ivf.spans + q0 * stride, stride};
    launch_scan_spans(s, q + q0 * s.ld, qn + q0, m, kc, cand, blocks, tail, sp, st);
  }
}

}  // namespace mnemo::cuda
