// The dense plan of filtered batches (filter_dense.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "batch/fused_wide.h"
#include "device/arena.h"
#include "device/cuda_backend.h"
#include "search/filter_dense.h"
#include "select/warp_list.cuh"

namespace mnemo::cuda {

namespace {

// Bitmap b (words words) gets the slots of posting list lists_of[b]. The
// lists ascend, so a warp's 32 entries fall in few words: one atomic per
// distinct word.
__global__ void __launch_bounds__(256)
    list_bitmaps_kernel(const uint64_t* __restrict__ list_at, const uint32_t* __restrict__ lists,
                        const uint32_t* __restrict__ lists_of, uint64_t words, uint32_t* __restrict__ bitmaps) {
  const uint32_t l = lists_of[blockIdx.y];
  const uint64_t lo = list_at[l], hi = list_at[l + 1];
  uint32_t* bm = bitmaps + static_cast<uint64_t>(blockIdx.y) * words;
  const int lane = threadIdx.x % 32;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * (blockDim.x / 32);
  for (uint64_t base = lo + (static_cast<uint64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32) * 32; base < hi;
       base += warps * 32) {
    const uint64_t e = base + lane;
    const bool has = e < hi;
    const uint32_t slot = has ? lists[e] : 0u;
    const bool in = has && (slot >> 5) < words;
    const unsigned word = in ? slot >> 5 : 0xffffffffu;
    // Lanes of one word are a run (the list ascends): each lane ORs the
    // bits of the run from itself on, and the run's first lane stores.
    unsigned bits = in ? 1u << (slot & 31) : 0u;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const unsigned b = __shfl_down_sync(kFullMask, bits, off), w = __shfl_down_sync(kFullMask, word, off);
      if (lane + off < 32 && w == word) bits |= b;
    }
    const unsigned before = __shfl_up_sync(kFullMask, word, 1);
    if (in && (lane == 0 || before != word)) atomicOr(bm + word, bits);
  }
}

// Word w of query d's mask (column d of row w, stride columns): its
// group's program run over 32 slots at once, a leaf's operand j reading
// bitmap leaf_bm[a + j] (kNoList: the empty set).
__global__ void __launch_bounds__(256)
    mask_words_kernel(const ProgNode* __restrict__ nodes, const uint32_t* __restrict__ node_at,
                      const uint32_t* __restrict__ leaf_bm, const uint32_t* __restrict__ group_of, uint32_t nd,
                      const uint32_t* __restrict__ bitmaps, uint64_t words, uint32_t* __restrict__ out) {
  const uint32_t d = blockIdx.x * 32 + threadIdx.x;
  if (d >= nd) return;
  const uint32_t g = group_of[d], n0 = node_at[g], n1 = node_at[g + 1];
  uint32_t stk[kProgramStack + 1];
  for (uint64_t w = static_cast<uint64_t>(blockIdx.y) * blockDim.y + threadIdx.y; w < words;
       w += static_cast<uint64_t>(gridDim.y) * blockDim.y) {
    int sp = 0;
    for (uint32_t i = n0; i < n1; ++i) {
      const ProgNode n = nodes[i];
      uint32_t v = 0;
      switch (n.op) {
        case ProgOp::push_true: v = ~0u; break;
        case ProgOp::tag_any:
          for (uint32_t j = 0; j < n.n; ++j) {
            const uint32_t b = leaf_bm[n.a + j];
            if (b != kNoList) v |= bitmaps[b * words + w];
          }
          break;
        case ProgOp::tag_all:
          v = ~0u;
          for (uint32_t j = 0; j < n.n && v; ++j) {
            const uint32_t b = leaf_bm[n.a + j];
            v &= b != kNoList ? bitmaps[b * words + w] : 0u;
          }
          break;
        case ProgOp::all_of:
        case ProgOp::any_of: {
          const bool all = n.op == ProgOp::all_of;
          v = all ? ~0u : 0u;
          for (uint32_t j = 0; j < n.n; ++j) {
            const uint32_t x = stk[--sp];
            v = all ? v & x : v | x;
          }
          break;
        }
        case ProgOp::negate: stk[sp - 1] = ~stk[sp - 1]; continue;
        default: break;  // push_false (the host sends no other node here)
      }
      stk[sp++] = v;
    }
    out[w * nd + d] = sp > 0 ? stk[sp - 1] : 0u;
  }
}

__global__ void gather_queries_kernel(const float* __restrict__ q, const float* __restrict__ qn,
                                      const uint32_t* __restrict__ which, uint64_t ld, float* __restrict__ dq,
                                      float* __restrict__ dqn) {
  const uint32_t d = blockIdx.x, from = which[d];
  for (uint64_t i = threadIdx.x; i < ld; i += blockDim.x) dq[d * ld + i] = q[from * ld + i];
  if (threadIdx.x == 0) dqn[d] = qn[from];
}

__global__ void scatter_results_kernel(const uint64_t* __restrict__ tids, const float* __restrict__ tscores,
                                       const uint32_t* __restrict__ which, uint64_t k, uint64_t* __restrict__ ids,
                                       float* __restrict__ scores) {
  const uint32_t d = blockIdx.x, to = which[d];
  for (uint64_t j = threadIdx.x; j < k; j += blockDim.x) {
    ids[to * k + j] = tids[d * k + j];
    scores[to * k + j] = tscores[d * k + j];
  }
}

}  // namespace

