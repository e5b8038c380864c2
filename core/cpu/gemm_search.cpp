// Query batches through sgemm. Each thread takes contiguous tiles of store
// rows and multiplies every query chunk against them with a single-threaded
// OpenBLAS sgemm into a small score tile (never the whole [nq x N] matrix).
//
// sgemm scores differ from the streaming kernel's in summation order (and,
// for L2, by the |q|^2 + |x|^2 - 2 q.x expansion), so they only pick
// candidates: every row whose GEMM key lies within a proven error margin of
// the k-th best GEMM key is re-scored with the streaming kernel, and the
// top-k is taken over those exact keys. The true top-k is always among the
// candidates, so the results equal the streaming path's, bit for bit.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "blas_threads.h"
#include "parallel_errors.h"
#include "search_common.h"

namespace mnemo::cpu {

namespace {

constexpr uint64_t kTileRows = 512;    // store rows per sgemm tile
constexpr uint64_t kQueryChunk = 256;  // queries per sgemm call
constexpr float kUnit = 0x1p-24f;      // f32 unit roundoff

struct Cand {
  float key;  // GEMM key
  uint64_t slot;
};

// One thread's state for one query: its candidates, and the key below
// which rows are left out (the cap-th best GEMM key less the margin, as of
// the last compaction).
struct QueryState {
  std::vector<Cand> cands;
  float lim = -std::numeric_limits<float>::infinity();
  uint64_t compact_at = 0;
};

// The cap-th largest key among the candidates that are not NaN (those go to
// the front: they are always kept); false when there are fewer than cap.
bool kth_key(std::vector<Cand>& c, uint64_t cap, float* kth) {
  const auto real = std::partition(c.begin(), c.end(), [](const Cand& x) { return std::isnan(x.key); });
  if (static_cast<uint64_t>(c.end() - real) < cap) return false;
  const auto nth = real + static_cast<std::ptrdiff_t>(cap - 1);
  std::nth_element(real, nth, c.end(), [](const Cand& x, const Cand& y) { return x.key > y.key; });
  *kth = nth->key;
  return true;
}

}  // namespace

std::vector<GemmItem> gemm_tiles(uint64_t lo, uint64_t hi, const uint32_t* queries, uint64_t m) {
  std::vector<GemmItem> out;
  for (uint64_t r = lo; r < hi; r += kTileRows) out.push_back({r, std::min(hi, r + kTileRows), queries, m});
  return out;
}

void gemm_search(const SearchArgs& a, int threads, const std::vector<GemmItem>* plan) {
  const StoreView& s = *a.store;
  const uint64_t D = s.dim, nq = a.nq;
  const uint64_t cap = std::min<uint64_t>(a.k, std::max<uint64_t>(s.slots, 1));
  const bool l2 = s.metric == Metric::l2sq;
  const size_t row_bytes = D * dtype_size(s.dtype);
  const auto* base = static_cast<const unsigned char*>(s.vectors);

  // Margins: |GEMM key - streaming key| <= eps[q] + 2^-20 |key|. Both sums
  // are f32 sums of D products, each within D*u*|q||x| of the exact value;
  // the factor 8 and the +8 cover the norm, division and expansion roundings.
  float xmax = 0.0f;
  for (uint64_t i = 0; i < s.slots; ++i) xmax = std::max(xmax, s.norms[i]);
  std::vector<float> qn(nq), qn2(nq), eps(nq);
  const float c = 8.0f * static_cast<float>(D + 8) * kUnit;
  for (uint64_t q = 0; q < nq; ++q) {
    qn2[q] = simd::sumsq(a.queries + q * D, DType::f32, D);
    qn[q] = query_norm(a.queries + q * D, D);
    eps[q] = s.metric == Metric::cosine ? c : l2 ? c * (qn[q] + xmax) * (qn[q] + xmax) : c * qn[q] * xmax;
  }
  // Activation scales the relevance (and its error) by w_rel; the memory
  // terms are computed alike on both paths.
  if (a.act.on)
    for (float& e : eps) e *= std::fabs(a.act.w_rel);
  auto margin = [&](uint64_t q, float thr) { return eps[q] + 0x1p-20f * (std::fabs(thr) + eps[q]); };

  BlasSingleThread blas_guard;
  const int nt = threads;
  std::vector<std::vector<QueryState>> state(static_cast<size_t>(nt));
  // The work: the plan's items, or every tile of the store for every query.
  std::vector<GemmItem> whole;
  if (!plan) whole = gemm_tiles(0, s.slots, nullptr, nq);
  const std::vector<GemmItem>& items = plan ? *plan : whole;
  const uint64_t tiles = items.size();
  ParallelErrors errors;
  // Tiles come from a shared counter: a thread that loses its core does not
  // hold the others up, and any split gives the same result.
  std::atomic<uint64_t> next{0};
#pragma omp parallel num_threads(nt)
  errors.run([&] {
#ifdef _OPENMP
    const size_t t = static_cast<size_t>(omp_get_thread_num());
#else
    const size_t t = 0;
#endif
    std::vector<QueryState>& st = state[t];
    st.assign(nq, QueryState());
    std::vector<float> wide(s.dtype == DType::f32 ? 0 : kTileRows * D);
    std::vector<float> tile(std::min(nq, kQueryChunk) * kTileRows);
    std::vector<float> extra(a.act.on ? kTileRows : 0);  // the tile's activation terms, shared by its queries
    std::vector<float> gathered;                         // an item's queries, when it names them
    std::vector<float> raw(l2 ? kTileRows : 0), keys(kTileRows);
    std::vector<uint32_t> pass(kTileRows);
    for (uint64_t ti = next++; ti < tiles; ti = next++) {
      const GemmItem& it = items[ti];
      const uint64_t r0 = it.lo, n = it.hi - it.lo;
      const float* qbase = a.queries;
      if (it.queries) {
        gathered.resize(it.m * D);
        for (uint64_t j = 0; j < it.m; ++j)
          std::copy(a.queries + uint64_t{it.queries[j]} * D, a.queries + (uint64_t{it.queries[j]} + 1) * D,
                    gathered.data() + j * D);
        qbase = gathered.data();
      }
      const float* x = reinterpret_cast<const float*>(base + r0 * row_bytes);
      if (s.dtype != DType::f32) {
        simd::widen(base + r0 * row_bytes, s.dtype, n * D, wide.data());
        x = wide.data();
      }
      if (a.act.on) activation_extras_of(s, a, r0, n, extra.data());
      for (uint64_t q0 = 0; q0 < it.m; q0 += kQueryChunk) {
        const uint64_t m = std::min(kQueryChunk, it.m - q0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
                    static_cast<int>(D), 1.0f, qbase + q0 * D, static_cast<int>(D), x, static_cast<int>(D), 0.0f,
                    tile.data(), static_cast<int>(n));
        for (uint64_t j = 0; j < m; ++j) {
          const uint64_t q = it.queries ? uint64_t{it.queries[q0 + j]} : q0 + j;
          QueryState& qs = st[q];
          const float* row = tile.data() + j * n;
          if (l2) {
            for (uint64_t r = 0; r < n; ++r) {
              const float xn = s.norms[r0 + r];
              raw[r] = qn2[q] + xn * xn - 2.0f * row[r];
            }
            row = raw.data();
          }
          if (a.act.on) {
            for (uint64_t r = 0; r < n; ++r)
              keys[r] = fmaf(a.act.w_rel, relevance_key(s, r0 + r, row[r], qn[q]), extra[r]);
          } else {
            plain_keys(s, a, r0, n, row, qn[q], keys.data());
          }
          // Rows below the entry key stop at one compare (NaN keys go on,
          // as candidates for the exact re-score). The candidates are
          // compacted by a selection, not kept in a heap: with k in the
          // thousands most rows of a tile enter, and a heap spent more time
          // than the sgemm.
          if (qs.compact_at == 0) qs.compact_at = 2 * cap + 64;
          // First the rows at or above the entry key, without a branch,
          // then those rows one by one.
          uint64_t admitted = 0;
          for (uint64_t r = 0; r < n; ++r) {
            pass[admitted] = static_cast<uint32_t>(r);
            admitted += !(keys[r] < qs.lim);
          }
          for (uint64_t i = 0; i < admitted; ++i) {
            const uint64_t r = pass[i], slot = r0 + r;
            if (keys[r] < qs.lim || !slot_live(s, a, slot)) continue;
            qs.cands.push_back({keys[r], slot});
            if (qs.cands.size() < qs.compact_at) continue;
            float kth;
            if (kth_key(qs.cands, cap, &kth)) {
              const float lim = qs.lim = kth - margin(q, kth);
              qs.cands.erase(
                  std::remove_if(qs.cands.begin(), qs.cands.end(), [lim](const Cand& cd) { return cd.key < lim; }),
                  qs.cands.end());
            }
            qs.compact_at = std::max<uint64_t>(2 * cap + 64, 2 * qs.cands.size());
          }
        }
      }
    }
  });
  errors.rethrow();

  // Per query: the global GEMM threshold, then the candidates within its
  // margin, query by query.
  std::vector<std::vector<uint64_t>> picked(nq);
#pragma omp parallel for schedule(dynamic, 4) num_threads(nt)
  for (int64_t qi = 0; qi < static_cast<int64_t>(nq); ++qi) {
    errors.run([&] {
      const uint64_t q = static_cast<uint64_t>(qi);
      // The global GEMM threshold: the cap-th best key of every thread's
      // candidates (a row a thread dropped was below its own cap-th key, so
      // never among the cap best of all).
      std::vector<Cand> all;
      for (auto& st : state) all.insert(all.end(), st[q].cands.begin(), st[q].cands.end());
      float kth = 0.0f;
      const bool full = kth_key(all, cap, &kth);
      const float lim = full ? kth - margin(q, kth) : 0.0f;
      for (const Cand& cd : all)
        if (!(full && cd.key < lim)) picked[q].push_back(cd.slot);
    });
  }
  errors.rethrow();
  state.clear();

  // The candidates re-scored with the streaming kernel slot by slot: each
  // candidate row is read once for all the queries that kept it, four
  // queries a pass (a large k keeps thousands of rows a query, and reading
  // a wide row once per query cost three times the GEMM at k = 1000).
  std::vector<uint64_t> first(nq + 1, 0);
  for (uint64_t q = 0; q < nq; ++q) first[q + 1] = first[q] + picked[q].size();
  const uint64_t pairs = first[nq];
  std::vector<uint64_t> pair_slot(pairs);
  std::vector<uint32_t> pair_query(pairs);
  for (uint64_t q = 0; q < nq; ++q)
    for (uint64_t i = first[q]; i < first[q + 1]; ++i) {
      pair_slot[i] = picked[q][i - first[q]];
      pair_query[i] = static_cast<uint32_t>(q);
    }
  // Pair numbers in slot order, queries ascending within a slot: a counting
  // sort where the pairs are many for the store, else a comparison sort
  // (a pass over every slot would cost more than the few pairs).
  std::vector<uint64_t> order(pairs);
  if (s.slots <= 4 * pairs) {
    std::vector<uint64_t> at(s.slots + 1, 0);
    for (uint64_t i = 0; i < pairs; ++i) ++at[pair_slot[i] + 1];
    for (uint64_t i = 0; i < s.slots; ++i) at[i + 1] += at[i];
    for (uint64_t i = 0; i < pairs; ++i) order[at[pair_slot[i]]++] = i;
  } else {
    for (uint64_t i = 0; i < pairs; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint64_t x, uint64_t y) {
      return pair_slot[x] != pair_slot[y] ? pair_slot[x] < pair_slot[y] : x < y;
    });
  }
  // Where each slot's run of pairs starts, in runs of about 64 slots a task.
  std::vector<uint64_t> runs;
  for (uint64_t i = 0; i < pairs; ++i)
    if (i == 0 || pair_slot[order[i]] != pair_slot[order[i - 1]]) runs.push_back(i);
  runs.push_back(pairs);
  std::vector<float> exact_key(pairs);
  constexpr uint64_t kRunsPerTask = 64;
  const uint64_t nruns = runs.size() - 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (int64_t ti = 0; ti < static_cast<int64_t>((nruns + kRunsPerTask - 1) / kRunsPerTask); ++ti) {
    errors.run([&] {
      const uint64_t r0 = static_cast<uint64_t>(ti) * kRunsPerTask, r1 = std::min(nruns, r0 + kRunsPerTask);
      const float* qp[simd::kMaxQueries];
      float raw[simd::kMaxQueries];
      for (uint64_t run = r0; run < r1; ++run) {
        const uint64_t slot = pair_slot[order[runs[run]]];
        for (uint64_t i = runs[run]; i < runs[run + 1]; i += simd::kMaxQueries) {
          const uint64_t m = std::min(simd::kMaxQueries, runs[run + 1] - i);
          for (uint64_t j = 0; j < m; ++j) qp[j] = a.queries + uint64_t{pair_query[order[i + j]]} * D;
          simd::score_row_ptrs(qp, m, base + slot * row_bytes, s.dtype, D, l2, raw);
          for (uint64_t j = 0; j < m; ++j) {
            const uint64_t p = order[i + j];
            exact_key[p] = key_of(s, a, slot, raw[j], qn[pair_query[p]]);
          }
        }
      }
    });
  }
  errors.rethrow();

#pragma omp parallel for schedule(dynamic, 4) num_threads(nt)
  for (int64_t qi = 0; qi < static_cast<int64_t>(nq); ++qi) {
    errors.run([&] {
      const uint64_t q = static_cast<uint64_t>(qi);
      // The cap best of the exact keys by a selection (the library's total
      // order; NaN never kept), as a list would keep them.
      std::vector<Hit> hits;
      hits.reserve(first[q + 1] - first[q]);
      for (uint64_t i = first[q]; i < first[q + 1]; ++i)
        if (!std::isnan(exact_key[i])) hits.push_back({exact_key[i], s.ids[pair_slot[i]]});
      if (hits.size() > cap) {
        std::nth_element(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(cap - 1), hits.end(), better);
        hits.resize(cap);
      }
      std::sort(hits.begin(), hits.end(), better);
      write_results(std::move(hits), a, q, s.metric);
    });
  }
  errors.rethrow();
}

}  // namespace mnemo::cpu
