// Store search on the GPU: chooses the fused scan (few queries) or tiled
// GEMM + selection (query batches), small-k lists or radix selection (large
// k), and exact re-scoring where candidates came from reduced precision or
// the L2 expansion. Workspace stays within the runtime's bound.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "batch/fused_short.h"
#include "batch/fused_wide.h"
#include "device/arena.h"
#include "device/cuda_backend.h"
#include "device/device_args.h"
#include "device/device_store.h"
#include "device/env_knob.h"
#include "search/ivf_search.h"
#include "search/search_kernels.h"
#include "select/compact_select.h"

namespace mnemo::cuda {

namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

KeyMetric key_metric(Metric m) {
  return m == Metric::l2sq ? KeyMetric::l2 : m == Metric::dot ? KeyMetric::dot : KeyMetric::cosine;
}

// Uploads host queries [nq x dim] into device rows of ld (zero padded).
void upload_queries(ExecContext& ctx, const float* host, uint64_t nq, uint64_t dim, uint64_t ld, float* dev) {
  if (ld != dim) MNEMO_CUDA_CHECK(cudaMemsetAsync(dev, 0, nq * ld * 4, ctx.stream));
  const size_t bytes = nq * dim * 4;
  const float* src = host;
  if (bytes <= ctx.staging.size()) {  // through pinned memory, truly async
    ctx.staging.reserve(bytes);
    std::memcpy(ctx.staging.get(), host, bytes);
    src = ctx.staging.get<float>();
  }
  MNEMO_CUDA_CHECK(cudaMemcpy2DAsync(dev, ld * 4, src, dim * 4, dim * 4, nq, cudaMemcpyHostToDevice, ctx.stream));
}

// cuBLAS work of one call on the call's stream, the context's own after.
class BlasOn {
 public:
  BlasOn(cublasHandle_t h, cudaStream_t st, cudaStream_t home) : h_(h), home_(home) {
    MNEMO_BLAS_CHECK(cublasSetStream(h_, st));
  }
  ~BlasOn() { cublasSetStream(h_, home_); }
  BlasOn(const BlasOn&) = delete;
  BlasOn& operator=(const BlasOn&) = delete;

 private:
  cublasHandle_t h_;
  cudaStream_t home_;
};

void gemm(ExecContext& ctx, const StoreRef& s, bool fast, uint32_t first, uint32_t tn, const void* qmat,
          cudaDataType_t qtype, uint32_t qc, const void* widened, float* out) {
  const float alpha = 1.0f, beta = 0.0f;
  const void* A;
  cudaDataType_t atype;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (widened) {
    A = widened;  // EXACT over f16/bf16 storage: the tile widened to f32
    atype = CUDA_R_32F;
  } else {
    A = static_cast<const unsigned char*>(s.vectors) + static_cast<uint64_t>(first) * s.ld * dtype_size(s.dtype);
    atype = cuda_type(s.dtype);
    if (s.dtype == DType::f32 && fast) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  }
  // Column-major view: C[tn x qc] = A^T[tn x dim] * Q[dim x qc].
  MNEMO_BLAS_CHECK(cublasGemmEx(ctx.blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(tn), static_cast<int>(qc),
                                static_cast<int>(s.dim), &alpha, A, atype, static_cast<int>(s.ld), qmat, qtype,
                                static_cast<int>(s.ld), &beta, out, CUDA_R_32F, static_cast<int>(tn), compute,
                                CUBLAS_GEMM_DEFAULT));
}

// Bytes of one GEMM score tile on the small-k path: unbounded (the budget
// decides) unless MNEMO_SEARCH_TILE_MB sets it. Tiles sized to stay in the
// H200's L2 (24 MB) were measured slower: 2.35 against 1.99 ms for
// 100q x 1M x 768 FAST and 119 against 58 ms for 10000q x 1M x 128, the
// smaller cuBLAS calls losing more than the DRAM round trip costs.
uint64_t l2_tile_bytes() {
  static const uint64_t bytes = [] {
    const char* e = std::getenv("MNEMO_SEARCH_TILE_MB");
    const long mb = e ? std::strtol(e, nullptr, 10) : 0;
    return mb > 0 ? static_cast<uint64_t>(mb) << 20 : ~0ull;
  }();
  return bytes;
}

// Whether the fused scan prefetches each warp's next rows into L2: 16-bit
// rows of more than 512 bytes and at most 1536. On short rows (the short-row instances) it
// cost time on the H200, 1q x 1 GB, k = 10: 64 x f16 0.558 ms with it
// against 0.487 without, 128 x f16 0.559 against 0.484, 256 x f16 0.538
// against 0.467. MNEMO_SCAN_PREFETCH = 0 / 1 overrides it (for measuring).
bool scan_prefetch(const StoreRef& s) {
  static const int forced = env_int("MNEMO_SCAN_PREFETCH", -1);
  if (forced >= 0) return forced != 0;
  // 16-bit rows past 512 bytes, up to 1536: a warp's next rows for all the
  // resident warps then fit L2 (about 8,448 warps of two rows: 13 MB). At
  // 2000 bytes and beyond the prefetched rows were evicted before use and
  // read twice (H200, one query over 1 GiB of 4096-wide f16: 1.84 GB read,
  // 0.403 ms against 0.271 without it).
  return s.dtype != DType::f32 && scan_lanes(s) == 0 && s.ld * 2 <= 1536;
}

// Whether the fused scan's last block merges the block lists (else a
// separate merge kernel does). MNEMO_SCAN_TAIL = 0 turns it off (for
// measuring).
bool scan_tail_merge() {
  static const bool on = env_int("MNEMO_SCAN_TAIL", 1) != 0;
  return on;
}

// Whether the single-query scans fold shared-memory lists by insertion, as
// before the ranks by binary search (MNEMO_SCAN_FOLD=1, for measuring).
bool scan_fold() {
  static const bool on = env_int("MNEMO_SCAN_FOLD", 0) == 1;
  return on;
}

// Whether the single-pass scans' blocks append their lists (ScanTail::fill)
// rather than write k entries each at their place (MNEMO_SCAN_COMPACT=0,
// for measuring).
bool scan_compact() {
  static const bool on = env_int("MNEMO_SCAN_COMPACT", 1) != 0;
  return on;
}

// Whether the single-pass scans keep the lists of kc entries for a pass of
// `queries` queries (else exact keys of every row, then the radix
// selection). Measured on the H200 (1 GB stores, GPU ms of the search, the
// scan against the score pass, `MNEMO_SCAN_LIST_MAX=1` for the latter):
// - Lists past 128 entries cut the scans' blocks an SM: one query at k = 192
//   or 256 took 0.58-1.09 ms against 0.30-0.45 (64, 384 and 1536 x f16,
//   128 and 768 x f32), four queries at k = 256 5.5-6.3 ms against 0.75-0.95.
//   At k = 128 the tensor-core and bulk-copy scans, and one query on any
//   scan, were ahead or even in 10 of 12 cells.
// - The row-by-row scan (f32 rows past 256 dims) of 2-4 queries at k = 33
//   to 128: 0.54-1.29 ms against 0.33-0.39 (384, 768, 1536, 4096 x f32);
//   of 4 queries at k = 10 (its four-query instance): 0.52-0.80 against
//   0.33-0.39 (384, 768, 1536 x f32). Two queries at k = 10 keep it (768 x
//   f32: 0.274 against 0.340).
// MNEMO_SCAN_LIST_MAX=N keeps lists up to N entries on every scan (for
// measuring).
bool scan_lists_wanted(uint32_t queries, uint32_t kc, bool tensor_or_bulk) {
  static const int forced = env_int("MNEMO_SCAN_LIST_MAX", 0);
  if (forced > 0) return kc <= static_cast<uint32_t>(forced);
  if (kc > 128) return false;
  return tensor_or_bulk || queries == 1 || (queries == 2 && kc <= 32);
}

// Whether a flat activation search over `slots` slots forms the memory terms
// in a pass ahead of the scan. On an H200, 1q x 768 f32, activation over
// plain was 1.043x ahead against 1.065x inline at 2^17 slots, 1.007x against
// 1.040-1.046x at 1M (the pass: 6-6.6 us). Smaller stores keep the inline
// terms, unmeasured against the pass's launch. MNEMO_ACT_TERMS = 0 / 1
// overrides it (for measuring).
bool act_terms_wanted(uint32_t slots) {
  static const int forced = env_int("MNEMO_ACT_TERMS", -1);
  if (forced >= 0) return forced != 0;
  return slots >= (1u << 17);
}

}  // namespace

