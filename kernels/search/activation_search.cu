// Normalised activation search on the GPU. Min-max scaling needs each
// query's relevance range over all its candidates before any key is known,
// so a chunk of queries (sized to the workspace) is scored into relevance
// keys of every slot (the exact per-row kernel, NaN for non-candidates), the
// ranges are reduced, the keys formed in place with the formulas of
// core/activation.h (as the CPU's activation_search.cpp), and selected as
// any key rows are. The candidates' time and importance ranges do not
// depend on the query: they are reduced once per search (per query in an
// inverted-file search, whose candidates are the query's lists).
#include <algorithm>
#include <cub/block/block_reduce.cuh>
#include <limits>
#include <vector>

#include "core/backend.h"
#include "device/arena.h"
#include "device/exec_context.h"
#include "scan/row_dot.cuh"

namespace mnemo::cuda {

namespace {

constexpr int kThreads = 256;

// Partial ranges of one block: the candidates' times and importances.
struct MetaPart {
  double t_min, t_max;
  float imp_min, imp_max;
  unsigned long long count;
};

// Partial relevance range of one block of a query's row (NaN ignored).
struct RelPart {
  float lo, hi;
};

struct MetaJoin {
  __device__ MetaPart operator()(const MetaPart& a, const MetaPart& b) const {
    return MetaPart{fmin(a.t_min, b.t_min), fmax(a.t_max, b.t_max), fminf(a.imp_min, b.imp_min),
                    fmaxf(a.imp_max, b.imp_max), a.count + b.count};
  }
};

struct RelJoin {
  __device__ RelPart operator()(const RelPart& a, const RelPart& b) const {
    return RelPart{fminf(a.lo, b.lo), fmaxf(a.hi, b.hi)};
  }
};

__device__ __forceinline__ float inf_f() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ double inf_d() { return __longlong_as_double(0x7ff0000000000000ll); }
__device__ __forceinline__ MetaPart empty_meta() { return MetaPart{inf_d(), -inf_d(), inf_f(), -inf_f(), 0}; }
__device__ __forceinline__ RelPart empty_rel() { return RelPart{inf_f(), -inf_f()}; }

// parts[block]: the ranges of the candidates (live, allowed slots) that the
// block's grid-stride share of the slots holds.
__global__ void __launch_bounds__(kThreads) meta_ranges_kernel(StoreRef s, MetaPart* parts) {
  using Reduce = cub::BlockReduce<MetaPart, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  MetaPart p = empty_meta();
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < s.slots; i += gridDim.x * kThreads) {
    if (!slot_live(s, i)) continue;
    const double t = s.times[i];
    const float imp = s.importance[i];
    p.t_min = fmin(p.t_min, t);
    p.t_max = fmax(p.t_max, t);
    p.imp_min = fminf(p.imp_min, imp);
    p.imp_max = fmaxf(p.imp_max, imp);
    ++p.count;
  }
  const MetaPart r = Reduce(tmp).Reduce(p, MetaJoin{});
  if (threadIdx.x == 0) parts[blockIdx.x] = r;
}

// parts[q * gridDim.x + block]: the range of the non-NaN keys in the
// block's grid-stride share of row q (fminf and fmaxf skip NaN).
__global__ void __launch_bounds__(kThreads)
    rel_ranges_kernel(const float* __restrict__ keys, uint32_t n, RelPart* parts) {
  using Reduce = cub::BlockReduce<RelPart, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const float* row = keys + static_cast<uint64_t>(blockIdx.y) * n;
  RelPart p = empty_rel();
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < n; i += gridDim.x * kThreads) {
    const float v = row[i];
    p.lo = fminf(p.lo, v);
    p.hi = fmaxf(p.hi, v);
  }
  const RelPart r = Reduce(tmp).Reduce(p, RelJoin{});
  if (threadIdx.x == 0) parts[static_cast<uint64_t>(blockIdx.y) * gridDim.x + blockIdx.x] = r;
}