bool dense_program(const FilterPrograms& F, uint32_t g) {
  if (F.leaf_lists.size() != F.u32.size()) return false;
  for (uint32_t i = F.node_at[g]; i < F.node_at[g + 1]; ++i) {
    switch (F.nodes[i].op) {
      case ProgOp::push_false:
      case ProgOp::push_true:
      case ProgOp::tag_any:
      case ProgOp::tag_all:
      case ProgOp::all_of:
      case ProgOp::any_of:
      case ProgOp::negate: break;
      default: return false;
    }
  }
  return true;
}

void dense_filter_search(ExecContext& ctx, cudaStream_t st, const StoreRef& s, const FilterPrograms& F,
                         const DenseColumns& cols, const std::vector<uint32_t>& which, const float* q, const float* qn,
                         uint64_t k, uint64_t workspace, int sm_count, uint64_t* ids, float* scores) {
  const uint64_t nd = which.size();
  if (nd == 0) return;
  // Words for whole tiles of the batch kernel's 128 rows: it reads the
  // masks of a last tile's rows past the store too (their keys are NaN).
  const uint64_t words = (static_cast<uint64_t>(s.slots) + 127) / 128 * 4, ld = s.ld;
  // Masks and bitmaps of a chunk of queries within the budget (a query's
  // mask is as large as a bitmap; most of a chunk's lists are shared).
  const uint64_t budget = std::max<uint64_t>(workspace, 1ull << 30);
  const uint64_t per_query = 2 * words * 4 + ld * 4 + k * 12 + 64;
  // MNEMO_DENSE_CHUNK: at most this many queries a chunk (for tests).
  const char* env = std::getenv("MNEMO_DENSE_CHUNK");
  const bool forced = env && *env;
  const uint64_t most =
      std::max<uint64_t>(kGemmMinQueries, forced ? std::strtoull(env, nullptr, 10) : budget / per_query);
  // Whole tiles of the long-row kernel's queries where the budget allows:
  // a tile reads the store whether it holds 1 query or 112.
  const uint64_t chunks = (nd + most - 1) / most, even = (nd + chunks - 1) / chunks;
  const uint64_t per = std::min<uint64_t>(forced ? most : std::max(most, uint64_t{kWideTileQueries}),
                                          (even + kWideTileQueries - 1) / kWideTileQueries * kWideTileQueries);
  // Earlier work on st reads buffers that device_search may grow (the
  // caller's programs among them: each chunk uploads its own copy).
  MNEMO_CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<uint32_t> leaf_bm(F.u32.size(), kNoList), lists_of, gq, chunk_which;
  std::unordered_map<uint32_t, uint32_t> bm_of;
  for (uint64_t c0 = 0, qd_done = 0; c0 < nd; c0 += qd_done) {
    uint64_t qd = std::min(per, nd - c0);
    if (nd - c0 - qd < kGemmMinQueries) qd = nd - c0;  // no chunk below the batch kernels' minimum
    if (qd < kGemmMinQueries) fail(Code::internal, "the dense plan's chunk is below the batch kernels' minimum");
    // The chunk's groups, their lists numbered as bitmaps.
    std::fill(leaf_bm.begin(), leaf_bm.end(), kNoList);
    bm_of.clear();
    lists_of.clear();
    gq.assign(qd, 0);
    chunk_which.assign(which.begin() + c0, which.begin() + c0 + qd);
    for (uint64_t d = 0; d < qd; ++d) {
      const uint32_t g = F.group_of[chunk_which[d]];
      gq[d] = g;
      if (d > 0 && gq[d - 1] == g) continue;
      for (uint32_t i = F.node_at[g]; i < F.node_at[g + 1]; ++i) {
        const ProgNode& n = F.nodes[i];
        if (n.op != ProgOp::tag_any && n.op != ProgOp::tag_all) continue;
        for (uint32_t j = 0; j < n.n; ++j) {
          const uint32_t l = F.leaf_lists[n.a + j];
          if (l == kNoList) continue;
          auto it = bm_of.emplace(l, static_cast<uint32_t>(lists_of.size())).first;
          if (it->second == lists_of.size()) lists_of.push_back(l);
          leaf_bm[n.a + j] = it->second;
        }
      }
    }
    const uint64_t nb = lists_of.size();
    Arena ar;
    const size_t o_nodes = ar.add(F.nodes.size() * sizeof(ProgNode)), o_node_at = ar.add(F.node_at.size() * 4),
                 o_leaf = ar.add(leaf_bm.size() * 4), o_lists = ar.add(nb * 4), o_gq = ar.add(qd * 4),
                 o_which = ar.add(qd * 4), host_end = ar.size(), o_bm = ar.add(nb * words * 4),
                 o_mask = ar.add(words * qd * 4), o_q = ar.add(qd * ld * 4), o_qn = ar.add(qd * 4),
                 o_ids = ar.add(qd * k * 8), o_sc = ar.add(qd * k * 4);
    ctx.dense.reserve(ar.size());
    void* b = ctx.dense.get();
    std::vector<unsigned char> host(host_end);
    std::memcpy(host.data() + o_nodes, F.nodes.data(), F.nodes.size() * sizeof(ProgNode));
    std::memcpy(host.data() + o_node_at, F.node_at.data(), F.node_at.size() * 4);
    if (!leaf_bm.empty()) std::memcpy(host.data() + o_leaf, leaf_bm.data(), leaf_bm.size() * 4);
    if (nb) std::memcpy(host.data() + o_lists, lists_of.data(), nb * 4);
    std::memcpy(host.data() + o_gq, gq.data(), qd * 4);
    std::memcpy(host.data() + o_which, chunk_which.data(), qd * 4);
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(b, host.data(), host_end, cudaMemcpyHostToDevice, st));
    auto* bm = at<uint32_t>(b, o_bm);
    auto* mask = at<uint32_t>(b, o_mask);
    if (nb) {
      MNEMO_CUDA_CHECK(cudaMemsetAsync(bm, 0, nb * words * 4, st));
      list_bitmaps_kernel<<<dim3(64, static_cast<unsigned>(nb)), 256, 0, st>>>(cols.list_at, cols.lists,
                                                                               at<uint32_t>(b, o_lists), words, bm);
      MNEMO_CUDA_LAUNCHED("list_bitmaps_kernel");
    }
    const unsigned wy = static_cast<unsigned>(std::min<uint64_t>(65535, (words + 7) / 8));
    mask_words_kernel<<<dim3(ceil_div(qd, 32), wy), dim3(32, 8), 0, st>>>(
        at<ProgNode>(b, o_nodes), at<uint32_t>(b, o_node_at), at<uint32_t>(b, o_leaf), at<uint32_t>(b, o_gq),
        static_cast<uint32_t>(qd), bm, words, mask);
    MNEMO_CUDA_LAUNCHED("mask_words_kernel");
    const auto* dwhich = at<uint32_t>(b, o_which);
    gather_queries_kernel<<<static_cast<unsigned>(qd), 128, 0, st>>>(q, qn, dwhich, ld, at<float>(b, o_q),
                                                                     at<float>(b, o_qn));
    MNEMO_CUDA_LAUNCHED("gather_queries_kernel");
    const QueryMask m{mask, qd};
    device_search(ctx, st, s, at<float>(b, o_q), at<float>(b, o_qn), qd, k, k, true, workspace, sm_count,
                  at<uint64_t>(b, o_ids), at<float>(b, o_sc), &m);
    scatter_results_kernel<<<static_cast<unsigned>(qd), 32, 0, st>>>(at<uint64_t>(b, o_ids), at<float>(b, o_sc), dwhich,
                                                                     k, ids, scores);
    MNEMO_CUDA_LAUNCHED("scatter_results_kernel");
    // The next chunk rewrites the host arrays' copy source and the buffers.
    MNEMO_CUDA_CHECK(cudaStreamSynchronize(st));
    qd_done = qd;
  }
}

}  // namespace mnemo::cuda
