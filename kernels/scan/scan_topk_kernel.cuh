// The fused scan's kernel and its dispatch over row widths, query blocks and
// list kinds, for one storage dtype and metric: included only by the
// generated translation units scan_topk_<dtype>_<metric>.cu (scan_topk_inst.cu.in,
// rows of a warp) and scan_short_<dtype>_<metric>.cu (scan_short_inst.cu.in,
// short rows), so its instances compile in parallel. scan_topk.cu holds the
// entry point.
#pragma once

#include <type_traits>

#include "scan/row_dot.cuh"
#include "scan/scan_tail.cuh"
#include "scan/scan_topk.h"

namespace mnemo::cuda {

namespace {

constexpr int kWarps = kScanWarps;
constexpr int kThreads = kScanThreads;

struct ScanSmem {
  // Shared-memory layout: queries [QB][ld] f32, then lists [warps][QB][k],
  // then counts. The query area, free once the rows are scored, holds the
  // last block's merge survivors (kRankMax entries at least).
  __host__ __device__ static size_t query_bytes(int qb, uint64_t ld) {
    const size_t q = qb * ld * 4, r = kRankMax * sizeof(Cand);
    return ((q > r ? q : r) + 15) / 16 * 16;
  }
  static size_t bytes(int qb, uint64_t ld, uint32_t k) {
    return query_bytes(qb, ld) + static_cast<size_t>(kWarps) * qb * k * sizeof(Cand) + kWarps * qb * sizeof(int);
  }
};

// Asks L2 for the rows of the warp's next step while this step's loads are
// in flight: more bytes outstanding per SM without more registers. The
// warp reads `at_once` consecutive rows from each of `rows` starts.
__device__ __forceinline__ void prefetch_rows(const unsigned char* base, uint32_t first, uint32_t stride, int rows,
                                              int at_once, uint32_t slots, size_t row_bytes, int lane) {
  for (int r = 0; r < rows; ++r) {
    const uint32_t x = first + r * stride;
    if (x >= slots) break;
    const unsigned char* p = base + x * row_bytes;
    const size_t bytes = min(static_cast<uint32_t>(at_once), slots - x) * row_bytes;
    for (size_t off = static_cast<size_t>(lane) * 128; off < bytes; off += 32 * 128)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
  }
}

// One set of instances serves plain and activation searches (s.act read at
// run time). Measured on the H200 against the plain instances that used to
// sit beside them (same binary, two rounds): 1q x 1M x 768 f32 0.691 vs
// 0.699 ms, L2 0.693-0.695 vs 0.699-0.701, 4 queries 1.01-1.04 vs 1.46-1.47,
// 2 queries 0.750-0.759 vs 0.743 ms.
//
// SPANS (inverted-file searches, QB = 1): CTA row blockIdx.y serves query
// blockIdx.y over its candidate rows, numbered 0 .. total through the
// query's span table (sp); its queries, norms, block lists, tail words and
// answer rows are offset by the query. Without spans the loop is the plain
// slot loop (the span code is compiled out).
//
// LPR: lanes reading one row (row_sums). Rows of fewer than 32 16-byte
// vectors take LPR < 32: the warp reads 32 / LPR consecutive rows at once
// and each group offers its own candidate. R: rows a lane reads a step.
//
// tail.start: a starting bound per query (a sampled k-th key, scan_sample.cu):
// rows whose keys fall below it are never offered.
template <class T, bool L2, int NVEC, int QB, class List, bool SPANS = false, int LPR = 32, int R = 2>
__global__ void __launch_bounds__(kThreads)
    scan_topk_kernel(StoreRef s, const float* __restrict__ queries, const float* __restrict__ qnorms, uint32_t nq,
                     uint32_t k, Cand* __restrict__ cand, ScanTail tail, ScanSpans sp) {
  static_assert(!SPANS || LPR == 32, "span scans read one row a warp");
  constexpr int RPW = 32 / LPR;  // rows a warp reads at once
  extern __shared__ __align__(16) unsigned char smem[];
  // Rows to scan: the slots, or the query's candidate rows.
  uint32_t n_rows = s.slots;
  const uint2* spans = nullptr;
  const uint32_t* listed = nullptr;  // a filter's list of slots, one a row
  if constexpr (SPANS) {
    const uint32_t y = blockIdx.y;
    queries += static_cast<uint64_t>(y) * s.ld;
    qnorms += y;
    cand += static_cast<uint64_t>(y) * gridDim.x * k;
    tail.ticket += y;
    tail.groups += static_cast<uint64_t>(y) * k;
    if (tail.out_ids) {
      tail.out_ids += y * tail.k_out;
      tail.out_scores += y * tail.k_out;
    } else {
      tail.lists += static_cast<uint64_t>(y) * k;
    }
    if (sp.slots) {
      const uint2 b = sp.bounds[y];
      listed = sp.slots + b.x;
      n_rows = b.y;
    } else if (sp.bounds) {
      const uint2 b = sp.bounds[y];
      spans = sp.spans + b.x;
      n_rows = b.y > 0 ? __ldg(&spans[b.y - 1].y) : 0;
    } else {
      spans = sp.spans + static_cast<uint64_t>(y) * sp.stride;
      n_rows = __ldg(&spans[sp.stride - 1].y);
    }
  }
  float* qs = reinterpret_cast<float*>(smem);
  const size_t q_bytes = ScanSmem::query_bytes(QB, s.ld);
  Cand* lists = reinterpret_cast<Cand*>(smem + q_bytes);
  int* counts = reinterpret_cast<int*>(lists + kWarps * QB * k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Query by query: no 64-bit division per element.
#pragma unroll
  for (int q = 0; q < QB; ++q)
    for (uint32_t i = threadIdx.x; i < s.ld; i += kThreads)
      qs[q * s.ld + i] = q < static_cast<int>(nq) ? queries[q * s.ld + i] : 0.0f;
  __syncthreads();

  List wl[QB];
  float qn[QB], lo[QB];
#pragma unroll
  for (int q = 0; q < QB; ++q) {
    wl[q] = make_list<List>(lists + (warp * QB + q) * k, k);
    qn[q] = q < static_cast<int>(nq) ? qnorms[q] : 0.0f;
    lo[q] = start_bound(tail.start, q);
  }
  const int grp = lane / LPR, sub = lane % LPR;
  const size_t row_bytes = s.ld * sizeof(T);
  const auto* base = static_cast<const unsigned char*>(s.vectors);
  const uint32_t stride = gridDim.x * kWarps * RPW;
  // R rows a lane per step (rows past the end re-read the first and are not
  // offered), slot metadata loaded ahead of the rows. Measured on the H200:
  // two rows beat one; four were slower for f16 at 768, with shared-memory
  // lists (0.69 vs 0.52 ms) and with register lists (0.68 vs 0.49 ms).
  // Rows of up to 512 bytes (one load a row per lane) take four.
  // Spans: the span of the warp's current row (rows only grow, so the
  // cursor only moves forward; every lane walks alike).
  uint32_t cur = 0;
  for (uint32_t row = (blockIdx.x * kWarps + warp) * RPW; row < n_rows; row += R * stride) {
    uint32_t slot[R];
    SlotMeta m[R];
    const unsigned char* rows[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint32_t x = row + r * stride + grp;
      if constexpr (SPANS) {
        if (listed) {
          slot[r] = x < n_rows ? __ldg(&listed[x]) : slot[0];
        } else if (x < n_rows) {
          uint2 e = __ldg(&spans[cur]);
          while (x >= e.y) e = __ldg(&spans[++cur]);
          slot[r] = x + e.x;  // modulo 2^32: the span's first slot minus its first row
        } else {
          slot[r] = slot[0];
        }
      } else {
        slot[r] = x < s.slots ? x : row;
      }
      m[r] = slot_meta<true>(s, slot[r]);
      m[r].live = m[r].live && x < n_rows;
      rows[r] = base + slot[r] * row_bytes;
    }
    if (!SPANS && tail.prefetch) prefetch_rows(base, row + R * stride, stride, R, RPW, s.slots, row_bytes, lane);
    float acc[R][QB];
    row_sums<T, L2, NVEC, QB, R, LPR>(rows, qs, s.ld, sub, acc);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      // A full-warp row's values are the same in every lane: the warp
      // admits or skips it as one.
      if (LPR == 32 && !m[r].live) continue;
#pragma unroll
      for (int q = 0; q < QB; ++q) {
        if (q >= static_cast<int>(nq)) break;
        const float key = key_of<true>(s, acc[r][q], qn[q], m[r]);
        if constexpr (LPR == 32) {
          if (key >= lo[q] && wl[q].admits(key, slot[r], s.ids)) wl[q].insert(key, slot[r], s.ids, lane);
        } else {
          // One candidate a group, offered by its first lane.
          wl[q].offer(sub == 0 && m[r].live && key >= lo[q], key, slot[r], s.ids, lane);
        }
      }
    }
  }
  finish_scan<List, QB>(wl, lists, counts, s.ids, nq, k, cand, tail, warp, lane, reinterpret_cast<Cand*>(smem),
                        static_cast<uint32_t>(q_bytes / sizeof(Cand)));
}

// One instance's launch with its shared memory.
template <class Kernel>
void launch_instance(Kernel kernel, dim3 grid, size_t smem, cudaStream_t st, const StoreRef& s, const float* q,
                     const float* qn, uint32_t nq, uint32_t k, Cand* cand, const ScanTail& tail, const ScanSpans& sp) {
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "scan smem");
  kernel<<<grid, kThreads, smem, st>>>(s, q, qn, nq, k, cand, tail, sp);
}

// Dimension-specialised trip counts: NVEC = 16-byte vectors per row.
template <class T, bool L2, int QB>
void dispatch_scan(const StoreRef& s, const float* q, const float* qn, uint32_t nq, uint32_t k, Cand* cand,
                   unsigned blocks, size_t smem, const ScanTail& tail, cudaStream_t st) {
  constexpr int V = Vec16<T>::kElems;
  auto go = [&](auto kernel) { launch_instance(kernel, blocks, smem, st, s, q, qn, nq, k, cand, tail, ScanSpans{}); };
  // Register lists up to 32 entries, one instance per common row width;
  // shared-memory lists beyond, at the run-time width for every row: on the
  // H200 that cost 1q x 1M f32 k=100 4.5% at 768 (0.989 ms for 776 rows
  // against 0.937 for 768) and nothing at 1024 (1.1825 against 1.1710),
  // for 90 fewer kernels to compile.
  if (k > 32) {
    go(scan_topk_kernel<T, L2, 0, QB, WarpList>);
    return;
  }
  switch (s.ld) {
    case 384: go(scan_topk_kernel<T, L2, 384 / V, QB, RegList>); break;
    case 512: go(scan_topk_kernel<T, L2, 512 / V, QB, RegList>); break;
    case 768: go(scan_topk_kernel<T, L2, 768 / V, QB, RegList>); break;
    case 1024: go(scan_topk_kernel<T, L2, 1024 / V, QB, RegList>); break;
    case 1536: go(scan_topk_kernel<T, L2, 1536 / V, QB, RegList>); break;
    default: go(scan_topk_kernel<T, L2, 0, QB, RegList>); break;
  }
}

// Short rows (up to 512 bytes): LPR lanes a row at the run-time width (one
// load a lane per row, so a compile-time trip count buys nothing), four
// rows a lane a step.
template <class T, bool L2, int QB, int LPR>
void dispatch_short(const StoreRef& s, const float* q, const float* qn, uint32_t nq, uint32_t k, Cand* cand,
                    unsigned blocks, size_t smem, const ScanTail& tail, cudaStream_t st) {
  if (k > 32)
    launch_instance(scan_topk_kernel<T, L2, 0, QB, WarpList, false, LPR, 4>, blocks, smem, st, s, q, qn, nq, k, cand,
                    tail, ScanSpans{});
  else
    launch_instance(scan_topk_kernel<T, L2, 0, QB, RegList, false, LPR, 4>, blocks, smem, st, s, q, qn, nq, k, cand,
                    tail, ScanSpans{});
}

// Queries a pass: two queries keep instances of their own: on the
// four-query ones they took 1.32 instead of 0.74 ms (H200, 2q x 1M x 768 f32).
inline int query_block(uint32_t nq) { return nq <= 1 ? 1 : nq <= 2 ? 2 : 4; }

}  // namespace