// Inverted-file searches: the candidates differ per query, so the meta
// ranges do too. rel[q * gridDim.x + block] and meta[...] alike: the
// ranges over the block's share of row q's candidates (its non-NaN keys).
__global__ void __launch_bounds__(kThreads)
    cand_ranges_kernel(StoreRef s, const float* __restrict__ keys, uint32_t n, RelPart* rel, MetaPart* meta) {
  using RelReduce = cub::BlockReduce<RelPart, kThreads>;
  using MetaReduce = cub::BlockReduce<MetaPart, kThreads>;
  __shared__ typename RelReduce::TempStorage rtmp;
  __shared__ typename MetaReduce::TempStorage mtmp;
  const float* row = keys + static_cast<uint64_t>(blockIdx.y) * n;
  RelPart r = empty_rel();
  MetaPart p = empty_meta();
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < n; i += gridDim.x * kThreads) {
    const float v = row[i];
    if (v != v) continue;
    r.lo = fminf(r.lo, v);
    r.hi = fmaxf(r.hi, v);
    const double t = s.times[i];
    const float imp = s.importance[i];
    p.t_min = fmin(p.t_min, t);
    p.t_max = fmax(p.t_max, t);
    p.imp_min = fminf(p.imp_min, imp);
    p.imp_max = fmaxf(p.imp_max, imp);
    ++p.count;
  }
  r = RelReduce(rtmp).Reduce(r, RelJoin{});
  p = MetaReduce(mtmp).Reduce(p, MetaJoin{});
  if (threadIdx.x == 0) {
    const uint64_t at = static_cast<uint64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
    rel[at] = r;
    meta[at] = p;
  }
}

// One block per query: its relevance parts and the meta parts (the
// search's, or with meta_stride > 0 the query's at q * meta_stride) into
// the query's ActRanges.
__global__ void __launch_bounds__(kThreads)
    finish_ranges_kernel(const RelPart* __restrict__ rel, uint32_t n_rel, const MetaPart* __restrict__ meta,
                         uint32_t n_meta, uint32_t meta_stride, ActRanges* out) {
  using RelReduce = cub::BlockReduce<RelPart, kThreads>;
  using MetaReduce = cub::BlockReduce<MetaPart, kThreads>;
  __shared__ typename RelReduce::TempStorage rtmp;
  __shared__ typename MetaReduce::TempStorage mtmp;
  const uint32_t q = blockIdx.x;
  RelPart r = empty_rel();
  for (uint32_t i = threadIdx.x; i < n_rel; i += kThreads) r = RelJoin{}(r, rel[static_cast<uint64_t>(q) * n_rel + i]);
  MetaPart m = empty_meta();
  meta += static_cast<uint64_t>(q) * meta_stride;
  for (uint32_t i = threadIdx.x; i < n_meta; i += kThreads) m = MetaJoin{}(m, meta[i]);
  r = RelReduce(rtmp).Reduce(r, RelJoin{});
  m = MetaReduce(mtmp).Reduce(m, MetaJoin{});
  if (threadIdx.x == 0) {
    ActRanges R;
    R.rel_min = r.lo;
    R.rel_max = r.hi;
    R.t_min = m.t_min;
    R.t_max = m.t_max;
    R.imp_min = m.imp_min;
    R.imp_max = m.imp_max;
    R.candidates = m.count;
    out[q] = R;
  }
}

// Relevance keys of row q (NaN: not a candidate) into activation keys, in
// place, with the CPU's operations: every term min-max scaled over the
// query's ranges (recency through the recencies of the time range's ends).
// a carries the weights, now and 1 / half-life.
__global__ void __launch_bounds__(kThreads)
    scale_keys_kernel(StoreRef a, const ActRanges* __restrict__ ranges, uint32_t n, float* keys) {
  __shared__ ActRanges R;
  __shared__ float rec_lo, rec_hi;
  if (threadIdx.x == 0) {
    R = ranges[blockIdx.y];
    rec_lo = recency(a.now, R.t_min, a.inv_half_life);
    rec_hi = recency(a.now, R.t_max, a.inv_half_life);
  }
  __syncthreads();
  float* row = keys + static_cast<uint64_t>(blockIdx.y) * n;
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < n; i += gridDim.x * kThreads) {
    const float v = row[i];
    if (v != v) continue;
    const float rel = min_max(v, R.rel_min, R.rel_max);
    const float imp = min_max(a.importance[i], R.imp_min, R.imp_max);
    const float bias = a.apply_bias ? a.biases[i] : 0.0f;
    const float rec = min_max(recency(a.now, a.times[i], a.inv_half_life), rec_lo, rec_hi);
    row[i] = fmaf(a.w_rel, rel, activation_extra(a.w_rec, rec, a.w_imp, imp, bias));
  }
}

