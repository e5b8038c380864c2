// The single-query scan fed by bulk copies (Hopper's TMA engine,
// cp.async.bulk): each warp streams units of consecutive rows, taken in
// chunks from a shared counter, into a ring of stages in shared memory, so
// an SM keeps ~190 KB of rows in flight without holding them in registers. Keys
// are the same bits as the register-fed scan's (scan_topk.cu: same per-lane
// order of operations); the lists and the merge are scan_tail.cuh's.
// Measured on the H200 (1q x 1M x 768, k = 10): 0.444 ms for f16 rows
// against 0.467 ms on the register-fed scan, but 0.816 ms against 0.704 ms
// for f32 rows, so it serves 16-bit storage only (no f32 instances: 20
// fewer kernels to compile).
#include <algorithm>
#include <cuda/ptx>
#include <type_traits>

#include "device/device_caps.h"
#include "device/env_knob.h"
#include "scan/row_dot.cuh"
#include "scan/scan_tail.cuh"
#include "scan/smem_row_sum.cuh"

namespace mnemo::cuda {

namespace {

namespace ptx = ::cuda::ptx;

// A unit is the rows of one bulk copy and of one wait: two, or four where
// rows are short. Two-row units ran at the same units a second over
// 768-byte rows as over 1 KB rows (1.8G a second, H200), 63% of the read
// floor at 768 bytes; four-row units took 1 GB of them from 0.383 to 0.337
// ms, and of 1 KB rows from 0.282 to 0.268.
// A warp takes 32 / unit rows consecutive units at a time (a chunk), one
// row per lane; its copies run at most chunk - 1 units ahead, so into one
// next chunk.
constexpr uint32_t kMaxStages = 8;
// Ring bytes per warp aimed at: two blocks of 8 warps then fit an SM.
constexpr uint32_t kRingBytes = 12 * 1024;
constexpr size_t kMaxSmem = 113 * 1024;

// Three blocks an SM: shared memory for each within a third of the SM's.
constexpr size_t kThirdSmem = 75 * 1024;

struct BulkLayout {
  uint32_t stages, unit_bytes;
  size_t ring, bars, lists, bytes;
  // three: at most three stages a warp (three blocks an SM).
  BulkLayout(uint64_t row_bytes, uint32_t k, uint32_t unit_rows, bool three = false) {
    unit_bytes = static_cast<uint32_t>(unit_rows * row_bytes);
    const uint32_t most = std::min<uint32_t>(three ? 3 : kMaxStages, 32 / unit_rows - 1);
    stages = std::max<uint32_t>(2, std::min<uint32_t>(most, kRingBytes / std::max<uint32_t>(unit_bytes, 1)));
    ring = 0;
    bars = ring + static_cast<size_t>(kScanWarps) * stages * unit_bytes;
    lists = bars + static_cast<size_t>(kScanWarps) * stages * 8;
    bytes = lists + static_cast<size_t>(kScanWarps) * k * sizeof(Cand) + kScanWarps * sizeof(int);
  }
};

// Rows a unit: four for rows of at most 1 KB (384- and 512-wide 16-bit
// rows; MNEMO_SCAN_BULK_UNIT=2 brings back two there, for measuring), else
// two (a 6 KB unit would leave two stages).
uint32_t unit_rows(uint64_t row_bytes) {
  static const bool two = env_int("MNEMO_SCAN_BULK_UNIT", 4) == 2;
  return row_bytes > 1024 || two ? 2 : 4;
}

// Three blocks an SM (24 warps, three stages of four rows a warp) for rows
// of up to 768 bytes and register lists: two blocks left 0.70 eligible
// warps a scheduler at 2.07 instructions a cycle (384 x f16, 71% of the
// floor). MNEMO_SCAN_BULK_BLOCKS=2 keeps two (for measuring).
bool three_blocks(uint64_t row_bytes, uint32_t k) {
  static const bool two = env_int("MNEMO_SCAN_BULK_BLOCKS", 3) == 2;
  return !two && k <= 32 && row_bytes <= 768 && unit_rows(row_bytes) == 4 &&
         BulkLayout(row_bytes, k, 4, true).bytes <= kThirdSmem;
}

template <class T, bool L2, int NVEC, uint32_t kUnitRows, class List, int kMinBlocks = 2>
__global__ void __launch_bounds__(kScanThreads, kMinBlocks)
    bulk_scan_kernel(StoreRef s, const float* __restrict__ query, const float* __restrict__ qnorm, uint32_t k,
                     Cand* __restrict__ cand, ScanTail tail, uint32_t stages) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr uint32_t kChunkUnits = 32 / kUnitRows;
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int V = Vec16<T>::kElems;
  constexpr int NV = (NVEC + 31) / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t row_bytes = NVEC * 16;
  const uint32_t unit_bytes = kUnitRows * row_bytes;
  unsigned char* ring = smem + static_cast<size_t>(warp) * stages * unit_bytes;
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + static_cast<size_t>(kScanWarps) * stages * unit_bytes);
  Cand* lists = reinterpret_cast<Cand*>(bars + kScanWarps * stages);
  int* counts = reinterpret_cast<int*>(lists + kScanWarps * k);
  bars += warp * stages;