template <class T, bool L2>
void launch_scan_typed(const StoreRef& s, const float* q, const float* qn, uint32_t nq, uint32_t k, Cand* cand,
                       unsigned blocks, const ScanTail& tail, cudaStream_t st) {
  const int qb = query_block(nq);
  const size_t smem = ScanSmem::bytes(qb, s.ld, k);
  if (qb == 1)
    dispatch_scan<T, L2, 1>(s, q, qn, nq, k, cand, blocks, smem, tail, st);
  else if (qb == 2)
    dispatch_scan<T, L2, 2>(s, q, qn, nq, k, cand, blocks, smem, tail, st);
  else
    dispatch_scan<T, L2, 4>(s, q, qn, nq, k, cand, blocks, smem, tail, st);
}

template <class T, bool L2>
void launch_scan_short_typed(const StoreRef& s, const float* q, const float* qn, uint32_t nq, uint32_t k, Cand* cand,
                             unsigned blocks, const ScanTail& tail, int lanes, cudaStream_t st) {
  const int qb = query_block(nq);
  const size_t smem = ScanSmem::bytes(qb, s.ld, k);
  auto by_lanes = [&](auto qb_tag) {
    constexpr int QB = decltype(qb_tag)::value;
    if (lanes <= 4)
      dispatch_short<T, L2, QB, 4>(s, q, qn, nq, k, cand, blocks, smem, tail, st);
    else if (lanes <= 8)
      dispatch_short<T, L2, QB, 8>(s, q, qn, nq, k, cand, blocks, smem, tail, st);
    else if (lanes <= 16)
      dispatch_short<T, L2, QB, 16>(s, q, qn, nq, k, cand, blocks, smem, tail, st);
    else
      dispatch_short<T, L2, QB, 32>(s, q, qn, nq, k, cand, blocks, smem, tail, st);
  };
  if (qb == 1)
    by_lanes(std::integral_constant<int, 1>{});
  else if (qb == 2)
    by_lanes(std::integral_constant<int, 2>{});
  else
    by_lanes(std::integral_constant<int, 4>{});
}