ActRanges empty_ranges() {
  ActRanges r;
  r.rel_min = r.imp_min = std::numeric_limits<float>::infinity();
  r.rel_max = r.imp_max = -std::numeric_limits<float>::infinity();
  r.t_min = std::numeric_limits<double>::infinity();
  r.t_max = -std::numeric_limits<double>::infinity();
  r.candidates = 0;
  return r;
}

}  // namespace

void normalized_device_search(ExecContext& ctx, cudaStream_t st, const StoreRef& s, const Activation& act,
                              const float* q, const float* qn, uint64_t nq, uint64_t k, uint64_t k_out,
                              uint64_t workspace, int sm_count, uint64_t* d_ids, float* d_scores, const IvfLists* ivf) {
  const uint32_t n = s.slots;
  const uint32_t kc = search_list_length(n, k, false);
  const bool small = kc <= static_cast<uint32_t>(kSmallKMax);
  const bool given = act.ranges != nullptr;
  const uint64_t budget = std::max<uint64_t>(workspace, 64ull << 20);
  if (n == 0) {
    if (act.ranges_out) {
      std::fill(act.ranges_out, act.ranges_out + nq, empty_ranges());
      return;
    }
    launch_emit(nullptr, static_cast<uint32_t>(nq), kc, 0, k_out, s.ids, s.metric, d_ids, d_scores, st);
    return;
  }

  // Lists of every query and the ranges of every query, for the whole call.
  Arena fixed;
  const size_t o_lists = fixed.add(nq * kc * sizeof(Cand)), o_ranges = fixed.add(nq * sizeof(ActRanges));
  // An inverted-file search's coarse step, queued on st, may still read the
  // buffers: a growth (rare: they only grow) waits for it first.
  if (ivf && fixed.size() > ctx.work2.size()) MNEMO_CUDA_CHECK(cudaStreamSynchronize(st));
  ctx.work2.reserve(fixed.size());
  Cand* lists = at<Cand>(ctx.work2.get(), o_lists);
  ActRanges* ranges = at<ActRanges>(ctx.work2.get(), o_ranges);
  if (given) MNEMO_CUDA_CHECK(cudaMemcpyAsync(ranges, act.ranges, nq * sizeof(ActRanges), cudaMemcpyHostToDevice, st));

  // Relevance alone: no bias, no activation in the scored keys.
  StoreRef rel = s;
  rel.act = false;
  rel.apply_bias = false;
  // The scaling's parameters (the kernels read the store's arrays from a).
  StoreRef a = s;
  a.w_rel = act.w_rel;
  a.w_rec = act.w_rec;
  a.w_imp = act.w_imp;
  a.now = act.now;
  a.inv_half_life = 1.0 / act.half_life;  // as the CPU: 0 for an infinite half-life

  // Query chunk from the budget: keys [qc x n] and the selection's scratch.
  const uint32_t n_meta = std::max(1u, std::min(1024u, ceil_div(n, kThreads * 8)));
  const uint64_t row = static_cast<uint64_t>(n) * 4;
  uint64_t qc = std::max<uint64_t>(1, std::min<uint64_t>({nq, budget / 2 / row, 65535}));
  uint32_t n_rel = 1, bpr = 1;
  size_t o_keys = 0, o_rel = 0, o_meta = 0, o_sel = 0, sel = 0;
  Arena ar;
  for (;;) {
    n_rel = std::max(1u, std::min(ceil_div(2ull * sm_count, qc), ceil_div(n, kThreads * 16)));
    bpr = std::max(1u, std::min(ceil_div(2ull * sm_count, qc), ceil_div(n, 4096)));
    sel = small ? qc * bpr * kc * sizeof(Cand) : large_select_temp_bytes(static_cast<uint32_t>(qc), kc);
    ar = Arena();
    o_keys = ar.add(qc * row);
    o_rel = ar.add(qc * n_rel * sizeof(RelPart));
    // Inverted-file searches: meta parts per query, as the relevance parts.
    o_meta = ar.add((ivf ? std::max<uint64_t>(n_meta, qc * n_rel) : n_meta) * sizeof(MetaPart));
    o_sel = ar.add(sel);
    if (ar.size() <= budget || qc == 1) break;
    qc = (qc + 1) / 2;
  }
  if (ivf && ar.size() > ctx.work.size()) MNEMO_CUDA_CHECK(cudaStreamSynchronize(st));
  void* w = ctx.scratch(ar.size());
  float* keys = at<float>(w, o_keys);
  RelPart* rel_parts = at<RelPart>(w, o_rel);
  MetaPart* meta_parts = at<MetaPart>(w, o_meta);
  if (!given && !ivf) {
    meta_ranges_kernel<<<n_meta, kThreads, 0, st>>>(s, meta_parts);
    MNEMO_CUDA_LAUNCHED("meta_ranges_kernel");
  }
  const unsigned n_scale = std::max(1u, std::min(ceil_div(4ull * sm_count, qc), ceil_div(n, kThreads * 8)));
  for (uint64_t q0 = 0; q0 < nq; q0 += qc) {
    const uint32_t m = static_cast<uint32_t>(std::min<uint64_t>(qc, nq - q0));
    launch_score_rows(rel, q + q0 * s.ld, qn + q0, m, keys, static_cast<unsigned>(sm_count), st);
    // Inverted-file searches: slots outside the query's lists and hot tier
    // are no candidates (NaN), as the excluded slots.
    if (ivf) launch_ivf_mask(*ivf, static_cast<uint32_t>(q0), m, n, keys, st);
    if (!given && ivf) {
      cand_ranges_kernel<<<dim3(n_rel, m), kThreads, 0, st>>>(s, keys, n, rel_parts, meta_parts);
      MNEMO_CUDA_LAUNCHED("cand_ranges_kernel");
      finish_ranges_kernel<<<m, kThreads, 0, st>>>(rel_parts, n_rel, meta_parts, n_rel, n_rel, ranges + q0);
      MNEMO_CUDA_LAUNCHED("finish_ranges_kernel");
    } else if (!given) {
      rel_ranges_kernel<<<dim3(n_rel, m), kThreads, 0, st>>>(keys, n, rel_parts);
      MNEMO_CUDA_LAUNCHED("rel_ranges_kernel");
      finish_ranges_kernel<<<m, kThreads, 0, st>>>(rel_parts, n_rel, meta_parts, n_meta, 0, ranges + q0);
      MNEMO_CUDA_LAUNCHED("finish_ranges_kernel");
    }
    if (act.ranges_out) continue;
    scale_keys_kernel<<<dim3(n_scale, m), kThreads, 0, st>>>(a, ranges + q0, n, keys);
    MNEMO_CUDA_LAUNCHED("scale_keys_kernel");
    if (small) {
      Cand* cand = at<Cand>(w, o_sel);
      const uint64_t stride = static_cast<uint64_t>(bpr) * kc;
      launch_select_rows(keys, false, s, nullptr, m, n, 0, kc, bpr, cand, stride, 0, nullptr, st);
      launch_merge(cand, m, stride, kc, s.ids, lists + q0 * kc, st);
    } else {
      launch_large_select(keys, m, n, kc, s.ids, lists + q0 * kc, at<void>(w, o_sel), sel, st);
    }
  }
  if (act.ranges_out) {
    // Host memory of the caller: read back once every chunk is done.
    std::vector<ActRanges> back(nq);
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(back.data(), ranges, nq * sizeof(ActRanges), cudaMemcpyDeviceToHost, st));
    MNEMO_CUDA_CHECK(cudaStreamSynchronize(st));
    std::copy(back.begin(), back.end(), act.ranges_out);
    return;
  }
  const uint32_t emit_k = static_cast<uint32_t>(std::min<uint64_t>(k, kc));
  launch_emit(lists, static_cast<uint32_t>(nq), kc, emit_k, k_out, s.ids, s.metric, d_ids, d_scores, st);
}

}  // namespace mnemo::cuda
