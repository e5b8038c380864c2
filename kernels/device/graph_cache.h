// Host-call searches replayed as CUDA graphs. A search with host queries
// and host results on few queries queues a short fixed sequence (query and
// filter uploads from pinned staging, query norms, the fused scan, whose
// last block writes the results into pinned staging) whose launch costs
// rival its device time on stores of some thousand rows. Each execution
// context captures that sequence once per store and shape and replays it
// with one cudaGraphLaunch. A context serves one call at a time, so nothing
// here locks.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mnemo::cuda {

struct ExecContext;
struct StoreRef;

// Everything that reaches a node of a captured search: the addresses its
// copies and kernels use and every shape and scalar in their arguments. A
// graph runs only for an equal key, so a store that grows (new buffers) or
// changes its slot count, and a context buffer that moves, never meet a
// stale graph; contents (rows, ids, tombstones, biases, times, the staged
// query and filter) are read when the graph runs. All 64-bit words, so the
// key has no padding and compares bytewise; the fields most likely to
// differ come first.
struct SearchGraphKey {
  // The call.
  uint64_t nq, k, k_out, slots, fast, apply_bias, all_live;
  uint64_t act, w_rel, w_rec, w_imp, now, inv_half_life;  // bit patterns
  // The resident store.
  uint64_t dim, ld, dtype, metric, vectors, ids, norms, biases, times, importance;
  // The call's buffers: padded queries, their norms, the filter bitmap (0
  // without one), results (pinned staging, written by the scan).
  uint64_t queries, qnorms, allow, out_ids, out_scores;
  // The backend's settings.
  uint64_t workspace, sm_count;
  // The context's buffers (pinned staging, io, scratch, counters).
  uint64_t staging, io, work, work2, counters;
};

// The key of a host call whose device part is device_search(ctx, ctx.stream,
// s, q, qn, nq, k, k_out, fast, workspace, sm_count, out_ids, out_scores);
// the staged inputs' layout follows from nq, dim, ld, slots and the filter.
SearchGraphKey search_graph_key(const ExecContext& ctx, const StoreRef& s, const float* q, const float* qn, uint64_t nq,
                                uint64_t k, uint64_t k_out, bool fast, const uint64_t* out_ids, const float* out_scores,
                                uint64_t workspace, int sm_count);

class SearchGraphs {
 public:
  SearchGraphs() = default;
  ~SearchGraphs() { clear(); }
  SearchGraphs(const SearchGraphs&) = delete;
  SearchGraphs& operator=(const SearchGraphs&) = delete;

  // Whether host-call searches may use graphs: MNEMO_SEARCH_GRAPH=0 turns
  // them off (for measuring); on by default.
  static bool enabled();

  // One call with this key, queued on st (not waited for). stage() copies
  // the host inputs into pinned staging; enqueue() does that too and queues
  // the whole call. A key's first call runs enqueue(), which sizes every
  // buffer it touches, so that the second, captured, allocates nothing (a
  // cudaMalloc would break the capture); later calls run stage() and launch
  // the graph. Should capturing or launching fail, the call runs enqueue()
  // and the key is not captured again (nor any key, after a few failures
  // on this context): no such failure reaches the user.
  template <class Stage, class Enqueue>
  void run(const SearchGraphKey& key, cudaStream_t st, Stage&& stage, Enqueue&& enqueue) {
    switch (plan(key)) {
      case Plan::replay:
        stage();
        if (replay(st)) return;
        break;
      case Plan::capture:
        if (begin_capture(key, st)) {
          bool queued = false;
          try {
            enqueue();
            queued = true;
          } catch (...) {
            // Retried below outside the capture, where a real error is reported.
          }
          if (end_capture(key, st, queued)) return;
        }
        break;
      case Plan::plain: break;
    }
    enqueue();
  }

  // Drops every graph: the buffers they read have moved or are going away.
  void clear();

 private:
  enum class Plan { plain, capture, replay };
  struct Entry {
    SearchGraphKey key;
    cudaGraphExec_t exec;  // null: the capture failed, run the plain path
    uint64_t used;
  };
  // Graphs per context (each holds driver resources), and keys seen once
  // waiting for a second call: kept apart, so calls whose key never repeats
  // (an activation `now` that moves) do not push out the graphs. A failed
  // capture is remembered among the graphs, where it may be evicted, so
  // the failures are also counted: a context whose captures keep failing
  // stops trying.
  static constexpr int kEntries = 8;
  static constexpr int kSeen = 4;
  static constexpr int kMaxFailures = 4;
  static constexpr size_t kBufWords = 5;

  Plan plan(const SearchGraphKey& key);
  bool replay(cudaStream_t st);
  bool begin_capture(const SearchGraphKey& key, cudaStream_t st);
  bool end_capture(const SearchGraphKey& key, cudaStream_t st, bool queued);
  void insert(const SearchGraphKey& key, cudaGraphExec_t exec);

  Entry entries_[kEntries];
  int n_ = 0;
  Entry* hit_ = nullptr;  // the entry plan() found
  uint64_t tick_ = 0;
  SearchGraphKey seen_[kSeen];
  bool seen_valid_[kSeen] = {};
  int next_seen_ = 0;
  int failures_ = 0;
  uint64_t bufs_[kBufWords] = {};  // the context buffers every held key names
};

}  // namespace mnemo::cuda