void device_search(ExecContext& ctx, cudaStream_t st, const StoreRef& s0, const float* q, const float* qn, uint64_t nq,
                   uint64_t k, uint64_t k_out, bool fast, uint64_t workspace, int sm_count, uint64_t* d_ids,
                   float* d_scores, const QueryMask* mask) {
  StoreRef s = s0;
  const uint64_t ld = s.ld;
  const uint32_t slots = s.slots;
  const bool use_gemm = nq >= kGemmMinQueries && slots > 0;
  // Candidates from the GEMM path are always re-scored by the per-row exact
  // kernel (keeping extra so near-ties survive): FAST and L2 (expanded) keys
  // need it, and a cuBLAS result for a row may depend on the GEMM's shape,
  // so only re-scored keys are the same in a store of any size (a shard of
  // a sharded store, and the unsharded store, return the same bits).
  const bool rescore = use_gemm;
  const uint32_t kc = search_list_length(slots, k, rescore);
  const bool small = kc <= static_cast<uint32_t>(kSmallKMax);
  const uint64_t budget = std::max<uint64_t>(workspace, 64ull << 20);

  Arena fixed;
  const size_t o_lists = fixed.add(nq * kc * sizeof(Cand)), o_qt = fixed.add(nq * ld * 2);
  ctx.work2.reserve(fixed.size());
  void* fb = ctx.work2.get();
  Cand* lists = at<Cand>(fb, o_lists);

  if (slots == 0) {
    launch_emit(lists, static_cast<uint32_t>(nq), kc, 0, k_out, s.ids, s.metric, d_ids, d_scores, st);
    return;
  }
  // Batches with short lists take a GEMM with the selection in its
  // epilogue. FAST: over short rows the kernel with the queries in
  // registers (fused_short.h), over longer ones the kernel that streams the
  // queries with the rows (fused_wide.h), unless MNEMO_FUSED_GEMM forces the
  // first fused kernel. EXACT over f32 rows: the streaming kernel with
  // split-TF32 keys. Asked once, as the answers query the device.
  // The fused kernels take the queries in the storage dtype: 16-bit copies
  // go to o_qt (converted in that branch).
  const void* q_store = s.dtype == DType::f32 ? static_cast<const void*>(q) : at<void>(fb, o_qt);
  enum class Fused { none, short_rows, first, wide } fused = Fused::none;
  if (use_gemm && small) {
    if (fast && fused_short_usable(slots, kc, s.dtype, ld))
      fused = Fused::short_rows;
    else if (fast && fused_gemm_wanted(kc, s.dtype, ld))
      fused = Fused::first;
    else if (fused_wide_usable(slots, kc, s.dtype, ld, q_store, fast))
      fused = Fused::wide;
  }
  // Per-query masks serve the long-row list kernel alone (the caller asks
  // dense_mask_usable first).
  if (mask && fused != Fused::wide) fail(Code::internal, "per-query masks without the long-row batch kernel");
  // Batches with longer lists over long rows: the long-row kernel writes
  // the candidates above a sampled bound, an exact selection takes kc of
  // them (its dense fallback needs a key row per query in the workspace).
  const bool emit = use_gemm && kc > static_cast<uint32_t>(kFusedMaxList) && slots * 12ull <= budget / 2 &&
                    fused_wide_emit_usable(slots, static_cast<uint32_t>(nq), kc, s.dtype, ld, q_store, fast);
  // The fused kernels' 16-bit query copy (unit length for the short-row
  // kernel's cosine keys).
  if ((emit || fused != Fused::none) && s.dtype != DType::f32) {
    if (fused == Fused::short_rows && s.metric == KeyMetric::cosine)
      launch_f32_to_unit(s.dtype, q, at<void>(fb, o_qt), nq, ld, qn, st);
    else
      launch_f32_to(s.dtype, q, at<void>(fb, o_qt), nq * ld, st);
  }
  // One query over 16-bit rows of the widths the bulk-copy scan is built
  // for takes it; other 16-bit searches the tensor-core scan
  // (mma_scan_kernel.cuh); f32 rows the row-by-row scans. Measured on an
  // H100 (1 GB of f16 rows, k = 10): one query over 384 and 1536 wide rows
  // 0.389 and 0.379 ms on the bulk-copy scan, 0.445 and 0.457 on the
  // tensor-core scan; four queries 1.748 and 1.087 against 0.490 and 0.543.
  const uint32_t g4 = static_cast<uint32_t>(std::min<uint64_t>(nq, 4));
  bool bulk = false, mma = false, scan = !use_gemm && small;
  if (scan) {
    bulk = bulk_scan_usable(s, static_cast<uint32_t>(nq), kc);
    mma = !bulk && mma_scan_usable(s, g4, kc);
    scan = scan_lists_wanted(g4, kc, bulk || mma);
  }
  if (scan) {
    // One launch per group of 4 queries, from the scan to the user's ids
    // and scores (the last block merges and emits).
    const unsigned blocks = bulk  ? bulk_scan_blocks(s, static_cast<unsigned>(sm_count))
                            : mma ? mma_scan_blocks(s, g4, kc, static_cast<unsigned>(sm_count))
                                  : scan_blocks(s, static_cast<unsigned>(sm_count));
    // Long lists start from a sampled bound (scan_sample.cu): its keys
    // after the block lists in the scratch, the bounds in counter words
    // 12-15 (the sampling pass sets them; nothing else uses them).
    const uint32_t n_sample = scan_sample_count(s, kc, g4, mma);
    const int lanes = bulk || scan_lanes(s) == 0 ? 32 : scan_lanes(s);
    const uint64_t cand_n = 4ull * blocks * kc;
    Cand* cand = static_cast<Cand*>(ctx.scratch(cand_n * sizeof(Cand) + 4ull * n_sample * sizeof(float)));
    float* const sample_keys = reinterpret_cast<float*>(cand + cand_n);
    // Words of the zeroed counters: the ticket, the bulk scan's work
    // counter, the bound's groups.
    unsigned* const counters = ctx.counters.get<unsigned>();
    unsigned* const start = n_sample ? counters + 12 : nullptr;
    static_assert(ExecContext::kCounterFill >= ExecContext::kCounterGroups + 4 * kSmallKMax, "bound groups");
    static_assert(ExecContext::kCounterGroups >= 16, "start bounds in words 12-15");
    auto sample = [&](uint64_t q0, uint32_t g) {
      if (n_sample) launch_scan_sample(s, q + q0 * ld, qn + q0, g, kc, n_sample, lanes, sample_keys, start, st);
    };
    if (!scan_tail_merge()) {  // the separate merge and emit kernels, for measuring
      for (uint64_t q0 = 0; q0 < nq; q0 += 4) {
        const uint32_t g = static_cast<uint32_t>(std::min<uint64_t>(4, nq - q0));
        ScanTail bulk_tail;  // no ticket: the work counter is zeroed here
        bulk_tail.next_unit = counters + 8;
        bulk_tail.start = start;
        bulk_tail.fold = scan_fold();
        sample(q0, g);
        if (bulk) MNEMO_CUDA_CHECK(cudaMemsetAsync(bulk_tail.next_unit, 0, sizeof(unsigned), st));
        const unsigned used = bulk  ? launch_bulk_scan(s, q, qn, kc, cand, blocks, bulk_tail, st)
                              : mma ? launch_mma_scan(s, q + q0 * ld, qn + q0, g, kc, cand, blocks, bulk_tail, st)
                                    : launch_scan_topk(s, q + q0 * ld, qn + q0, g, kc, cand, blocks, bulk_tail, st);
        launch_merge(cand, g, static_cast<uint64_t>(used) * kc, kc, s.ids, lists + q0 * kc, st);
      }
      launch_emit(lists, static_cast<uint32_t>(nq), kc, kc, k_out, s.ids, s.metric, d_ids, d_scores, st);
      return;
    }
    for (uint64_t q0 = 0; q0 < nq; q0 += 4) {
      const uint32_t g = static_cast<uint32_t>(std::min<uint64_t>(4, nq - q0));
      ScanTail tail;
      tail.ticket = counters;
      tail.groups = counters + ExecContext::kCounterGroups;
      tail.next_unit = counters + 8;
      tail.out_ids = d_ids + q0 * k_out;
      tail.out_scores = d_scores + q0 * k_out;
      tail.k_out = k_out;
      tail.negate = s.metric == KeyMetric::l2;
      tail.prefetch = scan_prefetch(s);
      tail.fold = scan_fold();
      tail.start = start;
      if (mma) tail.live_bound = counters + 4;  // words 4-7
      if (scan_compact()) tail.fill = counters + ExecContext::kCounterFill;
      sample(q0, g);
      if (bulk)
        launch_bulk_scan(s, q, qn, kc, cand, blocks, tail, st);
      else if (mma)
        launch_mma_scan(s, q + q0 * ld, qn + q0, g, kc, cand, blocks, tail, st);
      else
        launch_scan_topk(s, q + q0 * ld, qn + q0, g, kc, cand, blocks, tail, st);
    }
    return;
  } else if (!use_gemm ||
             (!small && static_cast<uint64_t>(slots) * 4 * (s.dtype == DType::f32 || fast ? 1 : 1 + ld) > budget / 2)) {
    // Exact keys for every slot, then radix selection, query chunk by chunk.
    const uint64_t row = static_cast<uint64_t>(slots) * 4;
    const uint64_t qc = std::max<uint64_t>(1, std::min<uint64_t>(nq, budget / 2 / row));
    const size_t sel = large_select_temp_bytes(static_cast<uint32_t>(qc), kc);
    Arena ar;
    const size_t o_keys = ar.add(qc * row), o_sel = ar.add(sel);
    void* w = ctx.scratch(ar.size());
    for (uint64_t q0 = 0; q0 < nq; q0 += qc) {
      const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(qc, nq - q0));
      float* keys = at<float>(w, o_keys);
      launch_score_rows(s, q + q0 * ld, qn + q0, n, keys, static_cast<unsigned>(sm_count), st);
      launch_large_select(keys, n, slots, kc, s.ids, lists + q0 * kc, at<void>(w, o_sel), sel, st);
    }
  } else if (emit) {
    const auto sms = static_cast<unsigned>(sm_count);
    // Query chunks of whole tiles where there are several (a tile reads the
    // store whether it holds 1 query or 112). Overflowed queries' dense key
    // rows (one of `slots` keys each) take what the rest leaves, in up to
    // kMaxRounds rounds of dq rows: a round costs two launches whose blocks
    // leave at once when nothing overflowed, against a store pass for a
    // smaller chunk.
    constexpr uint64_t kMaxRounds = 32;
    const uint64_t tq = kWideTileQueries, row_bytes = static_cast<uint64_t>(slots) * 4;
    uint64_t qc = nq, dq = 1;
    uint32_t cap = 0;
    Arena ar;
    size_t o_terms = 0, o_thr = 0, o_count = 0, o_samp = 0, o_keys = 0, o_slots = 0, o_sel = 0;
    for (;;) {
      // The remainder chunk's launch may split the store differently.
      const uint32_t rem = static_cast<uint32_t>(nq % qc);
      const unsigned ch = fused_wide_chunks(slots, static_cast<uint32_t>(qc), sms),
                     ch_rem = rem ? fused_wide_chunks(slots, rem, sms) : ch;
      cap = std::max(fused_wide_emit_cap(slots, kc, ch), fused_wide_emit_cap(slots, kc, ch_rem));
      ar = Arena();
      // One entry past the last slot: the kernel copies terms in pairs.
      o_terms = ar.add((static_cast<uint64_t>(slots) + 1) * 8);
      o_thr = ar.add(qc * 4);
      o_count = ar.add(qc * 4);
      o_samp = ar.add(
          std::max(fused_wide_sample_bytes(static_cast<uint32_t>(qc), ch), fused_wide_sample_bytes(rem, ch_rem)));
      o_keys = ar.add(qc * cap * 4);
      o_slots = ar.add(qc * cap * 4);
      o_sel = ar.add(compact_select_temp_bytes(static_cast<uint32_t>(qc), kc));
      const uint64_t rest = ar.size() + 256;  // the dense rows' alignment
      dq = rest + row_bytes <= budget ? std::min(qc, (budget - rest) / row_bytes) : 1;
      if ((rest + row_bytes <= budget && ceil_div(qc, dq) <= kMaxRounds) || qc == 1) break;
      qc = qc > 2 * tq ? qc / 2 / tq * tq : qc > tq ? tq : (qc + 1) / 2;
    }
    const size_t o_dense = ar.add(dq * row_bytes);
    void* w = ctx.scratch(ar.size());
    void* terms = at<void>(w, o_terms);
    const WideCandidates out{at<float>(w, o_keys), at<uint32_t>(w, o_slots), at<uint32_t>(w, o_count), cap,
                             at<float>(w, o_dense)};
    launch_slot_terms(s, terms, st);
    for (uint64_t q0 = 0; q0 < nq; q0 += qc) {
      const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(qc, nq - q0));
      const void* qm = static_cast<const unsigned char*>(q_store) + q0 * ld * dtype_size(s.dtype);
      const unsigned ch = fused_wide_chunks(slots, n, sms);
      unsigned* thr = at<unsigned>(w, o_thr);
      launch_fused_wide_emit(s, qm, qn + q0, terms, n, kc, ch, thr, at<float>(w, o_samp), out, fast, st);
      for (uint32_t lo = 0; lo < n; lo += static_cast<uint32_t>(dq)) {
        WideCandidates round = out;
        round.dense_lo = lo;
        round.dense_rows = static_cast<uint32_t>(dq);
        launch_fused_wide_dense(s, qm, qn + q0, terms, n, kc, ch, thr, round, fast, st);
        launch_compact_select(out.dense, n, slots, kc, s.ids, out.keys, out.slots, out.count, cap, lo, round.dense_rows,
                              lists + q0 * kc, at<void>(w, o_sel), st);
      }
      finish_compact_select(n, kc, lists + q0 * kc, at<void>(w, o_sel), st);
    }
  } else if (fused != Fused::none) {
    // Batches with short lists: tensor-core GEMM with the selection in its
    // epilogue (no score tile in device memory), then the merge of the
    // chunk lists and the exact re-score below.
    const auto sms = static_cast<unsigned>(sm_count);
    auto chunks_for = [&](uint32_t n) {
      switch (fused) {
        case Fused::short_rows: return fused_short_chunks(slots, n, s.dtype, ld, sms);
        case Fused::wide: return fused_wide_chunks(slots, n, sms);
        default: return fused_gemm_chunks(slots, n, sms);
      }
    };
    auto cand_bytes = [&](uint64_t n) -> uint64_t {
      if (n == 0) return 0;
      const uint32_t lists =
          fused == Fused::short_rows ? fused_short_lists_per_chunk(static_cast<uint32_t>(n), s.dtype) : 1;
      return n * chunks_for(static_cast<uint32_t>(n)) * lists * kc * sizeof(Cand);
    };
    // The remainder's launch splits the store into more chunks where it has
    // fewer query tiles: both sizes bound the buffers.
    auto sample_bytes = [&](uint64_t n) -> size_t {
      const auto n32 = static_cast<uint32_t>(n);
      if (n == 0) return 0;
      if (fused == Fused::wide) return fused_wide_sample_bytes(n32, chunks_for(n32));
      if (fused == Fused::short_rows) return fused_short_sample_bytes(n32, chunks_for(n32), s.dtype, ld);
      return 0;  // the first fused kernel has no sampling pass
    };
    // f32 cosine queries for the short-row kernel: a unit-length copy of the
    // chunk (16-bit copies were made unit length above).
    const bool unit_f32 = fused == Fused::short_rows && s.dtype == DType::f32 && s.metric == KeyMetric::cosine;
    auto unit_bytes = [&](uint64_t n) -> uint64_t { return unit_f32 ? n * ld * 4 : 0; };
    // Everything a query chunk needs (lists, sampling keys, thresholds, the
    // unit copy) stays within half the workspace.
    auto chunk_bytes = [&](uint64_t n) -> uint64_t { return cand_bytes(n) + sample_bytes(n) + n * 4 + unit_bytes(n); };
    uint64_t qc = std::min<uint64_t>(nq, 1u << 20);
    while (qc > 64 && std::max(chunk_bytes(qc), chunk_bytes(nq % qc)) > budget / 2) qc = (qc + 1) / 2;
    Arena ar;
    // One entry past the last slot: the short-row kernel copies terms in pairs.
    const size_t o_terms = ar.add((static_cast<uint64_t>(slots) + 1) * 8),
                 o_cand = ar.add(std::max(cand_bytes(qc), cand_bytes(nq % qc))), o_thr = ar.add(qc * 4),
                 o_samp = ar.add(std::max(sample_bytes(qc), sample_bytes(nq % qc))), o_unit = ar.add(unit_bytes(qc));
    void* w = ctx.scratch(ar.size());
    Cand* cand = at<Cand>(w, o_cand);
    void* terms = at<void>(w, o_terms);
    unsigned* thr = at<unsigned>(w, o_thr);
    launch_slot_terms(s, terms, st);
    for (uint64_t q0 = 0; q0 < nq; q0 += qc) {
      const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(qc, nq - q0));
      const unsigned chunks = chunks_for(n);
      const void* qm = static_cast<const unsigned char*>(q_store) + q0 * ld * dtype_size(s.dtype);
      if (unit_f32) {
        launch_f32_to_unit(DType::f32, q + q0 * ld, at<void>(w, o_unit), n, ld, qn + q0, st);
        qm = at<void>(w, o_unit);
      }
      unsigned used;
      switch (fused) {
        case Fused::short_rows:
          used = launch_fused_short_topk(s, qm, terms, n, kc, chunks, cand, thr, at<float>(w, o_samp), sms, st);
          break;
        case Fused::wide: {
          // A mask's columns from this chunk's first query.
          QueryMask m = mask ? *mask : QueryMask{};
          if (mask) m.words += q0;
          used = launch_fused_wide_topk(s, qm, qn + q0, terms, n, kc, chunks, cand, thr, at<float>(w, o_samp), fast, st,
                                        mask ? &m : nullptr);
          break;
        }
        default: used = launch_fused_gemm_topk(s, qm, qn + q0, terms, n, kc, chunks, cand, st);
      }
      launch_merge(cand, n, static_cast<uint64_t>(used) * kc, kc, s.ids, lists + q0 * kc, st);
    }
  } else {
    // GEMM path: query chunks x slot tiles of dot products, then keys, then
    // selection into per-query candidate lists.
    BlasOn blas_on(ctx.blas, st, ctx.stream);
    const bool widen = s.dtype != DType::f32 && !fast;
    const void* qmat = q;
    cudaDataType_t qtype = CUDA_R_32F;
    if (s.dtype != DType::f32 && fast) {
      launch_f32_to(s.dtype, q, at<void>(fb, o_qt), nq * ld, st);
      qmat = at<void>(fb, o_qt);
      qtype = cuda_type(s.dtype);
    }
    uint64_t qc = std::min<uint64_t>(nq, 8192);
    uint32_t tn = 0, ntiles = 0;
    unsigned bpr = 1;
    Arena ar;
    size_t o_dots = 0, o_wide = 0, o_cand = 0, o_sel = 0, o_thr = 0, sel = 0;
    for (;;) {
      // Tile width from the budget: dots [qc x tn] (+ a widened tile).
      const uint64_t per_col = qc * 4 + (widen ? ld * 4 : 0);
      uint64_t t = small ? std::min<uint64_t>(slots, std::min(budget / 2, l2_tile_bytes()) / per_col) : slots;
      if (small) t = t >= slots ? slots : std::max<uint64_t>(256, t / 256 * 256);
      tn = static_cast<uint32_t>(std::min<uint64_t>(t, slots));
      ntiles = ceil_div(slots, tn);
      bpr = small ? std::max(1u, std::min(ceil_div(2ull * sm_count, qc), ceil_div(tn, 4096))) : 1;
      sel = small ? 0 : large_select_temp_bytes(static_cast<uint32_t>(qc), kc);
      ar = Arena();
      o_dots = ar.add(qc * tn * 4);
      o_wide = ar.add(widen ? static_cast<uint64_t>(tn) * ld * 4 : 0);
      o_cand = ar.add(small ? qc * ntiles * bpr * kc * sizeof(Cand) : 0);
      o_sel = ar.add(sel);
      o_thr = ar.add(small ? qc * 4 : 0);
      if (ar.size() <= budget || qc == 1) break;
      qc = (qc + 1) / 2;
    }
    void* w = ctx.scratch(ar.size());
    float* dots = at<float>(w, o_dots);
    float* wide = widen ? at<float>(w, o_wide) : nullptr;
    Cand* cand = at<Cand>(w, o_cand);
    uint32_t* thr = at<uint32_t>(w, o_thr);
    const uint64_t cand_stride = static_cast<uint64_t>(ntiles) * bpr * kc;
    for (uint64_t q0 = 0; q0 < nq; q0 += qc) {
      const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(qc, nq - q0));
      const void* qm = static_cast<const unsigned char*>(qmat) + q0 * ld * (qtype == CUDA_R_32F ? 4 : 2);
      if (small) MNEMO_CUDA_CHECK(cudaMemsetAsync(thr, 0, n * 4, st));
      for (uint32_t t = 0; t < ntiles; ++t) {
        const uint32_t first = t * tn, width = std::min(tn, slots - first);
        if (widen)
          launch_widen_rows(static_cast<const unsigned char*>(s.vectors) + static_cast<uint64_t>(first) * ld * 2,
                            s.dtype, width, ld, wide, st);
        gemm(ctx, s, fast, first, width, qm, qtype, n, wide, dots);
        if (small) {
          launch_select_rows(dots, true, s, qn + q0, n, width, first, kc, bpr, cand, cand_stride,
                             static_cast<uint64_t>(t) * bpr * kc, thr, st);
        } else {
          launch_finish_keys(s, qn + q0, n, first, width, dots, st);
          launch_large_select(dots, n, width, kc, s.ids, lists + q0 * kc, at<void>(w, o_sel), sel, st);
        }
      }
      if (small) launch_merge(cand, n, cand_stride, kc, s.ids, lists + q0 * kc, st);
    }
  }
  // Also after the exact-keys fallback that a large store takes instead of
  // the GEMM path: every batch of queries then ends with the same per-row
  // kernel's keys, whichever path the store's size chose.
  if (rescore) {
    launch_rescore(s, q, qn, static_cast<uint32_t>(nq), lists, kc, st);
    if (!small) {
      const size_t tb = large_select_temp_bytes(static_cast<uint32_t>(nq), kc);
      sort_lists(lists, static_cast<uint32_t>(nq), kc, s.ids, ctx.scratch(tb), tb, st);
    }
  }
  const uint32_t emit_k = static_cast<uint32_t>(std::min<uint64_t>(k, kc));
  launch_emit(lists, static_cast<uint32_t>(nq), kc, emit_k, k_out, s.ids, s.metric, d_ids, d_scores, st);
}

