// Search over an inverted-file index on the CPU. The coarse step is an
// ordinary search of the queries against the centroids (k = nprobe), so it
// takes the GEMM path for batches. Each query then reads only its probed
// lists and the hot tier: one query spreads its spans' rows over the
// threads in chunks; a batch gives each thread whole queries. Results keep
// the library's total order, so they do not depend on the thread count, and
// with every list probed they equal the exact scan's.
#include <algorithm>
#include <atomic>
#include <vector>

#include "cpu_backend.h"
#include "omp_thread.h"
#include "parallel_errors.h"
#include "search_common.h"

namespace mnemo::cpu {

namespace {

constexpr uint64_t kChunk = 4096;
constexpr uint64_t kTeamMinBytes = uint64_t{1} << 20;
constexpr uint64_t kGemmQueriesPerList = 4;

// Spans cut into pieces of at most kChunk slots.
std::vector<Span> pieces_of(const std::vector<Span>& spans) {
  std::vector<Span> out;
  for (const Span& sp : spans)
    for (uint64_t lo = sp.lo; lo < sp.hi; lo += kChunk) out.push_back({lo, std::min(sp.hi, lo + kChunk)});
  return out;
}

}  // namespace

std::vector<Span> probe_spans(const IvfProbe& p, uint64_t slots, const uint64_t* lists, uint64_t qi) {
  const uint64_t nlist = p.centroids->slots;
  std::vector<uint64_t> mine(lists + qi * p.nprobe, lists + (qi + 1) * p.nprobe);
  // In slot order: neighbouring lists are read as one run.
  std::sort(mine.begin(), mine.end());
  std::vector<Span> spans;
  for (uint64_t l : mine) {
    if (l >= nlist) continue;  // fewer lists than nprobe answered
    const uint64_t lo = p.offsets[l], hi = std::min(p.offsets[l + 1], slots);
    if (lo >= hi) continue;
    if (!spans.empty() && spans.back().hi == lo)
      spans.back().hi = hi;
    else
      spans.push_back({lo, hi});
  }
  if (p.hot_begin < slots) spans.push_back({p.hot_begin, slots});
  return spans;
}

namespace {

// One query's best `cap` candidates among `spans` of a's store, the spans'
// rows spread over the threads in pieces when there are enough bytes to
// pay for a team.
std::vector<Hit> scan_one(const SearchArgs& a, const float* q, const std::vector<Span>& spans, uint64_t cap, int nt) {
  const StoreView& s = *a.store;
  const std::vector<Span> pieces = pieces_of(spans);
  const float qn = query_norm(q, s.dim);
  uint64_t rows = 0;
  for (const Span& sp : pieces) rows += sp.hi - sp.lo;
  // A thread team costs more than a small read takes (and, on a loaded
  // machine, waits for a core): small probes run on this thread.
  const bool team = pieces.size() > 1 && rows * s.dim * dtype_size(s.dtype) >= kTeamMinBytes;
  std::vector<TopK> parts(static_cast<size_t>(team ? nt : 1), TopK(cap));
  std::atomic<uint64_t> next{0};
  ParallelErrors errors;
#pragma omp parallel num_threads(nt) if (team)
  errors.run([&] {
    TopK& top = parts[static_cast<size_t>(thread_index())];
    for (uint64_t i = next++; i < pieces.size(); i = next++)
      scan_range(s, a, q, 1, &qn, pieces[i].lo, pieces[i].hi, &top);
  });
  errors.rethrow();
  for (size_t t = 1; t < parts.size(); ++t) parts[0].merge(parts[t]);
  return parts[0].take_sorted();
}

}  // namespace

void ivf_search(Backend& self, const SearchArgs& a, int nt, bool batch) {
  const IvfProbe& p = *a.probe;
  const StoreView& s = *a.store;
  // Coarse step: the nprobe best lists of every query (one query: over the
  // threads, as its lists are read next).
  std::vector<uint64_t> lists(a.nq * p.nprobe);
  std::vector<float> coarse_scores(a.nq * p.nprobe);
  SearchArgs c;
  c.store = p.centroids;
  c.queries = a.queries;
  c.nq = a.nq;
  c.k = p.nprobe;
  c.ids = lists.data();
  c.scores = coarse_scores.data();
  if (a.nq == 1) {
    const std::vector<Hit> best = scan_one(c, a.queries, {{0, p.centroids->slots}}, p.nprobe, nt);
    for (uint64_t j = 0; j < p.nprobe; ++j) lists[j] = j < best.size() ? best[j].id : kNoId;
  } else {
    self.search(c);
  }

  if (a.act.on && a.act.normalize) {
    for (uint64_t qi = 0; qi < a.nq; ++qi) normalized_group(a, qi, 1, probe_spans(p, s.slots, lists.data(), qi), nt);
    return;
  }
  // A batch through sgemm when lists are shared by enough queries to make
  // tiles of several rows (measured on 1M x 768: with about one query a list
  // the streaming path below reads each list once anyway and wins).
  if (batch && s.slots >= kGemmMinSlots && a.nq * p.nprobe >= kGemmQueriesPerList * p.centroids->slots) {
    // Each list against the queries that probe it (its rows read once for
    // all of them), the hot tier against all.
    const uint64_t nlist = p.centroids->slots;
    std::vector<std::vector<uint32_t>> askers(nlist);
    for (uint64_t qi = 0; qi < a.nq; ++qi)
      for (uint64_t j = 0; j < p.nprobe; ++j) {
        const uint64_t l = lists[qi * p.nprobe + j];
        if (l < nlist) askers[l].push_back(static_cast<uint32_t>(qi));
      }
    std::vector<GemmItem> plan;
    for (uint64_t l = 0; l < nlist; ++l) {
      if (askers[l].empty()) continue;
      const uint64_t hi = std::min(p.offsets[l + 1], s.slots);
      const auto t = gemm_tiles(p.offsets[l], hi, askers[l].data(), askers[l].size());
      plan.insert(plan.end(), t.begin(), t.end());
    }
    const auto hot = gemm_tiles(std::min(p.hot_begin, s.slots), s.slots, nullptr, a.nq);
    plan.insert(plan.end(), hot.begin(), hot.end());
    return gemm_search(a, nt, &plan);
  }
  const uint64_t cap = std::min<uint64_t>(a.k, std::max<uint64_t>(s.slots, 1));
  if (a.nq == 1) {
    write_results(scan_one(a, a.queries, probe_spans(p, s.slots, lists.data(), 0), cap, nt), a, 0, s.metric);
    return;
  }
  ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (int64_t i = 0; i < static_cast<int64_t>(a.nq); ++i) {
    errors.run([&] {
      const uint64_t qi = static_cast<uint64_t>(i);
      const float* q = a.queries + qi * s.dim;
      const float qn = query_norm(q, s.dim);
      TopK top(cap);
      for (const Span& sp : probe_spans(p, s.slots, lists.data(), qi)) scan_range(s, a, q, 1, &qn, sp.lo, sp.hi, &top);
      write_results(top.take_sorted(), a, qi, s.metric);
    });
  }
  errors.rethrow();
}

}  // namespace mnemo::cpu
