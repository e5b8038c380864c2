// Store search. Small query batches stream: each pass over the store scores
// up to simd::kMaxQueries queries per row and feeds the keys straight into
// bounded top-k selectors (no score array). Larger batches go to the GEMM
// path (gemm_search.cpp). Threads take contiguous slot ranges and their
// selectors are merged in thread order; the (key, id) order is total and ids
// are unique, so the result does not depend on the thread count.
#include <algorithm>
#include <atomic>
#include <limits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../bit_count.h"
#include "cpu_backend.h"
#include "parallel_errors.h"
#include "search_common.h"

namespace mnemo::cpu {

namespace {

// Rows scored per kernel call: the scores of a block stay in L1.
constexpr uint64_t kBlock = 64;
// Bytes of rows a thread takes at a time from a large store: wide rows
// still make many chunks, so a thread that loses its core holds little up.
constexpr uint64_t kChunkBytes = uint64_t{1} << 20;
// A store of fewer slots than kSplitMinSlots but at least this many bytes is
// still split by slots when there are fewer query groups than threads (one
// query against 5000 rows of 3072 would otherwise run on one thread).
constexpr uint64_t kSplitMinBytes = uint64_t{1} << 20;

}  // namespace

namespace {

// Blocks where the filter allows fewer than one row in kSparseShare are
// scored row by row.
constexpr uint64_t kSparseShare = 4;

// Bits [b0, b0 + n) of a slot bitmap (n <= 64), bit r for slot b0 + r.
uint64_t allow_bits(const uint64_t* allow, uint64_t b0, uint64_t n) {
  const uint64_t w = b0 >> 6, off = b0 & 63;
  uint64_t bits = allow[w] >> off;
  if (off != 0 && n > 64 - off) bits |= allow[w + 1] << (64 - off);
  return n == 64 ? bits : bits & ((uint64_t{1} << n) - 1);
}

// Scores a gather holds: a list's rows for one query go kGatherScores at a
// time, a sparse block's (at most kBlock) for up to kMaxQueries queries.
constexpr uint64_t kGatherScores = simd::kMaxQueries * kBlock;

// Rows first + rel[r], r < n (m * n <= kGatherScores, rel[r] < 2^32),
// scored by the gather kernel for queries q[0..m) into tops[0..m); rel[n ..
// listed) are the rows the caller scores next (asked for early). As in
// scan_range, only a key that reaches a list has its slot's id read.
void score_gathered(const StoreView& s, const SearchArgs& a, const float* q, uint64_t m, const float* qn,
                    uint64_t first, const uint32_t* rel, uint64_t n, uint64_t listed, TopK* tops) {
  const size_t row_bytes = s.dim * dtype_size(s.dtype);
  const auto* base = static_cast<const unsigned char*>(s.vectors) + first * row_bytes;
  float raw[kGatherScores];
  simd::score_slots(q, m, base, s.dtype, s.dim, rel, n, listed, s.metric == Metric::l2sq, raw);
  for (uint64_t j = 0; j < m; ++j) {
    TopK& top = tops[j];
    float entry = top.full() ? top.worst_key() : -std::numeric_limits<float>::infinity();
    for (uint64_t r = 0; r < n; ++r) {
      const uint64_t slot = first + rel[r];
      const float key = key_of(s, a, slot, raw[j * n + r], qn[j]);
      if (key < entry) continue;  // NaN goes on to push, which drops it
      if (s.ids[slot] == kNoId) continue;
      top.push(key, s.ids[slot]);
      if (top.full()) entry = top.worst_key();
    }
  }
}

// Scores the listed slots sl[j..to) below slot `below` for one query into
// top; returns where it stopped. The three walks of list_search share it.
inline uint64_t score_listed(const StoreView& s, const SearchArgs& a, const float* q, const float* qn,
                             const uint32_t* sl, uint64_t j, uint64_t to, TopK* top, uint32_t below = UINT32_MAX) {
  if (below != UINT32_MAX) to = static_cast<uint64_t>(std::lower_bound(sl + j, sl + to, below) - sl);
  for (; j < to; j += kGatherScores)
    score_gathered(s, a, q, 1, qn, 0, sl + j, std::min(kGatherScores, to - j), to - j, top);
  return to;
}

// The rows of `bits` (slot b0 + r for bit r).
void scan_sparse(const StoreView& s, const SearchArgs& a, const float* q, uint64_t m, const float* qn, uint64_t b0,
                 uint64_t bits, TopK* tops) {
  uint32_t rel[64];
  uint64_t n = 0;
  for (; bits; bits &= bits - 1) rel[n++] = static_cast<uint32_t>(__builtin_ctzll(bits));
  score_gathered(s, a, q, m, qn, b0, rel, n, n, tops);
}

// The shared walk of list_search: chunks of kSharedChunk slots over the
// threads (dynamic), each thread with a list per query, merged at the end
// (the order is total, so any split gives the same answer).
constexpr uint64_t kSharedMinQueries = 8;
constexpr uint64_t kSharedRowsPerQuery = 256;
constexpr uint64_t kSharedChunk = 1024;

void shared_list_search(const SearchArgs& a, int nt, uint64_t cap) {
  const StoreView& s = *a.store;
  const SlotLists& L = *a.lists;
  const uint32_t* sl = L.slots;
  const uint64_t nq = a.nq;
  std::vector<float> qn(nq);
  for (uint64_t i = 0; i < nq; ++i) qn[i] = query_norm(a.queries + i * s.dim, s.dim);
  const uint64_t chunks = (s.slots + kSharedChunk - 1) / kSharedChunk;
  std::vector<std::vector<TopK>> tops(static_cast<size_t>(nt));
  ParallelErrors errors;
  std::atomic<uint64_t> next{0};
#pragma omp parallel num_threads(nt)
  errors.run([&] {
#ifdef _OPENMP
    std::vector<TopK>& mine = tops[static_cast<size_t>(omp_get_thread_num())];
#else
    std::vector<TopK>& mine = tops[0];
#endif
    mine.assign(nq, TopK(cap));
    // Each query's place in its list: this thread's chunks only grow, so
    // the place only moves forward (by a binary search past the chunks
    // other threads took).
    std::vector<uint64_t> at(nq);
    for (uint64_t i = 0; i < nq; ++i) at[i] = L.bounds[2 * i];
    for (uint64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
      const auto lo = static_cast<uint32_t>(c * kSharedChunk);
      const auto hi = static_cast<uint32_t>(std::min<uint64_t>(s.slots, (c + 1) * kSharedChunk));
      for (uint64_t i = 0; i < nq; ++i) {
        uint64_t j = at[i];
        const uint64_t e = L.bounds[2 * i + 1];
        if (j == e || sl[j] >= hi) continue;
        if (sl[j] < lo) j = static_cast<uint64_t>(std::lower_bound(sl + j, sl + e, lo) - sl);
        at[i] = score_listed(s, a, a.queries + i * s.dim, &qn[i], sl, j, e, &mine[i], hi);
      }
    }
  });
  errors.rethrow();
  for (uint64_t i = 0; i < nq; ++i) {
    for (size_t t = 1; t < tops.size(); ++t)
      if (!tops[t].empty()) tops[0][i].merge(tops[t][i]);
    write_results(tops[0][i].take_sorted(), a, i, s.metric);
  }
}

// The selective plan: each query scores only its listed slots; queries
// spread over the threads, and a query of many slots over all of them.
void list_search(const SearchArgs& a, int nt) {
  const StoreView& s = *a.store;
  const SlotLists& L = *a.lists;
  const uint64_t cap = std::min<uint64_t>(a.k, std::max<uint64_t>(L.longest, 1));
  ParallelErrors errors;
  const uint32_t* sl = L.slots;
  // Short lists on the calling thread: waking a team costs more than
  // scoring a few hundred rows. (Scattered rows of a large store are a
  // memory round trip each, about 100 ns: filtered track, 1M x 192 f32, one
  // query a call, 2 threads, filters of 1,000-10,000 matches: 0.60-0.69 ms a
  // query from 4,096 rows on, 0.49-0.51 from 512.)
  constexpr uint64_t kTeamRows = 512;
  uint64_t rows = 0;
  for (uint64_t i = 0; i < a.nq; ++i) rows += L.bounds[2 * i + 1] - L.bounds[2 * i];
  if (rows < kTeamRows) nt = 1;
  if (a.nq < static_cast<uint64_t>(nt)) {
    // Fewer queries than threads: each query's list is shared out in
    // chunks and the threads' selections merged (the order is total, so
    // any split gives the same answer).
    constexpr uint64_t kChunk = 512;
    for (uint64_t i = 0; i < a.nq; ++i) {
      const float* q = a.queries + i * s.dim;
      const float qn = query_norm(q, s.dim);
      const uint64_t b = L.bounds[2 * i], e = L.bounds[2 * i + 1];
      std::vector<TopK> parts(static_cast<size_t>(nt), TopK(cap));
      std::atomic<uint64_t> next{b};
#pragma omp parallel num_threads(nt)
      errors.run([&] {
#ifdef _OPENMP
        TopK& top = parts[static_cast<size_t>(omp_get_thread_num())];
#else
        TopK& top = parts[0];
#endif
        for (uint64_t c = next.fetch_add(kChunk); c < e; c = next.fetch_add(kChunk))
          score_listed(s, a, q, &qn, sl, c, std::min(e, c + kChunk), &top);
      });
      errors.rethrow();
      for (size_t t = 1; t < parts.size(); ++t) parts[0].merge(parts[t]);
      write_results(parts[0].take_sorted(), a, i, s.metric);
    }
    return;
  }
  // Many queries whose lists overlap (a batch of filters sharing tags or
  // scopes): the store is walked once in chunks of slots, and in each chunk
  // every query scores its listed rows there, so a row wanted by several
  // queries comes from memory once and from the cache after. Each list is
  // ascending, so a query's rows in a chunk are found by a binary search.
  if (a.nq >= kSharedMinQueries && rows >= kSharedRowsPerQuery * a.nq) {
    shared_list_search(a, nt, cap);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (int64_t i = 0; i < static_cast<int64_t>(a.nq); ++i) {
    errors.run([&] {
      const float* q = a.queries + static_cast<uint64_t>(i) * s.dim;
      const float qn = query_norm(q, s.dim);
      TopK top(cap);
      score_listed(s, a, q, &qn, sl, L.bounds[2 * i], L.bounds[2 * i + 1], &top);
      write_results(top.take_sorted(), a, static_cast<uint64_t>(i), s.metric);
    });
  }
  errors.rethrow();
}

}  // namespace

// Scores slots [lo, hi) for queries q[0..m) into tops[0..m).
void scan_range(const StoreView& s, const SearchArgs& a, const float* q, uint64_t m, const float* qn, uint64_t lo,
                uint64_t hi, TopK* tops) {
  const size_t row_bytes = s.dim * dtype_size(s.dtype);
  const auto* base = static_cast<const unsigned char*>(s.vectors);
  const bool l2 = s.metric == Metric::l2sq;
  float buf[simd::kMaxQueries * kBlock];
  float extra[kBlock];
  float keys[kBlock];
  for (uint64_t b0 = lo; b0 < hi; b0 += kBlock) {
    const uint64_t n = std::min<uint64_t>(kBlock, hi - b0);
    // A filter's mask: blocks it leaves empty are not read at all, and
    // blocks where it allows few rows read only those, so a search scoped
    // to a small part of the store reads about that part. A row scores
    // the same alone as in its block (simd::score_rows per row).
    if (a.allow) {
      const uint64_t bits = allow_bits(a.allow, b0, n);
      if (bits == 0) continue;
      if (bit_count(bits) * kSparseShare < n) {
        scan_sparse(s, a, q, m, qn, b0, bits, tops);
        continue;
      }
    }
    simd::score_rows(q, m, base + b0 * row_bytes, s.dtype, s.dim, n, l2, buf);
    if (a.act.on) {
      activation_extras_of(s, a, b0, n, extra);
      for (uint64_t r = 0; r < n; ++r) {
        const uint64_t slot = b0 + r;
        if (!slot_live(s, a, slot)) continue;
        for (uint64_t j = 0; j < m; ++j)
          tops[j].push(fmaf(a.act.w_rel, relevance_key(s, slot, buf[j * n + r], qn[j]), extra[r]), s.ids[slot]);
      }
      continue;
    }
    // Keys of the whole block, then one compare a row against the entry
    // key of the list: once a list is full almost every row stops there,
    // before its liveness, id or the heap are looked at. Each list sees its
    // rows in slot order, as a row-by-row loop would offer them.
    for (uint64_t j = 0; j < m; ++j) {
      plain_keys(s, a, b0, n, buf + j * n, qn[j], keys);
      TopK& top = tops[j];
      float entry = top.full() ? top.worst_key() : -std::numeric_limits<float>::infinity();
      for (uint64_t r = 0; r < n; ++r) {
        if (keys[r] < entry) continue;  // NaN goes on to push, which drops it
        const uint64_t slot = b0 + r;
        if (!slot_live(s, a, slot)) continue;
        top.push(keys[r], s.ids[slot]);
        if (top.full()) entry = top.worst_key();
      }
    }
  }
}

void CpuBackend::search(const SearchArgs& a) {
  const StoreView& s = *a.store;
  if (a.lists) return list_search(a, threads());
  if (a.probe) return ivf_search(*this, a, threads(), a.nq >= gemm_min_queries_);
  if (a.act.on && a.act.normalize) return normalized_search(a, threads());
  if (a.nq >= gemm_min_queries_ && s.slots >= kGemmMinSlots) return gemm_search(a, threads());
  // The selector never needs more room than there are slots.
  const uint64_t cap = std::min<uint64_t>(a.k, std::max<uint64_t>(s.slots, 1));
  const int nt = threads();
  const uint64_t G = simd::kMaxQueries;
  const uint64_t groups = (a.nq + G - 1) / G;
  ParallelErrors errors;

  const uint64_t row_bytes = s.dim * dtype_size(s.dtype);
  if (s.slots < kSplitMinSlots && (groups >= static_cast<uint64_t>(nt) || s.slots * row_bytes < kSplitMinBytes)) {
    // A small store: each thread takes whole query groups.
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
    for (int64_t g = 0; g < static_cast<int64_t>(groups); ++g) {
      errors.run([&] {
        const uint64_t q0 = static_cast<uint64_t>(g) * G, m = std::min(G, a.nq - q0);
        const float* q = a.queries + q0 * s.dim;
        float qn[simd::kMaxQueries];
        for (uint64_t j = 0; j < m; ++j) qn[j] = query_norm(q + j * s.dim, s.dim);
        std::vector<TopK> tops(m, TopK(cap));
        scan_range(s, a, q, m, qn, 0, s.slots, tops.data());
        for (uint64_t j = 0; j < m; ++j) write_results(tops[j].take_sorted(), a, q0 + j, s.metric);
      });
    }
    errors.rethrow();
    return;
  }
  // A large store (or a few queries): one pass per query group. Threads
  // take chunks of slots from a shared counter, so a thread that loses its
  // core to another process does not hold the others up; any split gives
  // the same result.
  const uint64_t chunk = std::max(kBlock, kChunkBytes / row_bytes);
  const uint64_t chunks = (s.slots + chunk - 1) / chunk;
  for (uint64_t g = 0; g < groups; ++g) {
    const uint64_t q0 = g * G, m = std::min(G, a.nq - q0);
    const float* q = a.queries + q0 * s.dim;
    float qn[simd::kMaxQueries];
    for (uint64_t j = 0; j < m; ++j) qn[j] = query_norm(q + j * s.dim, s.dim);
    std::vector<std::vector<TopK>> parts(static_cast<size_t>(nt), std::vector<TopK>(m, TopK(cap)));
    std::atomic<uint64_t> next{0};
#pragma omp parallel num_threads(nt)
    errors.run([&] {
#ifdef _OPENMP
      const size_t t = static_cast<size_t>(omp_get_thread_num());
#else
      const size_t t = 0;
#endif
      for (uint64_t c = next++; c < chunks; c = next++)
        scan_range(s, a, q, m, qn, c * chunk, std::min(s.slots, (c + 1) * chunk), parts[t].data());
    });
    errors.rethrow();
    for (uint64_t j = 0; j < m; ++j) {
      for (size_t t = 1; t < parts.size(); ++t) parts[0][j].merge(parts[t][j]);
      write_results(parts[0][j].take_sorted(), a, q0 + j, s.metric);
    }
  }
}

}  // namespace mnemo::cpu