bool dense_mask_usable(const StoreRef& s, uint64_t nq, uint64_t k, bool fast) {
  if (!fast || nq < kGemmMinQueries || s.slots == 0) return false;
  const uint32_t kc = search_list_length(s.slots, k, true);
  if (kc > static_cast<uint32_t>(kSmallKMax)) return false;
  // device_search's choice before the long-row kernel. Its queries (f32, or
  // the 16-bit copy it makes) lie at the start of an arena region: aligned.
  if (fused_short_usable(s.slots, kc, s.dtype, s.ld) || fused_gemm_wanted(kc, s.dtype, s.ld)) return false;
  return fused_wide_usable(s.slots, kc, s.dtype, s.ld, reinterpret_cast<const void*>(256), true);
}

uint32_t search_list_length(uint32_t slots, uint64_t k, bool rescore) {
  const uint64_t cap = std::max<uint32_t>(slots, 1);
  const uint64_t k_eff = std::min<uint64_t>(k, cap);
  return static_cast<uint32_t>(rescore ? std::min<uint64_t>(cap, k_eff + std::max<uint64_t>(k_eff, 16)) : k_eff);
}

void CudaBackend::search(const SearchArgs& a) {
  const auto* ds = static_cast<const DeviceStore*>(a.mirror);
  if (ds == nullptr) fail(Code::internal, "CUDA search without a device copy of the store");
  const StoreView& v = *a.store;
  if (v.slots >= 0xffffffffull) fail(Code::unsupported, "the CUDA backend holds at most 2^32 - 2 slots per store");
  if (a.lists) {
    if (a.place.on_device || a.probe || (a.act.on && a.act.normalize))
      fail(Code::internal, "CUDA list search: host buffers, no index, no normalised activation");
    return search_lists(a);
  }
  if (a.programs) {
    if (a.place.on_device || a.probe || (a.act.on && a.act.normalize) || !ds->evaluates_filters(a.k))
      fail(Code::internal, "CUDA filter programs: host buffers, no index, no normalised activation, k <= 256");
    return search_programs(a);
  }
  auto ctx = pool_.acquire();
  const bool dev = a.place.on_device;
  cudaStream_t st = dev ? static_cast<cudaStream_t>(a.place.stream) : ctx->stream;
  const uint64_t nq = a.nq, ld = ds->ld();
  const uint32_t slots = static_cast<uint32_t>(v.slots);
  // The widest list the device part may produce bounds the columns copied
  // back; device outputs get every column (padding written on the device).
  const uint32_t emit_k = std::min<uint32_t>(static_cast<uint32_t>(std::min<uint64_t>(a.k, 0xffffffffu)),
                                             search_list_length(slots, a.k, false));
  StoreRef s{ds->vectors(), v.dtype, ld,           static_cast<uint32_t>(v.dim), slots, ds->ids(), ds->norms(),
             ds->biases(),  nullptr, a.apply_bias, key_metric(v.metric),         false};
  s.times = ds->times();
  s.importance = ds->importance();
  if (a.act.on && !a.act.normalize) {
    s.act = true;
    s.w_rel = a.act.w_rel;
    s.w_rec = a.act.w_rec;
    s.w_imp = a.act.w_imp;
    s.now = a.act.now;
    s.inv_half_life = 1.0 / a.act.half_life;  // as the CPU: 0 for an infinite half-life
  }
  const bool normalized = a.act.on && a.act.normalize;
  // An inverted-file search: the centroids' device copy and the bound on a
  // query's candidate rows (nprobe times the largest list, plus the hot
  // tier), the longest list as the index keeps it.
  const IvfProbe* probe = a.probe;
  const DeviceStore* cs = probe ? static_cast<const DeviceStore*>(probe->centroid_mirror) : nullptr;
  IvfDevice ivf;
  bool ivf_scan = false;
  if (probe) {
    const StoreView& c = *probe->centroids;
    if (cs == nullptr) fail(Code::internal, "CUDA inverted-file search without a device copy of the centroids");
    if (c.dtype != DType::f32 || c.dim != v.dim || cs->ld() != ld || c.slots >= 0xffffffffull || probe->nprobe == 0)
      fail(Code::internal, "CUDA inverted-file search: the centroids do not match the store");
    const auto nlist = static_cast<uint32_t>(c.slots);
    const uint64_t longest = std::min<uint64_t>(probe->longest, slots);
    const uint64_t hot = probe->hot_begin < slots ? slots - probe->hot_begin : 0;
    ivf.centroids =
        StoreRef{cs->vectors(), DType::f32, cs->ld(), static_cast<uint32_t>(v.dim), nlist, cs->ids(), cs->norms(),
                 cs->biases(),  nullptr,    false,    key_metric(v.metric),         false};
    ivf.centroids.times = cs->times();
    ivf.centroids.importance = cs->importance();
    ivf.nlist = nlist;
    ivf.nprobe = probe->nprobe;
    ivf.hot_begin = static_cast<uint32_t>(std::min<uint64_t>(probe->hot_begin, slots));
    ivf.max_rows = static_cast<uint32_t>(std::min<uint64_t>(slots, probe->nprobe * longest + hot));
    ivf_scan = ivf_scans(ivf.max_rows, a.k, normalized);
  }
  // Flat activation searches over many slots take every slot's memory terms
  // from one pass ahead of the search (4 bytes a slot, read as a bias), so
  // the scan's steps do not wait on the time's load and the recency's power.
  const bool act_terms = s.act && !probe && act_terms_wanted(slots);
  // Device queries whose rows are already ld long (and 16-byte aligned, as
  // checked by the ABI) are read in place; others get one padded copy.
  const bool copy_q = !dev || ld != v.dim;
  Arena io;
  const uint64_t words = (static_cast<uint64_t>(slots) + 63) / 64;
  // The filter right after the queries: host calls upload both from pinned
  // staging, laid out alike, in one copy.
  const size_t o_q = io.add(copy_q ? nq * ld * 4 : 0), o_allow = io.add(a.allow ? words * 8 : 0), o_qn = io.add(nq * 4);
  // Device queries checked inside the search (Placement::check_on_device):
  // the row norms mark bad rows here, and they are padded after the search.
  const bool check_inside = dev && a.place.validate && a.place.check_on_device;
  const size_t o_bad = io.add(check_inside ? nq * 4 : 0);
  // Host results: ids then scores in one span, downloaded by one copy.
  const size_t o_ids = io.add(dev ? 0 : nq * emit_k * 12);
  // An inverted-file search's coarse lists, span table or list bitmap, and
  // its offsets when the probe brings no device copy.
  const uint64_t np = probe ? probe->nprobe : 0;
  const size_t o_cids = io.add(nq * np * 8), o_cscores = io.add(nq * np * 4),
               o_spans = io.add(ivf_scan ? nq * (np + 1) * 8 : 0),
               o_bits = io.add(probe && !ivf_scan ? nq * ivf_words(ivf.nlist) * 4 : 0),
               o_offsets = io.add(probe && !probe->device_offsets ? (ivf.nlist + 1) * 8ull : 0);
  const size_t o_extra = io.add(act_terms ? slots * 4ull : 0);
  if (dev) {
    need_device_memory(a.queries, "queries", cfg_.device_id);
    if (!a.place.peer_outputs) {
      need_device_memory(a.ids, "ids", cfg_.device_id);
      need_device_memory(a.scores, "scores", cfg_.device_id);
      if (a.place.device_status) need_device_memory(a.place.device_status, "opts->device_status", cfg_.device_id);
    }
    ctx->begin_on(st);
  }
  bool fast = cfg_.precision == Precision::fast;
  if (dev) {
    // Large FAST batches over f16 rows still wait for their range check:
    // it chooses the path on the host.
    const bool range = fast && v.dtype == DType::f16 && nq >= kGemmMinQueries;
    const bool check_now = a.place.validate && !check_inside;
    if (check_now || range) {
      const uint64_t* w = ctx->check_words(st, 2, [&](unsigned long long* d) {
        if (check_now) launch_find_non_finite(a.queries, DType::f32, nq * v.dim, d, st);
        if (range) launch_find_f16_misfit(a.queries, nq, v.dim, d + 1, st);
      });
      if (w[0] != UINT64_MAX) fail(Code::non_finite, "queries[" + std::to_string(w[0]) + "] is NaN or infinite");
      if (w[1] != UINT64_MAX) fast = false;
    }
  } else {
    fast = fast && fast_queries_fit(v.dtype, a.queries, nq, v.dim);
  }
  DeviceBuffer& iob = ctx->io;
  iob.reserve(io.size());
  const float* q = copy_q ? at<float>(iob.get(), o_q) : a.queries;
  float* qn = at<float>(iob.get(), o_qn);
  if (a.allow) s.allow = at<uint64_t>(iob.get(), o_allow);
  float* extra = act_terms ? at<float>(iob.get(), o_extra) : nullptr;
  StoreRef flat = s;
  if (act_terms) {
    flat.biases = extra;
    flat.apply_bias = true;
    flat.act_in_bias = true;
  }
  if (probe) {
    ivf.offsets = probe->device_offsets ? static_cast<const uint64_t*>(probe->device_offsets)
                                        : at<uint64_t>(iob.get(), o_offsets);
    ivf.coarse_ids = at<uint64_t>(iob.get(), o_cids);
    ivf.coarse_scores = at<float>(iob.get(), o_cscores);
    ivf.spans = ivf_scan ? at<uint2>(iob.get(), o_spans) : nullptr;
    ivf.list_bits = ivf_scan ? nullptr : at<uint32_t>(iob.get(), o_bits);
  }
  // One pinned staging buffer for the host inputs (the queries at its
  // start, then the filter, as in io) and the results, sized once so it is
  // never reallocated while a copy is in flight.
  const size_t o_staged_allow = o_allow - o_q;
  if (!dev) ctx->reserve_staging(std::max<size_t>(o_staged_allow + (a.allow ? words * 8 : 0), nq * emit_k * 12) + 16);
  unsigned char* staged = ctx->staging.get<unsigned char>();
  const bool results = !dev && !(normalized && a.act.ranges_out) && slots > 0 && emit_k > 0;
  // Few host queries on the fused scan: its last block writes the results
  // straight into pinned staging (device-accessible under unified
  // addressing), which saves a copy; other host calls download them.
  const bool scan_call =
      results && !normalized && !probe && nq < kGemmMinQueries && search_list_length(slots, a.k, false) <= kSmallKMax;
  uint64_t* d_ids = dev ? a.ids : scan_call ? reinterpret_cast<uint64_t*>(staged) : at<uint64_t>(iob.get(), o_ids);
  float* d_scores = dev ? a.scores : reinterpret_cast<float*>(d_ids + nq * emit_k);
  const uint64_t k_out = dev ? a.k : emit_k;
  // The host inputs into pinned staging: all that a replayed graph needs of
  // the host. Fused-scan calls stage their queries as zero-padded rows of
  // ld and upload them with the filter in one flat copy: each copy node of
  // a graph costs microseconds, and a 2D copy of several rows more (both
  // measured on an H200); other calls' upload_queries stages its own.
  auto stage = [&] {
    if (scan_call && ld == v.dim) {
      std::memcpy(staged, a.queries, nq * ld * 4);
    } else if (scan_call) {
      for (uint64_t i = 0; i < nq; ++i) {
        float* row = reinterpret_cast<float*>(staged) + i * ld;
        std::memcpy(row, a.queries + i * v.dim, v.dim * 4);
        std::memset(row + v.dim, 0, (ld - v.dim) * 4);
      }
    }
    if (a.allow) std::memcpy(staged + o_staged_allow, a.allow, words * 8);
  };
  // The call from its inputs to the results (in pinned staging for host
  // results), queued on st.
  auto enqueue = [&] {
    if (dev) {
      if (copy_q) {
        float* qd = at<float>(iob.get(), o_q);
        MNEMO_CUDA_CHECK(cudaMemsetAsync(qd, 0, nq * ld * 4, st));
        MNEMO_CUDA_CHECK(
            cudaMemcpy2DAsync(qd, ld * 4, a.queries, v.dim * 4, v.dim * 4, nq, cudaMemcpyDeviceToDevice, st));
      }
    } else {
      stage();
      if (scan_call)
        MNEMO_CUDA_CHECK(cudaMemcpyAsync(at<float>(iob.get(), o_q), staged,
                                         a.allow ? o_staged_allow + words * 8 : nq * ld * 4, cudaMemcpyHostToDevice,
                                         st));
      else
        upload_queries(*ctx, a.queries, nq, v.dim, ld, at<float>(iob.get(), o_q));
    }
    unsigned* bad = check_inside ? at<unsigned>(iob.get(), o_bad) : nullptr;
    launch_row_norms(q, static_cast<uint32_t>(nq), ld, qn, st, bad);
    if (a.allow && !scan_call) {
      const void* src = dev ? static_cast<const void*>(a.allow) : staged + o_staged_allow;
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(at<uint64_t>(iob.get(), o_allow), src, words * 8, cudaMemcpyHostToDevice, st));
    }
    if (probe && !probe->device_offsets)
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(at<uint64_t>(iob.get(), o_offsets), probe->offsets, (ivf.nlist + 1) * 8ull,
                                       cudaMemcpyHostToDevice, st));
    if (probe)
      ivf_device_search(*ctx, st, s, ivf, normalized ? &a.act : nullptr, q, qn, nq, a.k, k_out, cfg_.workspace_bytes,
                        sm_count_, d_ids, d_scores);
    else if (normalized)
      normalized_device_search(*ctx, st, s, a.act, q, qn, nq, a.k, k_out, cfg_.workspace_bytes, sm_count_, d_ids,
                               d_scores);
    else {
      if (act_terms) launch_activation_terms(s, extra, st);
      device_search(*ctx, st, flat, q, qn, nq, a.k, k_out, fast, cfg_.workspace_bytes, sm_count_, d_ids, d_scores);
    }
    if (check_inside) launch_poison_bad_rows(bad, nq, a.k, a.ids, a.scores, a.place.device_status, st);
    if (results && !scan_call)
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(staged, d_ids, nq * emit_k * 12, cudaMemcpyDeviceToHost, st));
  };
  // The fused scan's host calls as one graph launch (graph_cache.h), the
  // host copies around it.
  if (scan_call && SearchGraphs::enabled()) {
    const SearchGraphKey key =
        search_graph_key(*ctx, s, q, qn, nq, a.k, k_out, fast, d_ids, d_scores, cfg_.workspace_bytes, sm_count_);
    ctx->graphs.run(key, st, stage, enqueue);
  } else {
    enqueue();
  }
  if (dev) {
    ctx->end_on(st);
    ds->add_reader(st);
    if (cs) cs->add_reader(st);
    return;
  }
  if (normalized && a.act.ranges_out) return;  // ranges only, written (and waited for) above
  auto* h_ids = ctx->staging.get<uint64_t>();
  auto* h_scores = reinterpret_cast<float*>(h_ids + nq * emit_k);
  ctx->sync();
  // Columns past the candidates (k beyond the slot count) are padding.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (uint64_t i = 0; i < nq; ++i) {
    for (uint64_t j = 0; j < a.k; ++j) {
      const bool have = slots > 0 && j < emit_k;
      a.ids[i * a.k + j] = have ? h_ids[i * emit_k + j] : kNoId;
      a.scores[i * a.k + j] = have ? h_scores[i * emit_k + j] : nan;
    }
  }
}

std::unique_ptr<StoreMirror> CudaBackend::attach_store(const StoreView& view) {
  return std::make_unique<DeviceStore>(pool_, view);
}

}  // namespace mnemo::cuda
