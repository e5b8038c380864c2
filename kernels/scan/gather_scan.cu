// The staged gather (gather_scan.h): a query's list of slots read with
// asynchronous copies into a ring of stages in shared memory (cp.async, 16
// bytes a lane), each lane copying the vectors of a unit's rows that it
// sums itself, so a warp keeps several units of rows from all over the
// store in flight without holding them in registers, and no lane waits on
// another's copies. Each chunk's list entries are loaded two chunks ahead
// and their slots' metadata one chunk ahead, so no load waits on another.
// The span scan loads a list entry, then its row, in each step: over 960k
// random rows of 384 bytes (H200) its scan took 0.27 ms, this one 0.195.
// Bulk copies (cp.async.bulk, one a row, mbarriers) measured the same.
// Nsight Compute puts this kernel at about 110 instructions a row and 2.7
// issued a cycle an SM: bound by its instructions, not by the reads (48% of
// DRAM). Keys are the same bits as every other scan's (row_sums' order of
// operations); the lists and the merge are scan_tail.cuh's.
#include <algorithm>

#include "device/cp_async.cuh"
#include "device/device_caps.h"
#include "device/env_knob.h"
#include "scan/gather_scan.h"
#include "scan/row_dot.cuh"
#include "scan/scan_tail.cuh"
#include "scan/smem_row_sum.cuh"

namespace mnemo::cuda {

namespace {

// Rows a unit (the rows of one commit group), and the units of a chunk: a
// warp's 32 list entries, one per lane, loaded together.
constexpr uint32_t kUnitRows = 4;
constexpr uint32_t kChunkUnits = 32 / kUnitRows;

// Units in flight a warp: four of rows up to 512 bytes (16 rows of 384
// bytes, 6 KB), two of longer rows (8 KB at 1 KB rows): at most a chunk.
template <int NV>
constexpr uint32_t stages_of() {
  return NV == 1 ? 4 : 2;
}

constexpr size_t smem_bytes(uint64_t row_bytes, uint32_t stages, uint32_t k) {
  return static_cast<size_t>(kScanWarps) * stages * kUnitRows * row_bytes +
         static_cast<size_t>(kScanWarps) * k * sizeof(Cand) + kScanWarps * sizeof(int);
}

// The most any layout takes (rows of 512 bytes at four stages, or of 1 KB
// at two; lists of kSmallKMax): 80 KB, within every sm_80+ GPU's opt-in
// limit (99 KB on sm_86 and sm_89), so one attribute serves every launch.
constexpr size_t kMostSmem = smem_bytes(512, stages_of<1>(), kSmallKMax) > smem_bytes(1024, stages_of<2>(), kSmallKMax)
                                 ? smem_bytes(512, stages_of<1>(), kSmallKMax)
                                 : smem_bytes(1024, stages_of<2>(), kSmallKMax);
static_assert(kMostSmem <= 99 * 1024, "the gather's shared memory must fit sm_86's opt-in limit");

// A slot's metadata, dead where the lane holds no entry.
__device__ __forceinline__ SlotMeta gathered_meta(const StoreRef& s, uint32_t slot) {
  if (slot == kNoSlot) return SlotMeta{false, 0.0f, 0.0f, 0.0f};
  return slot_meta<true>(s, slot);
}

// CTA row blockIdx.y serves query y (the span scan's offsets). Warp w of
// the query's gridDim.x * 8 takes chunks w, w + warps, ... of its list;
// unit j of the warp's stream goes to stage j % STAGES.
template <class T, bool L2, int NV, class List>
__global__ void __launch_bounds__(kScanThreads)
    gather_scan_kernel(StoreRef s, const float* __restrict__ queries, const float* __restrict__ qnorms, uint32_t k,
                       Cand* __restrict__ cand, ScanTail tail, ScanSpans sp) {
  constexpr uint32_t STAGES = stages_of<NV>();
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int V = Vec16<T>::kElems;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t y = blockIdx.y;
  queries += static_cast<uint64_t>(y) * s.ld;
  cand += static_cast<uint64_t>(y) * gridDim.x * k;
  tail.ticket += y;
  tail.groups += static_cast<uint64_t>(y) * k;
  if (tail.out_ids) {
    tail.out_ids += y * tail.k_out;
    tail.out_scores += y * tail.k_out;
  } else {
    tail.lists += static_cast<uint64_t>(y) * k;
  }
  const uint2 bound = sp.bounds[y];
  const uint32_t* listed = sp.slots + bound.x;
  const uint64_t n_rows = bound.y;
  const uint32_t nvec = static_cast<uint32_t>(s.ld / V);
  const uint32_t row_bytes = nvec * 16, unit_bytes = kUnitRows * row_bytes;
  unsigned char* ring = smem + static_cast<size_t>(warp) * STAGES * unit_bytes;
  Cand* lists = reinterpret_cast<Cand*>(smem + static_cast<size_t>(kScanWarps) * STAGES * unit_bytes);
  int* counts = reinterpret_cast<int*>(lists + kScanWarps * k);
  const auto* base = static_cast<const unsigned char*>(s.vectors);

  const uint64_t gw = static_cast<uint64_t>(blockIdx.x) * kScanWarps + warp;
  const uint64_t nw = static_cast<uint64_t>(gridDim.x) * kScanWarps;
  // The list position of unit j's first row (grows with j).
  auto unit_first = [&](uint32_t j) { return (gw + (j / kChunkUnits) * nw) * 32 + (j % kChunkUnits) * kUnitRows; };
  auto load_slot = [&](uint32_t chunk) {
    const uint64_t e = (gw + chunk * nw) * 32 + lane;
    return e < n_rows ? __ldg(listed + e) : kNoSlot;
  };
  // Unit j's copies into stage st, the rows' slots in the lanes of sl that
  // hold them: a lane copies its own vectors of each row (those it sums).
  // One commit group a unit, empty past the list's end, so that the groups
  // pending are always the STAGES units ahead.
  auto issue = [&](uint32_t j, uint32_t st, uint32_t sl) {
    const uint64_t first = unit_first(j);
    if (first < n_rows) {
      const uint32_t rows = static_cast<uint32_t>(n_rows - first < kUnitRows ? n_rows - first : kUnitRows);
      const int src = static_cast<int>((j % kChunkUnits) * kUnitRows);
#pragma unroll
      for (uint32_t r = 0; r < kUnitRows; ++r) {
        const uint32_t slot = __shfl_sync(kFullMask, sl, src + static_cast<int>(r));
        if (r < rows) {
          const unsigned char* from = base + static_cast<size_t>(slot) * row_bytes;
          unsigned char* to = ring + (static_cast<size_t>(st) * kUnitRows + r) * row_bytes;
#pragma unroll
          for (int v = 0; v < NV; ++v) {
            const uint32_t idx = v * 32 + lane;
            if (idx < nvec) cp_async16(to + idx * 16, from + idx * 16);
          }
        }
      }
    }
    cp_async_commit();
  };
  // Entries of chunks 0 and 1, metadata of chunk 0, the first units'
  // copies (chunk 0's: STAGES <= kChunkUnits), then chunk 2's entries and
  // chunk 1's metadata.
  uint32_t sl0 = load_slot(0), sl1 = load_slot(1);
  SlotMeta m0 = gathered_meta(s, sl0);
#pragma unroll
  for (uint32_t j = 0; j < STAGES; ++j) issue(j, j, sl0);
  uint32_t sl2 = load_slot(2);
  SlotMeta m1 = gathered_meta(s, sl1);

  // The query in registers, in the order the lane reads the row.
  float qr[NV][V];
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    const uint32_t idx = v * 32 + lane;
#pragma unroll
    for (int e = 0; e < V; e += 4) {
      const float4 x =
          idx < nvec ? *reinterpret_cast<const float4*>(queries + idx * V + e) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      qr[v][e] = x.x, qr[v][e + 1] = x.y, qr[v][e + 2] = x.z, qr[v][e + 3] = x.w;
    }
  }
  const float qn = qnorms[y];
  const float lo = start_bound(tail.start, static_cast<int>(y));
  List wl[1] = {make_list<List>(lists + warp * k, k)};

