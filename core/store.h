// The memory store: caller-chosen uint64 ids, vectors in a storage dtype,
// a bias per memory. Upsert keeps a memory's slot; remove tombstones and
// compacts once a quarter of the slots are dead. Searches share a reader
// lock; writes take it exclusively.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "aligned_buffer.h"
#include "backend.h"
#include "runtime.h"

namespace mnemo {

enum class FilterKind : int32_t { none = 0, ids = 1, slot_bitmap = 2 };

struct SearchFilter {
  FilterKind kind = FilterKind::none;
  const uint64_t* ids = nullptr;
  const uint64_t* bitmap = nullptr;
  uint64_t count = 0;  // ids, or bits of the bitmap
};

struct StoreContents {  // a consistent copy for saving
  uint64_t dim;
  DType dtype;
  Metric metric;
  std::vector<uint64_t> ids;
  std::vector<unsigned char> vectors;
  std::vector<float> biases;
};

class Store {
 public:
  Store(const Runtime& rt, uint64_t dim, DType dtype, Metric metric);
  ~Store();

  uint64_t dim() const { return dim_; }
  DType dtype() const { return dtype_; }
  Metric metric() const { return metric_; }
  const Runtime& runtime() const { return rt_; }

  // vectors: [count x dim] of f32 or the store dtype; ids validated by caller.
  void add(const uint64_t* ids, const void* vectors, DType vectors_dtype, uint64_t count);
  uint64_t remove(const uint64_t* ids, uint64_t count);
  uint64_t count() const;
  uint64_t slot_count() const;
  bool slot_of(uint64_t id, uint64_t& slot) const;
  bool get(uint64_t id, float* out) const;
  // Throws not_found (naming the position) before changing any bias.
  void set_bias(const uint64_t* ids, const float* biases, uint64_t count);
  // Throws shape for a bitmap of the wrong length, before writing anything.
  void search(const float* queries, uint64_t nq, uint64_t k, const SearchFilter& filter, bool apply_bias,
              uint64_t* out_ids, float* out_scores) const;

  StoreContents snapshot() const;

 private:
  StoreView view() const;
  void mirror_update(uint64_t first, uint64_t count);
  void compact();

  const Runtime& rt_;
  const uint64_t dim_;
  const DType dtype_;
  const Metric metric_;
  const size_t row_bytes_;
  // Readers pass through gate_ before taking mu_ shared; a writer holds gate_
  // while it waits for mu_, so a stream of searches cannot starve it.
  mutable std::mutex gate_;
  mutable std::shared_mutex mu_;
  std::shared_lock<std::shared_mutex> read_lock() const;
  std::unique_lock<std::shared_mutex> write_lock();
  AlignedBuffer vectors_;
  std::vector<uint64_t> slot_ids_;  // kNoId marks a removed slot
  std::vector<float> norms_, biases_;
  std::unordered_map<uint64_t, uint64_t> slot_of_;
  uint64_t dead_ = 0;
  std::unique_ptr<StoreMirror> mirror_;
};

// Persistence (store_file.cpp).
void save_store(const Store& store, const std::string& path);
std::unique_ptr<Store> load_store(const Runtime& rt, const std::string& path);

}  // namespace mnemo
