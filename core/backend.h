// The interface every backend implements: the CPU one inside libmnemo.so and
// the CUDA one in its own module. Arguments arrive fully validated (cabi
// checks them), so a backend only computes; it throws mnemo::Error on a
// failure of its own (a device error, an allocation).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "filter_program.h"
#include "tensor.h"

namespace mnemo {

// Bumped whenever this interface or the argument structs change; the loader
// refuses a module built against another value.
constexpr int32_t kModuleInterfaceVersion = 8;

enum class BackendKind : int32_t { automatic = 0, cpu = 1, cuda = 2 };
// The operations, for backends that implement only some of them.
enum class Op : int32_t { similarity, search, score_pairs, resample, normalize_rows, layer_norm };
enum class Precision : int32_t { exact = 0, fast = 1 };

struct BackendConfig {
  Precision precision = Precision::exact;
  int32_t device_id = 0;
  uint32_t num_threads = 0;  // resolved, > 0
  uint64_t workspace_bytes = 0;
};

// Where the buffers of a call live. Device memory comes with the caller's
// stream; content checks (indices, lengths, sorted times, and non-finite
// values when `validate`) are then the backend's job, as the host cannot
// read the data.
struct Placement {
  bool on_device = false;
  void* stream = nullptr;  // cudaStream_t of the caller
  bool validate = true;
  // Device searches: the queries' content check inside the search (no wait
  // for the stream); a bad query's row is written as padding and
  // device_status (device int32, or null) receives the verdict.
  bool check_on_device = false;
  int32_t* device_status = nullptr;
  // A sharded search's part: ids, scores and device_status may be memory of
  // a peer device this one may write (the gather's lists on the first
  // device), so the last kernel writes them there and no copy follows.
  bool peer_outputs = false;
};

struct SimilarityArgs {
  Placement place;
  Metric metric = Metric::cosine;
  const float* queries = nullptr;  // [nq x targets.cols]
  uint64_t nq = 0;
  MatrixView targets;
  float* scores = nullptr;  // [nq x targets.rows]
};

struct PairsArgs {
  Placement place;
  Metric metric = Metric::cosine;
  MatrixView table;
  const void* src = nullptr;
  const void* tgt = nullptr;
  DType index_dtype = DType::u32;
  uint64_t n_pairs = 0;
  float* scores = nullptr;
};

struct ResampleArgs {
  Placement place;
  const void* data = nullptr;
  DType data_dtype = DType::f32;
  uint64_t batch = 0, n_src = 0, dim = 0, n_tgt = 0;
  const void* src_times = nullptr;
  const void* tgt_times = nullptr;
  DType time_dtype = DType::f32;
  const uint64_t* src_lengths = nullptr;  // optional [batch]
  const uint64_t* tgt_lengths = nullptr;  // optional [batch]
  void* out = nullptr;
};

struct NormArgs {
  Placement place;
  const void* in = nullptr;
  void* out = nullptr;
  DType dtype = DType::f32;
  uint64_t rows = 0, dim = 0;
  // LayerNorm only.
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float eps = 0.0f;
};

// A backend's own copy of a store (device-resident vectors, for example).
class StoreMirror {
 public:
  virtual ~StoreMirror() = default;
  // Called under the store's write lock after slots [first, first + count)
  // changed or the slot count changed (then first = 0, count = view.slots).
  virtual void update(const StoreView& view, uint64_t first, uint64_t count) = 0;
  // Device memory this mirror holds, for store statistics; 0 when unknown.
  virtual uint64_t device_bytes() const { return 0; }
  // Whether the backend evaluates filter programs over this mirror
  // (SearchArgs::programs) for searches of k results, and the version of
  // the field columns it holds (0: none). update_fields replaces them; it
  // is called under the store's read lock, serialised by the store.
  virtual bool evaluates_filters(uint64_t /*k*/) const { return false; }
  virtual uint64_t fields_version() const { return 0; }
  virtual void update_fields(const FieldColumns& /*columns*/) {}
};

// What a normalised activation search needs to know of one query's
// candidates (live, allowed slots): the ranges of its relevance keys and of
// the candidates' times and importances. Empty when candidates = 0.
struct ActRanges {
  float rel_min, rel_max;  // relevance keys: similarity, or -squared distance
  double t_min, t_max;
  float imp_min, imp_max;
  uint64_t candidates;
};

// Activation ranking (mnemo_search_options; formulas in activation.h).
struct Activation {
  bool on = false;
  bool normalize = false;
  float w_rel = 1.0f, w_rec = 0.0f, w_imp = 0.0f;
  double half_life = 86400.0;  // > 0, may be infinite
  double now = 0.0;            // finite, resolved by the caller
  // Normalised searches of a sharded store: the first pass writes each
  // query's ranges over this store's candidates to ranges_out [nq] and
  // nothing else; the second takes the combined ranges [nq] in `ranges`.
  const ActRanges* ranges = nullptr;
  ActRanges* ranges_out = nullptr;
};

// An inverted-file index's part of a search: only the probed lists' slots
// and the hot tier are candidates. The coarse step (the queries against the
// centroids, top nprobe) runs in the backend, so a device search never
// waits for the host.
struct IvfProbe {
  const StoreView* centroids = nullptr;          // nlist slots, f32, the store's metric, ids 0..nlist-1
  const StoreMirror* centroid_mirror = nullptr;  // this backend's copy, or null
  const uint64_t* offsets = nullptr;             // host [nlist + 1]: list l holds slots [offsets[l], offsets[l+1])
  const void* device_offsets = nullptr;          // the same on the backend's device (copy_to_device), or null
  uint32_t nprobe = 0;                           // 1 .. nlist - 1
  uint64_t hot_begin = 0;                        // slots [hot_begin, slots) are scanned by every query
  uint64_t longest = 0;                          // slots of the longest list
};

// A filter's selective plan: query i's candidates are only the slots
// slots[bounds[2i] .. bounds[2i+1]) (ascending; removed slots among them are
// skipped), so a search reads just the rows its filter matches. Queries
// may share one range.
struct SlotLists {
  const uint64_t* bounds = nullptr;  // [2 * nq]
  const uint32_t* slots = nullptr;
  uint64_t longest = 0;  // the most slots of one query
};

struct SearchArgs {
  Placement place;  // queries, ids and scores on the device with a stream
  const StoreView* store = nullptr;
  const StoreMirror* mirror = nullptr;  // this backend's mirror, or null
  const float* queries = nullptr;       // [nq x dim]
  uint64_t nq = 0;
  uint64_t k = 0;
  const uint64_t* allow = nullptr;  // bitmap over slots; null = all allowed
  bool apply_bias = false;
  Activation act;
  uint64_t* ids = nullptr;          // [nq x k]
  float* scores = nullptr;          // [nq x k]
  const IvfProbe* probe = nullptr;  // null: every slot is a candidate
  // Per-query candidate slots (no probe, no normalised activation), or null.
  const SlotLists* lists = nullptr;
  // Per-query filter programs over the mirror's field columns (no probe, no
  // normalised activation, a mirror that evaluates_filters()), or null:
  // each query reads just the driver slots its program passes.
  const FilterPrograms* programs = nullptr;
};

// Memory a backend holds a copy of (list offsets on a device).
class DeviceCopy {
 public:
  virtual ~DeviceCopy() = default;
  virtual const void* data() const = 0;
};

// One search of a store sharded over several GPUs whose lists are merged on
// the first shard's device: each shard's search reads and writes where
// part(i) says, on its own device and stream, and merge() puts the merged
// lists into the caller's buffers.
class ShardGather {
 public:
  struct Part {
    const float* queries;  // [nq x dim] on shard i's device
    uint64_t* ids;         // [nq x k] there
    float* scores;         // [nq x k] there
    Placement place;       // shard i's stream, ordered after the caller's earlier work
  };
  virtual ~ShardGather() = default;
  virtual Part part(size_t i) const = 0;
  // Queued after every part's search, on the caller's stream: per query the
  // best k of all parts by topk_merge's rule, from lists as a search writes
  // them (sorted, padding last, ids unique across parts); device_status
  // receives the first part's verdict that is not OK. Host buffers: the
  // results are in them when this returns.
  virtual void merge() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  // Device or SIMD description for runtime info.
  virtual std::string description() const = 0;
  // Whether this backend computes `op` itself; the runtime sends the others
  // to the CPU backend (and says so in its report).
  virtual bool implements(Op) const { return true; }

