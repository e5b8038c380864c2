// Filters evaluated on the device (SearchArgs::programs): the store's field
// columns live beside its vectors, and each group of queries' program runs
// over the slots of its driver (a union of posting lists). A first pass
// tests every driver slot and counts the passes per tile of slots, a scan
// turns the counts into places, a second pass writes the passing slots in
// driver order, and the span scan reads just those rows per query. What
// crosses to the host is the programs (up) and one count per group (down,
// for the grid of the scan), never a list of slots.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>
#include <vector>

#include "core/meta/number_order.h"
#include "device/arena.h"
#include "device/cuda_backend.h"
#include "device/device_store.h"
#include "search/filter_dense.h"
#include "search/list_scan.h"
#include "search/search_kernels.h"

namespace mnemo::cuda {

namespace {

constexpr int kEvalThreads = 256;
constexpr int kPerThread = 8;  // driver slots a thread tests (one flag byte)
constexpr uint32_t kTile = kEvalThreads * kPerThread;
// Driver slots evaluated in one pass: bounds the lists' buffer (4 bytes a
// slot) and keeps every list's place within 32 bits.
constexpr uint64_t kChunkSlots = uint64_t{1} << 28;

struct Cols {
  const uint64_t* tag_at;
  const uint32_t* tags;
  const uint32_t* ns;
  const uint64_t* attr_at;
  const ColumnAttr* attrs;
  const uint64_t* list_at;
  const uint32_t* lists;
  uint64_t slots;  // slots the columns cover
  const uint64_t* ids;
  const double* times;
  const float* importance;
};

struct Progs {
  const ProgNode* nodes;
  const uint32_t* node_at;
  const uint32_t* u32;
  const uint64_t* u64;
  const ProgValue* values;
  const DriverPart* parts;
  const uint32_t* part_at;
};

struct Tile {
  uint32_t group, part, start;
};

template <class T>
__device__ bool sorted_has(const T* a, uint64_t n, T x) {
  uint64_t lo = 0, hi = n;
  while (lo < hi) {
    const uint64_t mid = (lo + hi) / 2;
    if (a[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && a[lo] == x;
}

__device__ bool is_number(uint32_t t) { return t == 1 || t == 2; }  // ValueType i64, f64

__device__ int order_of(uint32_t at, uint64_t ab, uint32_t bt, uint64_t bb) {
  return order_numbers(at == 1, static_cast<int64_t>(ab), __longlong_as_double(static_cast<long long>(ab)), bt == 1,
                       static_cast<int64_t>(bb), __longlong_as_double(static_cast<long long>(bb)));
}

// Equality by the store's rules (FilterTest::attribute): numbers as
// numbers, strings by pool id, bools by value, other pairs never equal.
__device__ bool value_eq(const ColumnAttr& v, const ProgValue& o) {
  if (is_number(v.type) && is_number(o.type)) return order_of(v.type, v.bits, o.type, o.bits) == 0;
  if (v.type != o.type) return false;
  if (v.type == 4) return o.text != 0 && static_cast<uint32_t>(v.bits) == o.text;
  return v.bits == o.bits;
}

__device__ bool attribute(const ProgNode& n, const Progs& P, const ColumnAttr* row, uint64_t count) {
  uint64_t lo = 0, hi = count;
  while (lo < hi) {
    const uint64_t mid = (lo + hi) / 2;
    if (row[mid].name < n.name)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo >= count || row[lo].name != n.name) return false;
  const ColumnAttr v = row[lo];
  switch (n.op) {
    case ProgOp::attr_exists: return true;
    case ProgOp::attr_eq: return value_eq(v, P.values[n.a]);
    case ProgOp::attr_ne: return !value_eq(v, P.values[n.a]);
    case ProgOp::attr_in:
    case ProgOp::attr_not_in: {
      bool any = false;
      for (uint32_t j = 0; j < n.n && !any; ++j) any = value_eq(v, P.values[n.a + j]);
      return n.op == ProgOp::attr_in ? any : !any;
    }
    case ProgOp::attr_order: {
      if (!is_number(v.type)) return false;
      const ProgValue& o = P.values[n.a];
      const int c = order_of(v.type, v.bits, o.type, o.bits);
      switch (n.cmp) {
        case 3: return c < 0;
        case 4: return c <= 0;
        case 5: return c > 0;
        case 6: return c >= 0;
        default: {
          const ProgValue& o2 = P.values[n.a + 1];
          return c >= 0 && order_of(v.type, v.bits, o2.type, o2.bits) <= 0;
        }
      }
    }
    case ProgOp::attr_text_in: return v.type == 4 && sorted_has(P.u32 + n.a, n.n, static_cast<uint32_t>(v.bits));
    default: return false;
  }
}

// Group g's program on `slot`: a stack of booleans in the bits of one word.
// The row extents of one slot's tags and attributes, loaded ahead (each
// thread's slots' loads at once: they are the latency of the test).
struct Rows {
  uint64_t tb = 0, te = 0, ab = 0, ae = 0;
};

// What a program reads of a slot's row, so that nothing else is loaded.
enum : uint32_t { kReadsTags = 1, kReadsAttrs = 2 };

__device__ uint32_t reads_of(const Progs& P, uint32_t g) {
  uint32_t r = 0;
  for (uint32_t i = P.node_at[g]; i < P.node_at[g + 1]; ++i) {
    const ProgOp op = P.nodes[i].op;
    if (op == ProgOp::tag_any || op == ProgOp::tag_all) r |= kReadsTags;
    if (op >= ProgOp::attr_exists && op <= ProgOp::attr_text_in) r |= kReadsAttrs;
  }
  return r;
}

__device__ Rows rows_of(const Cols& C, uint32_t slot, uint32_t reads) {
  Rows r;
  if (slot >= C.slots) return r;
  if (reads & kReadsTags) r.tb = C.tag_at[slot], r.te = C.tag_at[slot + 1];
  if (reads & kReadsAttrs) r.ab = C.attr_at[slot], r.ae = C.attr_at[slot + 1];
  return r;
}

__device__ bool run_program(const Progs& P, const Cols& C, uint32_t g, uint32_t slot, const Rows& w) {
  const bool have = slot < C.slots;
  const uint64_t tb = w.tb, te = w.te, ab = w.ab, ae = w.ae;
  uint64_t st = 0;
  for (uint32_t i = P.node_at[g]; i < P.node_at[g + 1]; ++i) {
    const ProgNode n = P.nodes[i];
    bool v = false;
    switch (n.op) {
      case ProgOp::push_false: v = false; break;
      case ProgOp::push_true: v = true; break;
      case ProgOp::tag_any:
        for (uint32_t j = 0; j < n.n && !v; ++j) v = sorted_has(C.tags + tb, te - tb, P.u32[n.a + j]);
        break;
      case ProgOp::tag_all:
        v = true;
        for (uint32_t j = 0; j < n.n && v; ++j) v = sorted_has(C.tags + tb, te - tb, P.u32[n.a + j]);
        break;
      case ProgOp::ns_in: {
        const uint32_t ns = have ? C.ns[slot] : 0;
        v = ns != 0 && sorted_has(P.u32 + n.a, n.n, ns);
        break;
      }
      case ProgOp::ids_in: v = sorted_has(P.u64 + n.a, n.n, C.ids[slot]); break;
      case ProgOp::time_in: v = C.times[slot] >= n.lo && C.times[slot] <= n.hi; break;
      case ProgOp::importance_in: v = C.importance[slot] >= n.lo && C.importance[slot] <= n.hi; break;
      case ProgOp::all_of:
      case ProgOp::any_of: {
        const uint64_t m = n.n ? (~0ull >> (64 - n.n)) : 0;
        v = n.op == ProgOp::all_of ? (st & m) == m : (st & m) != 0;
        st = n.n ? st >> n.n : st;
        break;
      }
      case ProgOp::negate: st ^= 1; continue;
      default: v = attribute(n, P, C.attrs + ab, ae - ab); break;
    }
    st = (st << 1) | (v ? 1 : 0);
  }
  return st & 1;
}

__device__ uint32_t part_slot(const DriverPart& p, const Progs& P, const Cols& C, uint32_t e) {
  switch (p.kind) {
    case DriverPart::posting: return C.lists[C.list_at[p.list] + e];
    case DriverPart::own: return P.u32[p.a + e];
    default: return e;
  }
}

__device__ bool part_has(const DriverPart& p, const Progs& P, const Cols& C, uint32_t slot) {
  switch (p.kind) {
    case DriverPart::posting:
      return sorted_has(C.lists + C.list_at[p.list], C.list_at[p.list + 1] - C.list_at[p.list], slot);
    case DriverPart::own: return sorted_has(P.u32 + p.a, p.n, slot);
    default: return true;
  }
}

// Which of a thread's kPerThread driver entries from e0 pass (bit j: entry
// e0 + j), each read once (a union's later parts skip the slots of the
// parts before them). The entries' loads go out together, level by level
// (slot, row extents), before any test.
__device__ uint32_t pass_mask(const Progs& P, const Cols& C, const Tile& t, const DriverPart& p, uint64_t e0,
                              uint32_t reads) {
  uint32_t slot[kPerThread];
  Rows rows[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j)
    slot[j] = e0 + j < p.size ? part_slot(p, P, C, static_cast<uint32_t>(e0 + j)) : UINT32_MAX;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j)
    if (slot[j] != UINT32_MAX) rows[j] = rows_of(C, slot[j], reads);
  uint32_t mask = 0;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (slot[j] == UINT32_MAX) continue;
    bool earlier = false;
    for (uint32_t q = P.part_at[t.group]; q < t.part && !earlier; ++q) earlier = part_has(P.parts[q], P, C, slot[j]);
    if (!earlier && run_program(P, C, t.group, slot[j], rows[j])) mask |= 1u << j;
  }
  return mask;
}

__global__ void __launch_bounds__(kEvalThreads)
    count_passes(Progs P, Cols C, const Tile* __restrict__ tiles, uint8_t* __restrict__ flags,
                 uint32_t* __restrict__ counts) {
  using Reduce = cub::BlockReduce<uint32_t, kEvalThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const Tile t = tiles[blockIdx.x];
  const DriverPart p = P.parts[t.part];
  const uint32_t reads = reads_of(P, t.group);
  const uint64_t e0 = t.start + static_cast<uint64_t>(threadIdx.x) * kPerThread;
  const uint32_t mask = pass_mask(P, C, t, p, e0, reads);
  flags[static_cast<uint64_t>(blockIdx.x) * kEvalThreads + threadIdx.x] = static_cast<uint8_t>(mask);
  const uint32_t total = Reduce(tmp).Sum(static_cast<uint32_t>(__popc(mask)));
  if (threadIdx.x == 0) counts[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kEvalThreads)
    write_passes(Progs P, Cols C, const Tile* __restrict__ tiles, const uint8_t* __restrict__ flags,
                 const uint32_t* __restrict__ offsets, uint32_t* __restrict__ out) {
  using Scan = cub::BlockScan<uint32_t, kEvalThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const Tile t = tiles[blockIdx.x];
  const DriverPart p = P.parts[t.part];
  const uint32_t mask = flags[static_cast<uint64_t>(blockIdx.x) * kEvalThreads + threadIdx.x];
  uint32_t at = 0;
  Scan(tmp).ExclusiveSum(static_cast<uint32_t>(__popc(mask)), at);
  at += offsets[blockIdx.x];
  const uint64_t e0 = t.start + static_cast<uint64_t>(threadIdx.x) * kPerThread;
  for (int j = 0; j < kPerThread; ++j)
    if ((mask >> j) & 1) out[at++] = part_slot(p, P, C, static_cast<uint32_t>(e0 + j));
}

// Each group's list {first, count} (groups g0 + i, first tile first[i]),
// then each query's from its group.
__global__ void group_extents(const uint32_t* __restrict__ first, uint32_t groups, const uint32_t* __restrict__ offsets,
                              uint2* __restrict__ ext) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= groups) return;
  const uint32_t b = offsets[first[i]], e = offsets[first[i + 1]];
  ext[i] = make_uint2(b, e - b);
}

__global__ void query_bounds(const uint32_t* __restrict__ group_of, uint32_t g0, uint32_t nq,
                             const uint2* __restrict__ ext, uint2* __restrict__ bounds) {
  const uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q < nq) bounds[q] = ext[group_of[q] - g0];
}

template <class T>
void put(std::vector<unsigned char>& host, size_t off, const std::vector<T>& v) {
  if (!v.empty()) std::memcpy(host.data() + off, v.data(), v.size() * sizeof(T));
}

}  // namespace