  // Units of kUnitRows rows, taken by each warp in chunks of kChunkUnits
  // consecutive units from a counter (tail.next_unit). A chunk's rows are
  // one per lane, so its slot metadata is one coalesced load, made when the
  // chunk is taken, a few units before its rows are scored: loaded in each
  // unit's own step, the norms' DRAM round trip stood between the sums and
  // the keys (f16 at 1M x 768: 0.446 -> 0.424 ms). Against static ranges per
  // block the counter itself measured within the spread.
  const uint32_t n_units = (s.slots + kUnitRows - 1) / kUnitRows;
  const auto* base = static_cast<const unsigned char*>(s.vectors);
  auto take = [&] {
    uint32_t c = 0;
    if (lane == 0) c = atomicAdd(tail.next_unit, kChunkUnits);
    return __shfl_sync(kFullMask, c, 0);
  };
  auto chunk_meta = [&](uint32_t c) {
    const uint32_t row = c * kUnitRows + lane;
    const bool have = c < n_units && row < s.slots;
    SlotMeta m = slot_meta<false>(s, have ? row : 0);
    m.live = m.live && have;
    return m;
  };
  if (lane == 0) {
#pragma unroll 1
    for (uint32_t i = 0; i < stages; ++i) ptx::mbarrier_init(bars + i, 1);
    // The initialised barriers, visible to the bulk-copy engine.
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncwarp();
  // Lane 0 asks for unit u into stage st.
  auto issue = [&](uint32_t u, uint32_t st) {
    const uint32_t first = u * kUnitRows;
    const uint32_t bytes = min(kUnitRows, s.slots - first) * row_bytes;
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, bars + st, bytes);
    ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, ring + static_cast<size_t>(st) * unit_bytes,
                       base + static_cast<size_t>(first) * row_bytes, bytes, bars + st);
  };
  // The warp's units in order: those of chunk `cur`, then of chunk `nxt`
  // (taken when the copies ahead reach it).
  uint32_t cur = take(), nxt = 0;
  SlotMeta meta = chunk_meta(cur), meta_next = meta;
  if (lane == 0) {
#pragma unroll 1
    for (uint32_t j = 0; j < stages && cur + j < n_units; ++j) issue(cur + j, j);
  }

  // The query in registers, in the order the lane reads the row (16-byte
  // aligned rows of ld floats).
  float qr[NV][V];
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    const int idx = v * 32 + lane;
#pragma unroll
    for (int e = 0; e < V; e += 4) {
      const float4 x = (NVEC % 32 == 0 || idx < NVEC) ? *reinterpret_cast<const float4*>(query + idx * V + e)
                                                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      qr[v][e] = x.x, qr[v][e + 1] = x.y, qr[v][e + 2] = x.z, qr[v][e + 3] = x.w;
    }
  }
  const float qn = qnorm[0];
  // The starting bound (scan_sample.cu): rows below it are never offered.
  const float lo = start_bound(tail.start, 0);
  List wl[1] = {make_list<List>(lists + warp * k, k)};

  uint32_t st = 0, phase = 0;
  for (uint32_t j = 0;; ++j) {
    const uint32_t jc = j % kChunkUnits;
    if (jc == 0 && j > 0) cur = nxt, meta = meta_next;
    // Units only grow along the stream: past the end, the warp is done
    // (and no copy is in flight).
    if (cur + jc >= n_units) break;
    const uint32_t first = (cur + jc) * kUnitRows;
    const uint32_t rows = min(kUnitRows, s.slots - first);
    SlotMeta m[kUnitRows];
#pragma unroll
    for (uint32_t r = 0; r < kUnitRows; ++r) {
      const int src = static_cast<int>(jc * kUnitRows + r);
      m[r].live = __shfl_sync(kFullMask, meta.live, src);
      m[r].norm = __shfl_sync(kFullMask, meta.norm, src);
      m[r].norm2 = m[r].norm * m[r].norm;
      m[r].bias = __shfl_sync(kFullMask, meta.bias, src);
    }
    while (!ptx::mbarrier_try_wait_parity(bars + st, phase)) {
    }
    const unsigned char* unit = ring + static_cast<size_t>(st) * unit_bytes;
    float acc[kUnitRows];
#pragma unroll
    for (uint32_t r = 0; r < kUnitRows; ++r)
      acc[r] = r < rows ? smem_row_sum<T, L2, NV, NVEC % 32 == 0>(unit + r * row_bytes, qr, NVEC, lane) : 0.0f;
    // Every lane has read the stage: refill it with the unit `stages` on.
    __syncwarp();
    const uint32_t ja = j + stages;
    if (ja % kChunkUnits == 0) {
      nxt = take();
      meta_next = chunk_meta(nxt);
    }
    const uint32_t ua = (ja / kChunkUnits == j / kChunkUnits ? cur : nxt) + ja % kChunkUnits;
    if (lane == 0 && ua < n_units) issue(ua, st);
    if (++st == stages) st = 0, phase ^= 1;
#pragma unroll
    for (uint32_t r = 0; r < kUnitRows; ++r) {
      if (!m[r].live) continue;
      const float key = key_of<false>(s, acc[r], qn, m[r]);
      if (key >= lo && wl[0].admits(key, first + r, s.ids)) wl[0].insert(key, first + r, s.ids, lane);
    }
  }
  // The ring is free: every warp's copies have landed and been read.
  finish_scan<List, 1>(wl, lists, counts, s.ids, 1, k, cand, tail, warp, lane, reinterpret_cast<Cand*>(smem),
                       static_cast<uint32_t>(kScanWarps * stages * unit_bytes / sizeof(Cand)));