  uint32_t st = 0;
  for (uint32_t j = 0;; ++j) {
    const uint32_t jc = j % kChunkUnits;
    if (jc == 0 && j > 0) {
      sl0 = sl1, m0 = m1, sl1 = sl2;
      sl2 = load_slot(j / kChunkUnits + 2);
      m1 = gathered_meta(s, sl1);
    }
    const uint64_t first = unit_first(j);
    if (first >= n_rows) break;
    const uint32_t rows = static_cast<uint32_t>(n_rows - first < kUnitRows ? n_rows - first : kUnitRows);
    uint32_t slot[kUnitRows];
    SlotMeta m[kUnitRows];
#pragma unroll
    for (uint32_t r = 0; r < kUnitRows; ++r) {
      const int src = static_cast<int>(jc * kUnitRows + r);
      slot[r] = __shfl_sync(kFullMask, sl0, src);
      m[r].live = __shfl_sync(kFullMask, m0.live, src);
      m[r].norm = __shfl_sync(kFullMask, m0.norm, src);
      m[r].norm2 = m[r].norm * m[r].norm;
      m[r].bias = __shfl_sync(kFullMask, m0.bias, src);
    }
    // Unit j's group is the oldest of the STAGES pending.
    cp_async_wait<STAGES - 1>();
    const unsigned char* unit = ring + static_cast<size_t>(st) * unit_bytes;
    float acc[kUnitRows];
#pragma unroll
    for (uint32_t r = 0; r < kUnitRows; ++r)
      acc[r] = r < rows ? smem_row_sum<T, L2, NV>(unit + r * row_bytes, qr, nvec, lane) : 0.0f;
    // The lane has read its vectors of the stage: refill it with the unit
    // STAGES on, from this chunk's entries or the next one's.
    const uint32_t ja = j + STAGES;
    issue(ja, st, ja / kChunkUnits == j / kChunkUnits ? sl0 : sl1);
    if (++st == STAGES) st = 0;
#pragma unroll
    for (uint32_t r = 0; r < kUnitRows; ++r) {
      if (r >= rows || !m[r].live) continue;
      const float key = key_of<true>(s, acc[r], qn, m[r]);
      if (key >= lo && wl[0].admits(key, slot[r], s.ids)) wl[0].insert(key, slot[r], s.ids, lane);
    }
  }
  // No copy in flight before the ring serves the merge: the groups left are
  // empty ones, past the list's end.
  cp_async_wait<0>();
  finish_scan<List, 1>(wl, lists, counts, s.ids, 1, k, cand, tail, warp, lane, reinterpret_cast<Cand*>(smem),
                       static_cast<uint32_t>(static_cast<size_t>(kScanWarps) * STAGES * unit_bytes / sizeof(Cand)));
}

template <class T, bool L2, int NV, class List>
unsigned launch_typed(const StoreRef& s, const float* q, const float* qn, uint32_t nq, uint32_t k, Cand* cand,
                      unsigned blocks, const ScanTail& tail, const ScanSpans& sp, cudaStream_t st) {
  const size_t bytes = smem_bytes(s.ld * sizeof(T), stages_of<NV>(), k);
  auto kernel = gather_scan_kernel<T, L2, NV, List>;
  const int resident = resident_grid(reinterpret_cast<const void*>(kernel), kScanThreads, bytes, kMostSmem);
  // One query: no partial second wave.
  if (nq == 1 && resident > 0) blocks = std::min(blocks, static_cast<unsigned>(resident));
  kernel<<<dim3(blocks, nq), kScanThreads, bytes, st>>>(s, q, qn, k, cand, tail, sp);
  return blocks;
}

template <class T, bool L2>
unsigned launch_metric(const StoreRef& s, const float* q, const float* qn, uint32_t nq, uint32_t k, Cand* cand,
                       unsigned blocks, const ScanTail& tail, const ScanSpans& sp, cudaStream_t st) {
  const bool one = s.ld / Vec16<T>::kElems <= 32;
  if (k <= 32)
    return one ? launch_typed<T, L2, 1, RegList>(s, q, qn, nq, k, cand, blocks, tail, sp, st)
               : launch_typed<T, L2, 2, RegList>(s, q, qn, nq, k, cand, blocks, tail, sp, st);
  return one ? launch_typed<T, L2, 1, WarpList>(s, q, qn, nq, k, cand, blocks, tail, sp, st)
             : launch_typed<T, L2, 2, WarpList>(s, q, qn, nq, k, cand, blocks, tail, sp, st);
}

template <class T>
unsigned launch_dtype(const StoreRef& s, const float* q, const float* qn, uint32_t nq, uint32_t k, Cand* cand,
                      unsigned blocks, const ScanTail& tail, const ScanSpans& sp, cudaStream_t st) {
  return s.metric == KeyMetric::l2 ? launch_metric<T, true>(s, q, qn, nq, k, cand, blocks, tail, sp, st)
                                   : launch_metric<T, false>(s, q, qn, nq, k, cand, blocks, tail, sp, st);
}

}  // namespace

