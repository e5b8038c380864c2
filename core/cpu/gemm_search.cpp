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
#include <limits>
#include <mutex>
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

// One thread's state for one query: the k best GEMM keys (for the entry
// threshold) and every candidate within the margin of it.
struct QueryState {
  explicit QueryState(uint64_t k) : top(k) {}
  TopK top;
  std::vector<Cand> cands;
};

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
    st.assign(nq, QueryState(cap));
    std::vector<float> wide(s.dtype == DType::f32 ? 0 : kTileRows * D);
    std::vector<float> tile(std::min(nq, kQueryChunk) * kTileRows);
    std::vector<float> extra(a.act.on ? kTileRows : 0);  // the tile's activation terms, shared by its queries
    std::vector<float> gathered;                         // an item's queries, when it names them
    std::vector<float> raw(l2 ? kTileRows : 0), keys(kTileRows);
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
          // Rows below the entry key less the margin stop at one compare
          // (NaN keys go on, as candidates for the exact re-score).
          float lim = -std::numeric_limits<float>::infinity();
          if (qs.top.full()) lim = qs.top.worst_key() - margin(q, qs.top.worst_key());
          for (uint64_t r = 0; r < n; ++r) {
            const float key = keys[r];
            if (key < lim) continue;
            const uint64_t slot = r0 + r;
            if (!slot_live(s, a, slot)) continue;
            qs.top.push(key, s.ids[slot]);
            qs.cands.push_back({key, slot});
            if (!qs.top.full()) continue;
            const float thr = qs.top.worst_key();
            lim = thr - margin(q, thr);
            // Drop candidates the rising threshold has left behind.
            if (qs.cands.size() >= 4 * cap + 256)
              qs.cands.erase(
                  std::remove_if(qs.cands.begin(), qs.cands.end(), [lim](const Cand& cd) { return cd.key < lim; }),
                  qs.cands.end());
          }
        }
      }
    }
  });
  errors.rethrow();

  // Per query: the global GEMM threshold, then the candidates within its
  // margin re-scored with the streaming kernel.
#pragma omp parallel for schedule(dynamic, 4) num_threads(nt)
  for (int64_t qi = 0; qi < static_cast<int64_t>(nq); ++qi) {
    errors.run([&] {
      const uint64_t q = static_cast<uint64_t>(qi);
      TopK gemm_top(cap);
      for (auto& st : state) gemm_top.merge(st[q].top);
      const bool full = gemm_top.full();
      const float thr = full ? gemm_top.worst_key() : 0.0f;
      const float lim = full ? thr - margin(q, thr) : 0.0f;
      const float* qv = a.queries + q * D;
      TopK exact(cap);
      for (auto& st : state)
        for (const Cand& cd : st[q].cands) {
          if (full && cd.key < lim) continue;
          float raw;
          simd::score_rows(qv, 1, base + cd.slot * row_bytes, s.dtype, D, 1, l2, &raw);
          exact.push(key_of(s, a, cd.slot, raw, qn[q]), s.ids[cd.slot]);
        }
      write_results(exact.take_sorted(), a, q, s.metric);
    });
  }
  errors.rethrow();
}

}  // namespace mnemo::cpu