#else
  // Launched only on sm_90 and later (bulk_scan_usable).
  __trap();
#endif
}

template <class T, bool L2, class List>
unsigned launch_typed(const StoreRef& s, const float* q, const float* qn, uint32_t k, Cand* cand, unsigned blocks,
                      const ScanTail& tail, cudaStream_t st) {
  const uint32_t ur = unit_rows(s.ld * sizeof(T));
  const bool three = three_blocks(s.ld * sizeof(T), k);
  const BulkLayout lay(s.ld * sizeof(T), k, ur, three);
  // The grid at most the blocks resident at once (the caller asks for
  // three an SM where rows allow it).
  auto go = [&](auto kernel) {
    const int resident = resident_grid(reinterpret_cast<const void*>(kernel), kScanThreads, lay.bytes, kMaxSmem);
    if (resident > 0) blocks = std::min(blocks, static_cast<unsigned>(resident));
    kernel<<<blocks, kScanThreads, lay.bytes, st>>>(s, q, qn, k, cand, tail, lay.stages);
  };
  constexpr int V = Vec16<T>::kElems;
  switch (s.ld) {
    case 384:
      if constexpr (std::is_same_v<List, RegList>) {
        if (three) {
          go(bulk_scan_kernel<T, L2, 384 / V, 4, List, 3>);
          break;
        }
      }
      ur == 4 ? go(bulk_scan_kernel<T, L2, 384 / V, 4, List>) : go(bulk_scan_kernel<T, L2, 384 / V, 2, List>);
      break;
    case 512:
      ur == 4 ? go(bulk_scan_kernel<T, L2, 512 / V, 4, List>) : go(bulk_scan_kernel<T, L2, 512 / V, 2, List>);
      break;
    case 768: go(bulk_scan_kernel<T, L2, 768 / V, 2, List>); break;
    case 1024: go(bulk_scan_kernel<T, L2, 1024 / V, 2, List>); break;
    default: go(bulk_scan_kernel<T, L2, 1536 / V, 2, List>); break;
  }
  return blocks;
}

