// Normalised activation search on the CPU. Min-max scaling needs the range
// of each query's relevance over all its candidates before any key is
// known, so a query group is scanned once into a relevance array (4 bytes
// per slot and query), its ranges taken, and the keys then formed and
// selected from that array. Times and importances are the same for every
// query: their ranges are taken once per search.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "omp_thread.h"
#include "parallel_errors.h"
#include "search_common.h"

namespace mnemo::cpu {

namespace {

constexpr uint64_t kBlock = 64;
constexpr uint64_t kChunk = 4096;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Spans cut into pieces of at most kChunk slots, each with the position of
// its first slot among the candidates (pos) so per-candidate arrays are
// dense.
struct Piece {
  uint64_t lo, hi, pos;
};

std::vector<Piece> pieces_of(const std::vector<Span>& spans, uint64_t& total) {
  std::vector<Piece> out;
  total = 0;
  for (const Span& sp : spans)
    for (uint64_t lo = sp.lo; lo < sp.hi; lo += kChunk) {
      const uint64_t hi = std::min(sp.hi, lo + kChunk);
      out.push_back({lo, hi, total});
      total += hi - lo;
    }
  return out;
}

// Runs body(piece, thread) over the pieces, taken from a shared counter by
// nt threads.
template <class F>
void for_pieces(const std::vector<Piece>& pieces, int nt, ParallelErrors& errors, F&& body) {
  std::atomic<uint64_t> next{0};
#pragma omp parallel num_threads(nt) if (pieces.size() > 1)
  errors.run([&] {
    const int t = thread_index();
    for (uint64_t c = next++; c < pieces.size(); c = next++) body(pieces[c], t);
  });
  errors.rethrow();
}

ActRanges empty_ranges() {
  ActRanges r;
  r.rel_min = std::numeric_limits<float>::infinity();
  r.rel_max = -std::numeric_limits<float>::infinity();
  r.t_min = std::numeric_limits<double>::infinity();
  r.t_max = -std::numeric_limits<double>::infinity();
  r.imp_min = std::numeric_limits<float>::infinity();
  r.imp_max = -std::numeric_limits<float>::infinity();
  r.candidates = 0;
  return r;
}

void widen(ActRanges& into, const ActRanges& r) {
  into.rel_min = std::min(into.rel_min, r.rel_min);
  into.rel_max = std::max(into.rel_max, r.rel_max);
  into.t_min = std::min(into.t_min, r.t_min);
  into.t_max = std::max(into.t_max, r.t_max);
  into.imp_min = std::min(into.imp_min, r.imp_min);
  into.imp_max = std::max(into.imp_max, r.imp_max);
  into.candidates += r.candidates;
}

}  // namespace

void normalized_search(const SearchArgs& a, int nt) {
  const uint64_t G = simd::kMaxQueries;
  const std::vector<Span> all{{0, a.store->slots}};
  for (uint64_t q0 = 0; q0 < a.nq; q0 += G) normalized_group(a, q0, std::min(G, a.nq - q0), all, nt);
}

void normalized_group(const SearchArgs& a, uint64_t q0, uint64_t m, const std::vector<Span>& spans, int nt) {
  const StoreView& s = *a.store;
  const Activation& act = a.act;
  const size_t row_bytes = s.dim * dtype_size(s.dtype);
  const auto* base = static_cast<const unsigned char*>(s.vectors);
  const bool l2 = s.metric == Metric::l2sq;
  uint64_t n = 0;  // candidate positions
  const std::vector<Piece> pieces = pieces_of(spans, n);
  const uint64_t cap = std::min<uint64_t>(a.k, std::max<uint64_t>(n, 1));
  ParallelErrors errors;

  // The candidates' time and importance ranges (query-independent).
  std::vector<ActRanges> part(static_cast<size_t>(nt), empty_ranges());
  for_pieces(pieces, nt, errors, [&](const Piece& pc, int t) {
    ActRanges& r = part[static_cast<size_t>(t)];
    for (uint64_t slot = pc.lo; slot < pc.hi; ++slot) {
      if (!slot_live(s, a, slot)) continue;
      r.t_min = std::min(r.t_min, s.times[slot]);
      r.t_max = std::max(r.t_max, s.times[slot]);
      r.imp_min = std::min(r.imp_min, s.importance[slot]);
      r.imp_max = std::max(r.imp_max, s.importance[slot]);
      ++r.candidates;
    }
  });
  ActRanges meta = empty_ranges();
  for (const ActRanges& r : part) widen(meta, r);

  std::vector<float> rel(static_cast<size_t>(m * n));
  const float* q = a.queries + q0 * s.dim;
  float qn[simd::kMaxQueries];
  for (uint64_t j = 0; j < m; ++j) qn[j] = query_norm(q + j * s.dim, s.dim);

  // Pass 1: relevance keys of the group (NaN for a non-candidate) and their
  // ranges per thread.
  std::vector<std::vector<ActRanges>> rp(static_cast<size_t>(nt), std::vector<ActRanges>(m, empty_ranges()));
  for_pieces(pieces, nt, errors, [&](const Piece& pc, int t) {
    float buf[simd::kMaxQueries * kBlock];
    for (uint64_t b0 = pc.lo; b0 < pc.hi; b0 += kBlock) {
      const uint64_t nb = std::min<uint64_t>(kBlock, pc.hi - b0);
      simd::score_rows(q, m, base + b0 * row_bytes, s.dtype, s.dim, nb, l2, buf);
      for (uint64_t r = 0; r < nb; ++r) {
        const uint64_t slot = b0 + r, at = pc.pos + (b0 - pc.lo) + r;
        const bool live = slot_live(s, a, slot);
        for (uint64_t j = 0; j < m; ++j) {
          const float v = live ? relevance_key(s, slot, buf[j * nb + r], qn[j]) : kNaN;
          rel[j * n + at] = v;
          if (std::isnan(v)) continue;
          ActRanges& R = rp[static_cast<size_t>(t)][j];
          R.rel_min = std::min(R.rel_min, v);
          R.rel_max = std::max(R.rel_max, v);
        }
      }
    }
  });
  std::vector<ActRanges> ranges(m);
  for (uint64_t j = 0; j < m; ++j) {
    if (act.ranges) {
      ranges[j] = act.ranges[q0 + j];
      continue;
    }
    ActRanges R = empty_ranges();
    for (const auto& p : rp) widen(R, p[j]);
    R.t_min = meta.t_min, R.t_max = meta.t_max, R.imp_min = meta.imp_min, R.imp_max = meta.imp_max;
    R.candidates = meta.candidates;
    ranges[j] = R;
  }
  if (act.ranges_out) {
    for (uint64_t j = 0; j < m; ++j) act.ranges_out[q0 + j] = ranges[j];
    return;
  }

  // Pass 2: keys from the kept relevance, selected per thread.
  const double inv_hl = 1.0 / act.half_life;
  std::vector<std::vector<TopK>> tops(static_cast<size_t>(nt), std::vector<TopK>(m, TopK(cap)));
  for_pieces(pieces, nt, errors, [&](const Piece& pc, int t) {
    for (uint64_t j = 0; j < m; ++j) {
      const ActRanges& R = ranges[j];
      const float rec_lo = recency(act.now, R.t_min, inv_hl), rec_hi = recency(act.now, R.t_max, inv_hl);
      TopK& top = tops[static_cast<size_t>(t)][j];
      for (uint64_t slot = pc.lo; slot < pc.hi; ++slot) {
        const float v = rel[j * n + pc.pos + (slot - pc.lo)];
        if (std::isnan(v)) continue;
        const float relv = min_max(v, R.rel_min, R.rel_max);
        const float imp = min_max(s.importance[slot], R.imp_min, R.imp_max);
        const float bias = a.apply_bias ? s.biases[slot] : 0.0f;
        // Scaled recency lies in [0, 1]: a bound without the power first.
        if (top.full() &&
            fmaf(act.w_rel, relv, activation_extra(act.w_rec, act.w_rec > 0.0f ? 1.0f : 0.0f, act.w_imp, imp, bias)) <
                top.worst_key())
          continue;
        const float rec = min_max(recency(act.now, s.times[slot], inv_hl), rec_lo, rec_hi);
        top.push(fmaf(act.w_rel, relv, activation_extra(act.w_rec, rec, act.w_imp, imp, bias)), s.ids[slot]);
      }
    }
  });
  for (uint64_t j = 0; j < m; ++j) {
    for (size_t t = 1; t < tops.size(); ++t) tops[0][j].merge(tops[t][j]);
    write_results(tops[0][j].take_sorted(), a, q0 + j, s.metric);
  }
}

}  // namespace mnemo::cpu
