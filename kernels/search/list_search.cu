// A filter's selective plan on the GPU (SearchArgs::lists): each query
// reads only the rows its filter matched, through the span scan of the
// inverted-file search reading a list of slots of its own per query (the
// store's lists uploaded as they are: no per-row work on the host). Lists
// that the span scan's selection cannot hold (k beyond kSmallKMax) go query
// by query through the masked search instead.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "device/arena.h"
#include "device/cuda_backend.h"
#include "device/device_store.h"
#include "device/env_knob.h"
#include "scan/gather_scan.h"
#include "scan/scan_tail.cuh"
#include "search/ivf_search.h"
#include "search/list_scan.h"
#include "search/search_kernels.h"

namespace mnemo::cuda {

StoreRef list_store_ref(const DeviceStore& ds, const StoreView& v, const SearchArgs& a) {
  StoreRef s{ds.vectors(),
             v.dtype,
             ds.ld(),
             static_cast<uint32_t>(v.dim),
             static_cast<uint32_t>(v.slots),
             ds.ids(),
             ds.norms(),
             ds.biases(),
             nullptr,
             a.apply_bias,
             v.metric == Metric::l2sq  ? KeyMetric::l2
             : v.metric == Metric::dot ? KeyMetric::dot
                                       : KeyMetric::cosine,
             false};
  s.times = ds.times();
  s.importance = ds.importance();
  if (a.act.on) {
    s.act = true;
    s.w_rel = a.act.w_rel;
    s.w_rec = a.act.w_rec;
    s.w_imp = a.act.w_imp;
    s.now = a.act.now;
    s.inv_half_life = 1.0 / a.act.half_life;
  }
  return s;
}

void launch_list_scan(ExecContext& ctx, cudaStream_t st, const StoreRef& s, const float* q, const float* qn,
                      uint64_t nq, uint64_t k, const uint32_t* slots, const uint2* bounds, uint32_t longest,
                      int sm_count, uint64_t workspace, uint64_t* ids, float* scores) {
  if (nq == 0) return;
  const uint32_t kc = ivf_list_length(longest, k);
  const auto sms = static_cast<unsigned>(sm_count);
  // Blocks per query from the longest list (four rows a warp at least),
  // fewer where many queries fill the machine, but never so few that the
  // longest list alone holds a block to more than kRowsPerBlock rows: lists
  // differ by decades, and one block reading a long one would finish last.
  constexpr unsigned kRowsPerBlock = 32768;
  // The staged gather (gather_scan.h) serves a pass whose longest list
  // times its queries reaches MNEMO_GATHER_MIN_ROWS slots (131072 unless
  // set; 1 in the tests of its path), a warp taking chunks of 32 entries,
  // two a warp at least so that its copies run ahead of its sums. H200,
  // 10M x 192 f16, scan ms against the span scan: one query 0.373 / 0.576
  // at 2.16M rows, 0.196 / 0.277 at 960k, 0.092 / 0.112 at 297k, but
  // 0.0675 / 0.058 at 100k and 0.055 / 0.032 at 10k, where its grid leaves
  // the SMs few warps and a row costs it about 110 instructions; 64 queries
  // over one list 1.225 / 2.416 at 100k rows, 10.2 / 15.1 at 990k.
  static const auto min_rows = static_cast<uint64_t>(env_positive("MNEMO_GATHER_MIN_ROWS", 131072));
  const bool gather = static_cast<uint64_t>(longest) * nq >= min_rows && gather_scan_usable(s, kc);
  const unsigned least = gather ? kScanWarps * 64 : kScanWarps * 4;
  const unsigned by_rows = std::max(1u, std::min(sms * 4, ceil_div(std::max(longest, 1u), least)));
  const unsigned spread = std::max(ceil_div(4ull * sms, nq), ceil_div(longest, kRowsPerBlock));
  const unsigned blocks = std::max(1u, std::min(by_rows, spread));
  // Query chunks whose candidate lists fit half the workspace.
  const uint64_t budget = std::max<uint64_t>(workspace, 64ull << 20);
  auto bytes_for = [&](uint64_t c) { return c * blocks * kc * sizeof(Cand) + 256 + (c + c * kc) * 4; };
  uint64_t qc = std::min<uint64_t>(nq, 65535);
  while (qc > 1 && bytes_for(qc) > budget / 2) qc = (qc + 1) / 2;
  Arena w;
  const size_t o_cand = w.add(qc * blocks * kc * sizeof(Cand)), o_words = w.add((qc + qc * kc) * 4);
  void* scratch = ctx.scratch(w.size());
  Cand* cand = at<Cand>(scratch, o_cand);
  unsigned* tickets = at<unsigned>(scratch, o_words);
  const uint64_t ld = s.ld;
  for (uint64_t q0 = 0; q0 < nq; q0 += qc) {
    const auto m = static_cast<uint32_t>(std::min<uint64_t>(qc, nq - q0));
    MNEMO_CUDA_CHECK(cudaMemsetAsync(tickets, 0, (qc + qc * kc) * 4, st));
    ScanTail tail;
    tail.ticket = tickets;
    tail.groups = tickets + qc;
    tail.out_ids = ids + q0 * k;
    tail.out_scores = scores + q0 * k;
    tail.k_out = k;
    tail.negate = s.metric == KeyMetric::l2;
    ScanSpans sp;
    sp.slots = slots;
    sp.bounds = bounds + q0;
    if (gather)
      launch_gather_scan(s, q + q0 * ld, qn + q0, m, kc, cand, blocks, tail, sp, st);
    else
      launch_scan_spans(s, q + q0 * ld, qn + q0, m, kc, cand, blocks, tail, sp, st);
  }
}

ListIo stage_list_io(ExecContext& ctx, cudaStream_t st, const float* queries, uint64_t nq, uint64_t dim, uint64_t ld,
                     uint64_t k) {
  Arena io;
  const size_t o_q = io.add(nq * ld * 4), o_qn = io.add(nq * 4), o_ids = io.add(nq * k * 8),
               o_scores = io.add(nq * k * 4);
  // Growing frees the old buffer: earlier work on this context goes first.
  MNEMO_CUDA_CHECK(cudaEventSynchronize(ctx.last_use));
  ctx.io.reserve(io.size());
  void* base = ctx.io.get();
  const ListIo out{at<float>(base, o_q), at<float>(base, o_qn), at<uint64_t>(base, o_ids), at<float>(base, o_scores)};
  if (ld != dim) MNEMO_CUDA_CHECK(cudaMemsetAsync(out.q, 0, nq * ld * 4, st));
  MNEMO_CUDA_CHECK(cudaMemcpy2DAsync(out.q, ld * 4, queries, dim * 4, dim * 4, nq, cudaMemcpyHostToDevice, st));
  launch_row_norms(out.q, static_cast<uint32_t>(nq), ld, out.qn, st);
  return out;
}

void finish_list_io(ExecContext& ctx, cudaStream_t st, const ListIo& io, uint64_t nq, uint64_t k, uint64_t* ids,
                    float* scores) {
  MNEMO_CUDA_CHECK(cudaMemcpyAsync(ids, io.ids, nq * k * 8, cudaMemcpyDeviceToHost, st));
  MNEMO_CUDA_CHECK(cudaMemcpyAsync(scores, io.scores, nq * k * 4, cudaMemcpyDeviceToHost, st));
  MNEMO_CUDA_CHECK(cudaEventRecord(ctx.last_use, st));
  ctx.sync();
}

void CudaBackend::search_lists(const SearchArgs& a) {
  const auto* ds = static_cast<const DeviceStore*>(a.mirror);
  const StoreView& v = *a.store;
  const SlotLists& L = *a.lists;
  const uint64_t nq = a.nq, k = a.k;
  const auto slots = static_cast<uint32_t>(v.slots);
  const auto longest = static_cast<uint32_t>(std::min<uint64_t>(L.longest, slots));
  if (!ivf_scans(longest, k, false)) {
    std::vector<uint64_t> bits((slots + 63) / 64, 0);
    for (uint64_t q = 0; q < nq; ++q) {
      for (uint64_t j = L.bounds[2 * q]; j < L.bounds[2 * q + 1]; ++j)
        bits[L.slots[j] >> 6] |= uint64_t{1} << (L.slots[j] & 63);
      SearchArgs one = a;
      one.lists = nullptr;
      one.nq = 1;
      one.queries = a.queries + q * v.dim;
      one.ids = a.ids + q * k;
      one.scores = a.scores + q * k;
      one.allow = bits.data();
      search(one);
      for (uint64_t j = L.bounds[2 * q]; j < L.bounds[2 * q + 1]; ++j) bits[L.slots[j] >> 6] = 0;
    }
    return;
  }
  // The lists' extent in L.slots and each query's (first, count) in it.
  uint64_t lo = UINT64_MAX, hi = 0;
  std::vector<uint2> bounds(nq);
  for (uint64_t q = 0; q < nq; ++q) {
    const uint64_t b = L.bounds[2 * q], e = L.bounds[2 * q + 1];
    if (b < e) lo = std::min(lo, b), hi = std::max(hi, e);
  }
  if (lo > hi) lo = hi = 0;
  if (hi - lo >= 0xffffffffull) fail(Code::unsupported, "a filtered search's candidate lists hold 2^32 slots or more");
  for (uint64_t q = 0; q < nq; ++q) {
    const uint64_t b = L.bounds[2 * q], e = L.bounds[2 * q + 1];
    bounds[q] = b < e ? make_uint2(static_cast<uint32_t>(b - lo), static_cast<uint32_t>(e - b)) : make_uint2(0, 0);
  }
  const uint64_t listed = hi - lo;
  auto ctx = pool_.acquire();
  cudaStream_t st = ctx->stream;
  const uint64_t ld = ds->ld();
  const StoreRef s = list_store_ref(*ds, v, a);
  const ListIo io = stage_list_io(*ctx, st, a.queries, nq, v.dim, ld, k);
  Arena w;
  const size_t o_slots = w.add(std::max<uint64_t>(listed, 1) * 4), o_bounds = w.add(nq * 8);
  ctx->work2.reserve(w.size());
  auto* d_slots = at<uint32_t>(ctx->work2.get(), o_slots);
  auto* d_bounds = at<uint2>(ctx->work2.get(), o_bounds);
  if (listed > 0) MNEMO_CUDA_CHECK(cudaMemcpyAsync(d_slots, L.slots + lo, listed * 4, cudaMemcpyHostToDevice, st));
  MNEMO_CUDA_CHECK(cudaMemcpyAsync(d_bounds, bounds.data(), nq * 8, cudaMemcpyHostToDevice, st));
  launch_list_scan(*ctx, st, s, io.q, io.qn, nq, k, d_slots, d_bounds, longest, sm_count_, cfg_.workspace_bytes, io.ids,
                   io.scores);
  finish_list_io(*ctx, st, io, nq, k, a.ids, a.scores);
}

}  // namespace mnemo::cuda