bool DeviceStore::evaluates_filters(uint64_t k) const { return k <= static_cast<uint64_t>(kSmallKMax); }

void DeviceStore::update_fields(const FieldColumns& c) {
  wait_readers();
  auto ctx = pool_.acquire();
  cudaStream_t st = ctx->stream;
  auto up = [&](DeviceBuffer& b, const auto& v) {
    const size_t bytes = v.size() * sizeof(v[0]);
    b.reserve(std::max<size_t>(bytes, 8));
    if (bytes) MNEMO_CUDA_CHECK(cudaMemcpyAsync(b.get(), v.data(), bytes, cudaMemcpyHostToDevice, st));
  };
  fields_.version = 0;  // none valid until the copies are in
  up(fields_.tag_at, c.tag_at);
  up(fields_.tags, c.tags);
  up(fields_.ns, c.ns);
  up(fields_.attr_at, c.attr_at);
  up(fields_.attrs, c.attrs);
  up(fields_.list_at, c.list_at);
  up(fields_.lists, c.lists);
  ctx->sync();
  fields_.slots = c.slots;
  fields_.version = c.version;
}

void CudaBackend::search_programs(const SearchArgs& a) {
  const auto* ds = static_cast<const DeviceStore*>(a.mirror);
  const StoreView& v = *a.store;
  const FilterPrograms& F = *a.programs;
  const uint64_t nq = a.nq, k = a.k, G = F.groups();
  if (F.group_of.size() != nq || G == 0) fail(Code::internal, "filter programs do not cover the queries");
  const DeviceStore::Fields& f = ds->fields();
  auto ctx = pool_.acquire();
  cudaStream_t st = ctx->stream;
  MNEMO_CUDA_CHECK(cudaEventSynchronize(ctx->last_use));
  const uint64_t ld = ds->ld();
  const StoreRef s = list_store_ref(*ds, v, a);
  Cols C{f.tag_at.get<uint64_t>(),
         f.tags.get<uint32_t>(),
         f.ns.get<uint32_t>(),
         f.attr_at.get<uint64_t>(),
         f.attrs.get<ColumnAttr>(),
         f.list_at.get<uint64_t>(),
         f.lists.get<uint32_t>(),
         f.slots,
         ds->ids(),
         ds->times(),
         ds->importance()};
  // The dense plan (filter_dense.h) takes the groups of tag programs whose
  // drivers hold at least 1 / MNEMO_FILTER_DENSE of the slots (100 unless
  // set; 0 turns it off), where at least kDenseMinQueries queries have
  // them and the long-row batch kernel serves the search (FAST, k <= 16).
  // A pass of up to 112 queries over the store costs about the same
  // whatever their filters; a span query 0.066 ns per driver slot and
  // 0.27 ns per row read. On the H200 (10M x 192 f16, the filtered track's
  // 10,000 queries in one batch, one process and store): 63,518 queries/s
  // at 30 (2,294 dense queries in 57.1 ms), 69,864 at 100 (3,524 in 87.6
  // ms, the spans' evaluation and scan 61.6 -> 19.0 ms), 60,883 at 300;
  // 1/30 was the best share while a pass took 4 ms instead of 2.6.
  // Their groups get no tiles here: the span scan pads their rows, which
  // the dense pass then writes.
  constexpr uint64_t kDenseMinQueries = 32;
  const uint64_t dense_share = [] {
    const char* e = std::getenv("MNEMO_FILTER_DENSE");
    return e && *e ? std::strtoull(e, nullptr, 10) : 100ull;
  }();
  const bool fast = cfg_.precision == Precision::fast && fast_queries_fit(v.dtype, a.queries, nq, v.dim);
  // Each group's driver size (its parts' slots), for the plan and the chunks.
  std::vector<uint64_t> driver_of(G, 0);
  for (uint32_t g = 0; g < G; ++g)
    for (uint32_t p = F.part_at[g]; p < F.part_at[g + 1]; ++p) driver_of[g] += F.parts[p].size;
  std::vector<char> dense(G, 0);
  std::vector<uint32_t> dense_queries;
  if (dense_share > 0 && dense_mask_usable(s, std::max<uint64_t>(nq, kDenseMinQueries), k, fast)) {
    for (uint32_t g = 0; g < G; ++g) dense[g] = driver_of[g] * dense_share >= v.slots && dense_program(F, g);
    for (uint64_t q = 0; q < nq; ++q)
      if (dense[F.group_of[q]]) dense_queries.push_back(static_cast<uint32_t>(q));
    if (dense_queries.size() < kDenseMinQueries) {
      std::fill(dense.begin(), dense.end(), 0);
      dense_queries.clear();
    }
  }
  // Chunks of groups whose drivers hold at most kChunkSlots (a larger
  // group alone), each with its tiles.
  struct Chunk {
    uint32_t g0, g1;
    uint64_t q0, q1;
    std::vector<Tile> tiles;
    std::vector<uint32_t> first;  // each group's first tile, then the end
    uint64_t driver = 0;
  };
  std::vector<Chunk> chunks;
  {
    uint64_t q = 0;
    for (uint32_t g = 0; g < G; ++g) {
      const uint64_t size = dense[g] ? 0 : driver_of[g];
      if (chunks.empty() || (chunks.back().driver + size > kChunkSlots && chunks.back().g1 > chunks.back().g0))
        chunks.push_back(Chunk{g, g, q, q, {}, {}, 0});
      Chunk& c = chunks.back();
      c.first.push_back(static_cast<uint32_t>(c.tiles.size()));
      if (!dense[g])
        for (uint32_t p = F.part_at[g]; p < F.part_at[g + 1]; ++p)
          for (uint64_t e = 0; e < F.parts[p].size; e += kTile) c.tiles.push_back(Tile{g, p, static_cast<uint32_t>(e)});
      c.driver += size;
      c.g1 = g + 1;
      while (q < nq && F.group_of[q] == g) ++q;
      c.q1 = q;
    }
    for (Chunk& c : chunks) c.first.push_back(static_cast<uint32_t>(c.tiles.size()));
    if (chunks.back().q1 != nq) fail(Code::internal, "filter programs' groups are not in query order");
  }
  if (v.slots >= 0xffffffffull) fail(Code::unsupported, "filtered device searches hold at most 2^32 - 2 slots");
  // The programs and the queries (once), then per chunk its tiles and lists.
  Arena pa;
  const size_t o_nodes = pa.add(F.nodes.size() * sizeof(ProgNode)), o_node_at = pa.add(F.node_at.size() * 4),
               o_u32 = pa.add(F.u32.size() * 4), o_u64 = pa.add(F.u64.size() * 8),
               o_values = pa.add(F.values.size() * sizeof(ProgValue)),
               o_parts = pa.add(F.parts.size() * sizeof(DriverPart)), o_part_at = pa.add(F.part_at.size() * 4),
               o_group_of = pa.add(nq * 4);
  size_t most_tiles = 0, most_groups = 0;
  uint64_t most_driver = 0;
  for (const Chunk& c : chunks) {
    most_tiles = std::max(most_tiles, c.tiles.size());
    most_groups = std::max<size_t>(most_groups, c.g1 - c.g0);
    most_driver = std::max(most_driver, c.driver);
  }
  size_t scan_bytes = 0;
  MNEMO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<uint32_t*>(nullptr),
                                                 static_cast<uint32_t*>(nullptr), most_tiles + 1, st));
  const size_t o_tiles = pa.add(most_tiles * sizeof(Tile)), o_first = pa.add((most_groups + 1) * 4),
               o_flags = pa.add(most_tiles * kEvalThreads), o_counts = pa.add((most_tiles + 1) * 4),
               o_offsets = pa.add((most_tiles + 1) * 4), o_ext = pa.add(most_groups * 8), o_bounds = pa.add(nq * 8),
               o_slots = pa.add(std::max<uint64_t>(most_driver, 1) * 4), o_temp = pa.add(scan_bytes);
  ctx->work2.reserve(pa.size());
  void* pb = ctx->work2.get();
  std::vector<unsigned char> host(o_tiles);
  put(host, o_nodes, F.nodes);
  put(host, o_node_at, F.node_at);
  put(host, o_u32, F.u32);
  put(host, o_u64, F.u64);
  put(host, o_values, F.values);
  put(host, o_parts, F.parts);
  put(host, o_part_at, F.part_at);
  put(host, o_group_of, F.group_of);
  MNEMO_CUDA_CHECK(cudaMemcpyAsync(pb, host.data(), host.size(), cudaMemcpyHostToDevice, st));
  const Progs P{at<ProgNode>(pb, o_nodes),  at<uint32_t>(pb, o_node_at), at<uint32_t>(pb, o_u32),
                at<uint64_t>(pb, o_u64),    at<ProgValue>(pb, o_values), at<DriverPart>(pb, o_parts),
                at<uint32_t>(pb, o_part_at)};
  auto* d_tiles = at<Tile>(pb, o_tiles);
  auto* d_first = at<uint32_t>(pb, o_first);
  auto* d_flags = at<uint8_t>(pb, o_flags);
  auto* d_counts = at<uint32_t>(pb, o_counts);
  auto* d_offsets = at<uint32_t>(pb, o_offsets);
  auto* d_ext = at<uint2>(pb, o_ext);
  auto* d_bounds = at<uint2>(pb, o_bounds);
  auto* d_slots = at<uint32_t>(pb, o_slots);
  const uint32_t* d_group_of = at<uint32_t>(pb, o_group_of);

  const ListIo io = stage_list_io(*ctx, st, a.queries, nq, v.dim, ld, k);

  // MNEMO_FILTER_TRACE=1: the passes' times and sizes on stderr.
  static const bool trace = [] {
    const char* e = std::getenv("MNEMO_FILTER_TRACE");
    return e && *e == '1';
  }();
  cudaEvent_t ev[3] = {nullptr, nullptr, nullptr};
  float eval_ms = 0, scan_ms = 0;
  uint64_t driver = 0, passing = 0, rows = 0, tiles = 0;
  uint32_t longest_all = 0;
  if (trace)
    for (auto& e : ev) MNEMO_CUDA_CHECK(cudaEventCreate(&e));
  std::vector<uint2> ext(most_groups);
  for (const Chunk& c : chunks) {
    if (trace) MNEMO_CUDA_CHECK(cudaEventRecord(ev[0], st));
    const auto T = static_cast<uint32_t>(c.tiles.size());
    const uint32_t ng = c.g1 - c.g0;
    const auto m = static_cast<uint32_t>(c.q1 - c.q0);
    if (T > 0) {
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(d_tiles, c.tiles.data(), T * sizeof(Tile), cudaMemcpyHostToDevice, st));
      count_passes<<<T, kEvalThreads, 0, st>>>(P, C, d_tiles, d_flags, d_counts);
      MNEMO_CUDA_CHECK(cudaGetLastError());
    }
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(d_first, c.first.data(), (ng + 1) * 4, cudaMemcpyHostToDevice, st));
    MNEMO_CUDA_CHECK(cudaMemsetAsync(d_counts + T, 0, 4, st));
    size_t temp = scan_bytes;
    MNEMO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(at<void>(pb, o_temp), temp, d_counts, d_offsets, T + 1, st));
    if (T > 0) {
      write_passes<<<T, kEvalThreads, 0, st>>>(P, C, d_tiles, d_flags, d_offsets, d_slots);
      MNEMO_CUDA_CHECK(cudaGetLastError());
    }
    group_extents<<<ceil_div(ng, 256u), 256, 0, st>>>(d_first, ng, d_offsets, d_ext);
    MNEMO_CUDA_CHECK(cudaGetLastError());
    query_bounds<<<ceil_div(m, 256u), 256, 0, st>>>(d_group_of + c.q0, c.g0, m, d_ext, d_bounds + c.q0);
    MNEMO_CUDA_CHECK(cudaGetLastError());
    // The longest list sizes the scan's grid: the groups' counts, down.
    if (trace) MNEMO_CUDA_CHECK(cudaEventRecord(ev[1], st));
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(ext.data(), d_ext, ng * 8, cudaMemcpyDeviceToHost, st));
    ctx->sync();
    uint32_t longest = 0;
    for (uint32_t i = 0; i < ng; ++i) longest = std::max(longest, ext[i].y);
    launch_list_scan(*ctx, st, s, io.q + c.q0 * ld, io.qn + c.q0, m, k, d_slots, d_bounds + c.q0, longest, sm_count_,
                     cfg_.workspace_bytes, io.ids + c.q0 * k, io.scores + c.q0 * k);
    if (trace) {
      MNEMO_CUDA_CHECK(cudaEventRecord(ev[2], st));
      MNEMO_CUDA_CHECK(cudaEventSynchronize(ev[2]));
      float a = 0, b = 0;
      MNEMO_CUDA_CHECK(cudaEventElapsedTime(&a, ev[0], ev[1]));
      MNEMO_CUDA_CHECK(cudaEventElapsedTime(&b, ev[1], ev[2]));
      eval_ms += a, scan_ms += b;
      driver += c.driver, tiles += T;
      longest_all = std::max(longest_all, longest);
      for (uint32_t i = 0; i < ng; ++i) passing += ext[i].y;
      for (uint64_t qq = c.q0; qq < c.q1; ++qq) rows += ext[F.group_of[qq] - c.g0].y;
    }
  }
  float dense_ms = 0;
  if (!dense_queries.empty()) {
    if (trace) MNEMO_CUDA_CHECK(cudaEventRecord(ev[0], st));
    const DenseColumns dc{C.list_at, C.lists};
    dense_filter_search(*ctx, st, s, F, dc, dense_queries, io.q, io.qn, k, cfg_.workspace_bytes, sm_count_, io.ids,
                        io.scores);
    if (trace) {
      MNEMO_CUDA_CHECK(cudaEventRecord(ev[1], st));
      MNEMO_CUDA_CHECK(cudaEventSynchronize(ev[1]));
      MNEMO_CUDA_CHECK(cudaEventElapsedTime(&dense_ms, ev[0], ev[1]));
    }
  }
  if (trace) {
    std::fprintf(stderr, "mnemo device filter, dense plan: %zu queries, %.3f ms\n", dense_queries.size(), dense_ms);
    for (auto& e : ev) MNEMO_CUDA_CHECK(cudaEventDestroy(e));
    std::fprintf(stderr,
                 "mnemo device filter: %llu queries, %llu groups, %zu chunks, %llu tiles, driver %llu slots, "
                 "passing %llu, rows scanned %llu, longest %u; evaluate %.3f ms, scan %.3f ms (with the count's "
                 "trip down)\n",
                 static_cast<unsigned long long>(nq), static_cast<unsigned long long>(G), chunks.size(),
                 static_cast<unsigned long long>(tiles), static_cast<unsigned long long>(driver),
                 static_cast<unsigned long long>(passing), static_cast<unsigned long long>(rows), longest_all, eval_ms,
                 scan_ms);
  }
  finish_list_io(*ctx, st, io, nq, k, a.ids, a.scores);
}

}  // namespace mnemo::cuda