  virtual void similarity(const SimilarityArgs& a) = 0;
  virtual void search(const SearchArgs& a) = 0;
  virtual void score_pairs(const PairsArgs& a) = 0;
  virtual void resample(const ResampleArgs& a) = 0;
  virtual void normalize_rows(const NormArgs& a) = 0;
  virtual void layer_norm(const NormArgs& a) = 0;

  // Copies `bytes` of this backend's memory at `src` to the host once the
  // work queued on `stream` is done (a touching device search reads back the
  // ids it returned). Host-memory backends copy at once.
  virtual void copy_to_host(void* dst, const void* src, uint64_t bytes, void* /*stream*/) {
    std::memcpy(dst, src, bytes);
  }

  // A mirror for a new store, or null when the backend searches host memory.
  virtual std::unique_ptr<StoreMirror> attach_store(const StoreView& view) = 0;
  // A copy of `bytes` of host memory in this backend's memory, or null when
  // the backend reads host memory.
  virtual std::unique_ptr<DeviceCopy> copy_to_device(const void* /*src*/, uint64_t /*bytes*/) { return nullptr; }
  // The streams and buffers of a search over `shards` (this backend first,
  // every one of this module) whose lists are merged on this backend's
  // device, for the caller's buffers (place, queries [nq x dim], ids and
  // scores [nq x k]): on this device (place.on_device), or host memory
  // (uploaded first, the merged lists downloaded by merge(), which then
  // waits). The queries' non-finite check, when place.validate asks for
  // it, is the gather's (the parts come with validate off) or the parts'
  // (check_on_device). Null when the backend has no such path, or for host
  // buffers where it prefers each shard's own host search.
  virtual std::unique_ptr<ShardGather> gather_shards(const std::vector<Backend*>& /*shards*/,
                                                     const Placement& /*place*/, Metric /*metric*/,
                                                     const float* /*queries*/, uint64_t /*nq*/, uint64_t /*dim*/,
                                                     uint64_t /*k*/, uint64_t* /*ids*/, float* /*scores*/) {
    return nullptr;
  }
};

}  // namespace mnemo

// The entry points a backend module exports (C linkage so dlsym finds them).
extern "C" {
typedef int32_t (*mnemo_module_interface_version_fn)(void);
// Returns 0 and a new backend, or a Code value with a reason in err.
typedef int32_t (*mnemo_module_create_fn)(const mnemo::BackendConfig* cfg, mnemo::Backend** out, char* err,
                                          size_t err_len);
}