bool gather_scan_usable(const StoreRef& s, uint32_t kc) {
  static const bool off = env_int("MNEMO_GATHER_STAGED", 1) == 0;
  if (off || s.slots == 0 || kc == 0 || kc > static_cast<uint32_t>(kSmallKMax)) return false;
  if (s.dtype != DType::f16 && s.dtype != DType::bf16 && s.dtype != DType::f32) return false;
  const uint64_t row_bytes = s.ld * dtype_size(s.dtype);
  // Two 16-byte vectors a lane at most (rows of up to 1 KB), whole vectors
  // (the copies move multiples of 16 bytes from 16-byte aligned rows).
  if (row_bytes == 0 || row_bytes > 1024 || row_bytes % 16 != 0) return false;
  if (reinterpret_cast<uintptr_t>(s.vectors) % 16 != 0) return false;
  return device_major() >= 8;
}

unsigned launch_gather_scan(const StoreRef& s, const float* queries, const float* qnorms, uint32_t nq, uint32_t kc,
                            Cand* cand, unsigned blocks, const ScanTail& tail, const ScanSpans& sp, cudaStream_t st) {
  if (!sp.slots || !sp.bounds) fail(Code::internal, "the staged gather reads tables of slots");
  blocks = std::max(1u, blocks);
  unsigned used = 0;
  switch (s.dtype) {
    case DType::f16: used = launch_dtype<__half>(s, queries, qnorms, nq, kc, cand, blocks, tail, sp, st); break;
    case DType::bf16: used = launch_dtype<__nv_bfloat16>(s, queries, qnorms, nq, kc, cand, blocks, tail, sp, st); break;
    default: used = launch_dtype<float>(s, queries, qnorms, nq, kc, cand, blocks, tail, sp, st); break;
  }
  MNEMO_CUDA_LAUNCHED("gather_scan_kernel");
  return used;
}

}  // namespace mnemo::cuda
