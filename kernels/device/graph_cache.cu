#include <cstddef>
#include <cstring>

#include "device/env_knob.h"
#include "device/exec_context.h"
#include "device/graph_cache.h"
#include "search/search_kernels.h"

namespace mnemo::cuda {

namespace {

uint64_t word(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

uint64_t bits(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

uint64_t bits(double x) {
  uint64_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

bool same(const SearchGraphKey& a, const SearchGraphKey& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

SearchGraphKey search_graph_key(const ExecContext& ctx, const StoreRef& s, const float* q, const float* qn, uint64_t nq,
                                uint64_t k, uint64_t k_out, bool fast, const uint64_t* out_ids, const float* out_scores,
                                uint64_t workspace, int sm_count) {
  SearchGraphKey key{};
  key.nq = nq;
  key.k = k;
  key.k_out = k_out;
  key.slots = s.slots;
  key.fast = fast;
  key.apply_bias = s.apply_bias;
  key.all_live = s.all_live;
  key.act = s.act;
  key.w_rel = bits(s.w_rel);
  key.w_rec = bits(s.w_rec);
  key.w_imp = bits(s.w_imp);
  key.now = bits(s.now);
  key.inv_half_life = bits(s.inv_half_life);
  key.dim = s.dim;
  key.ld = s.ld;
  key.dtype = static_cast<uint64_t>(s.dtype);
  key.metric = static_cast<uint64_t>(s.metric);
  key.vectors = word(s.vectors);
  key.ids = word(s.ids);
  key.norms = word(s.norms);
  key.biases = word(s.biases);
  key.times = word(s.times);
  key.importance = word(s.importance);
  key.queries = word(q);
  key.qnorms = word(qn);
  key.allow = word(s.allow);
  key.out_ids = word(out_ids);
  key.out_scores = word(out_scores);
  key.workspace = workspace;
  key.sm_count = static_cast<uint64_t>(sm_count);
  key.staging = word(ctx.staging.get());
  key.io = word(ctx.io.get());
  key.work = word(ctx.work.get());
  key.work2 = word(ctx.work2.get());
  key.counters = word(ctx.counters.get());
  return key;
}

bool SearchGraphs::enabled() {
  static const bool on = env_int("MNEMO_SEARCH_GRAPH", 1) != 0;
  return on;
}

void SearchGraphs::clear() {
  // An executable graph still running is freed when it completes.
  for (int i = 0; i < n_; ++i)
    if (entries_[i].exec) cudaGraphExecDestroy(entries_[i].exec);
  n_ = 0;
  hit_ = nullptr;
  for (bool& v : seen_valid_) v = false;
}

SearchGraphs::Plan SearchGraphs::plan(const SearchGraphKey& key) {
  hit_ = nullptr;
  // Every held key names the context's buffers: once one of them moved (it
  // grew), none of those graphs can run again.
  static_assert(offsetof(SearchGraphKey, counters) - offsetof(SearchGraphKey, staging) == (kBufWords - 1) * 8,
                "the context buffers end the key");
  const auto* bufs = reinterpret_cast<const unsigned char*>(&key) + offsetof(SearchGraphKey, staging);
  if (std::memcmp(bufs, bufs_, sizeof bufs_) != 0) {
    clear();
    std::memcpy(bufs_, bufs, sizeof bufs_);
  }
  for (int i = 0; i < n_; ++i) {
    if (!same(entries_[i].key, key)) continue;
    hit_ = &entries_[i];
    hit_->used = ++tick_;
    return hit_->exec ? Plan::replay : Plan::plain;
  }
  for (int i = 0; i < kSeen; ++i) {
    if (!seen_valid_[i] || !same(seen_[i], key)) continue;
    seen_valid_[i] = false;
    return failures_ < kMaxFailures ? Plan::capture : Plan::plain;
  }
  // The first call of a key runs plainly and sizes the buffers.
  seen_[next_seen_] = key;
  seen_valid_[next_seen_] = true;
  next_seen_ = (next_seen_ + 1) % kSeen;
  return Plan::plain;
}

bool SearchGraphs::replay(cudaStream_t st) {
  if (cudaGraphLaunch(hit_->exec, st) == cudaSuccess) return true;
  cudaGetLastError();  // the plain path reports what persists
  cudaGraphExecDestroy(hit_->exec);
  hit_->exec = nullptr;
  return false;
}

bool SearchGraphs::begin_capture(const SearchGraphKey& key, cudaStream_t st) {
  // Thread-local: other threads (other contexts, store updates) may keep
  // allocating while this one captures.
  if (cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess) return true;
  cudaGetLastError();
  ++failures_;
  insert(key, nullptr);
  return false;
}

bool SearchGraphs::end_capture(const SearchGraphKey& key, cudaStream_t st, bool queued) {
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(st, &graph);
  cudaGraphExec_t exec = nullptr;
  bool ok = queued && ended == cudaSuccess && graph != nullptr && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  if (graph) cudaGraphDestroy(graph);
  // The capture queued nothing: this call's work is the graph's first run.
  if (ok) ok = cudaGraphLaunch(exec, st) == cudaSuccess;
  if (!ok) {
    if (exec) cudaGraphExecDestroy(exec);
    exec = nullptr;
    cudaGetLastError();  // no capture error may surface in the plain run
    ++failures_;
  }
  insert(key, exec);
  return ok;
}

void SearchGraphs::insert(const SearchGraphKey& key, cudaGraphExec_t exec) {
  int at = n_;
  if (n_ < kEntries) {
    ++n_;
  } else {
    at = 0;
    for (int i = 1; i < kEntries; ++i)
      if (entries_[i].used < entries_[at].used) at = i;
    if (entries_[at].exec) cudaGraphExecDestroy(entries_[at].exec);
  }
  entries_[at].key = key;
  entries_[at].exec = exec;
  entries_[at].used = ++tick_;
}

}  // namespace mnemo::cuda