template <class T>
unsigned launch_dtype(const StoreRef& s, const float* q, const float* qn, uint32_t k, Cand* cand, unsigned blocks,
                      const ScanTail& tail, cudaStream_t st) {
  const bool l2 = s.metric == KeyMetric::l2;
  if (k <= 32)
    return l2 ? launch_typed<T, true, RegList>(s, q, qn, k, cand, blocks, tail, st)
              : launch_typed<T, false, RegList>(s, q, qn, k, cand, blocks, tail, st);
  return l2 ? launch_typed<T, true, WarpList>(s, q, qn, k, cand, blocks, tail, st)
            : launch_typed<T, false, WarpList>(s, q, qn, k, cand, blocks, tail, st);
}

}  // namespace

bool bulk_scan_usable(const StoreRef& s, uint32_t nq, uint32_t k) {
  // MNEMO_SCAN_BULK=0 turns it off (for measuring and testing the
  // register-fed scan on 16-bit rows).
  static const bool off = env_int("MNEMO_SCAN_BULK", 1) == 0;
  if (off || s.dtype == DType::f32) return false;
  if (nq != 1 || s.act || s.slots == 0) return false;
  const uint64_t row_bytes = s.ld * dtype_size(s.dtype);
  switch (s.ld) {
    case 384:
    case 512:
    case 768:
    case 1024:
    case 1536: break;
    default: return false;
  }
  // Bulk copies read 16-byte aligned rows; the layout must leave two blocks
  // per SM.
  if (reinterpret_cast<uintptr_t>(s.vectors) % 16 != 0 || row_bytes % 16 != 0) return false;
  if (BulkLayout(row_bytes, k, unit_rows(row_bytes)).bytes > kMaxSmem) return false;
  return device_major() >= 9;
}

unsigned bulk_scan_blocks(const StoreRef& s, unsigned sm_count) {
  // Two blocks per SM (shared memory), three where rows of up to 768 bytes
  // may take them (the launch holds the grid to the blocks resident), each
  // warp at least two units.
  const uint64_t row_bytes = s.ld * dtype_size(s.dtype);
  const uint32_t ur = unit_rows(row_bytes);
  const uint32_t n_units = (s.slots + ur - 1) / ur;
  const unsigned per = row_bytes <= 768 && ur == 4 ? 3 : 2;
  return std::max(1u, std::min(sm_count * per, ceil_div(n_units, kScanWarps * 2u)));
}

unsigned launch_bulk_scan(const StoreRef& s, const float* query, const float* qnorm, uint32_t k, Cand* cand,
                          unsigned blocks, const ScanTail& tail, cudaStream_t st) {
  unsigned used = 0;
  switch (s.dtype) {
    case DType::f16: used = launch_dtype<__half>(s, query, qnorm, k, cand, blocks, tail, st); break;
    case DType::bf16: used = launch_dtype<__nv_bfloat16>(s, query, qnorm, k, cand, blocks, tail, st); break;
    default: fail(Code::internal, "the bulk-copy scan reads 16-bit rows only");
  }
  MNEMO_CUDA_LAUNCHED("bulk_scan_kernel");
  return used;
}

}  // namespace mnemo::cuda