// The span scan's instances: one query per CTA row (QB = 1), register lists
// at 768 and at the run-time width, shared-memory lists beyond 32 entries.
template <class T, bool L2>
void launch_scan_spans_typed(const StoreRef& s, const float* q, const float* qn, uint32_t nq, uint32_t k, Cand* cand,
                             unsigned blocks, const ScanTail& tail, const ScanSpans& sp, cudaStream_t st) {
  constexpr int V = Vec16<T>::kElems;
  const size_t smem = ScanSmem::bytes(1, s.ld, k);
  const dim3 grid(blocks, nq);
  auto go = [&](auto kernel) { launch_instance(kernel, grid, smem, st, s, q, qn, 1, k, cand, tail, sp); };
  // A filter's lists of slots gather rows from all over the store: four
  // rows a lane a step keep twice the loads in flight (latency, not the
  // bandwidth, bounds a gather).
  if (sp.slots) {
    if (k > 32)
      go(scan_topk_kernel<T, L2, 0, 1, WarpList, true, 32, 4>);
    else
      go(scan_topk_kernel<T, L2, 0, 1, RegList, true, 32, 4>);
    return;
  }
  if (k > 32)
    go(scan_topk_kernel<T, L2, 0, 1, WarpList, true>);
  else if (s.ld == 768)
    go(scan_topk_kernel<T, L2, 768 / V, 1, RegList, true>);
  else
    go(scan_topk_kernel<T, L2, 0, 1, RegList, true>);
}

}  // namespace mnemo::cuda
