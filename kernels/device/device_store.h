// The GPU copy of a store: vectors resident on the device in rows padded to
// a multiple of 8 elements (so every row starts 16-byte aligned and the pad
// is zero, which changes no dot product or distance), plus ids, norms,
// biases, last-access times (f64) and importances per slot. Updated in place from the host store's dirty range.
#pragma once

#include <mutex>
#include <vector>

#include "core/backend.h"
#include "device/cuda_util.cuh"
#include "device/exec_context.h"

namespace mnemo::cuda {

class DeviceStore final : public StoreMirror {
 public:
  DeviceStore(ContextPool& pool, const StoreView& view);
  ~DeviceStore() override;
  DeviceStore(const DeviceStore&) = delete;
  DeviceStore& operator=(const DeviceStore&) = delete;
  void update(const StoreView& view, uint64_t first, uint64_t count) override;
  // A search queued on a caller's stream reads this mirror after its call
  // returns; the next update waits for it (and every other such reader).
  void add_reader(cudaStream_t st) const;

  const void* vectors() const { return vectors_.get(); }
  const uint64_t* ids() const { return ids_.get<uint64_t>(); }
  const float* norms() const { return norms_.get<float>(); }
  const float* biases() const { return biases_.get<float>(); }
  const double* times() const { return times_.get<double>(); }
  const float* importance() const { return importance_.get<float>(); }
  uint64_t ld() const { return ld_; }  // padded row length in elements
  uint64_t slots() const { return slots_; }
  // Device memory held for this store (capacity, not just live slots).
  uint64_t device_bytes() const override {
    return vectors_.size() + ids_.size() + norms_.size() + biases_.size() + times_.size() + importance_.size() +
           fields_.bytes();
  }

  // Filter programs (program_search.cu): the store's field columns on the
  // device. Lists of up to kSmallKMax results (the span scan's).
  bool evaluates_filters(uint64_t k) const override;
  uint64_t fields_version() const override { return fields_.version; }
  void update_fields(const FieldColumns& c) override;
  struct Fields {
    uint64_t version = 0, slots = 0;
    DeviceBuffer tag_at, tags, ns, attr_at, attrs, list_at, lists;
    uint64_t bytes() const {
      return tag_at.size() + tags.size() + ns.size() + attr_at.size() + attrs.size() + list_at.size() + lists.size();
    }
  };
  const Fields& fields() const { return fields_; }

 private:
  void grow(uint64_t slots, ExecContext& ctx);
  // Copies rows [first, first + count) of the view's vectors to the device
  // on ctx's stream (queued; the caller synchronises).
  void upload_rows(const StoreView& v, uint64_t first, uint64_t count, ExecContext& ctx);
  // Updates of at least kStageMin bytes of rows are staged in pinned chunks
  // of kStageChunk, which the store keeps (2 x 32 MB) once it has had one.
  static constexpr size_t kStageMin = size_t{8} << 20, kStageChunk = size_t{32} << 20;
  void wait_readers();
  ContextPool& pool_;
  DType dtype_;
  uint64_t dim_, ld_;
  size_t esz_;
  uint64_t slots_ = 0, cap_ = 0;
  DeviceBuffer vectors_, ids_, norms_, biases_, times_, importance_;
  Fields fields_;
  mutable std::mutex readers_mu_;
  mutable std::vector<cudaEvent_t> readers_, spare_;  // recorded / free events
  PinnedBuffer stage_[2];
  cudaEvent_t staged_[2] = {nullptr, nullptr};  // the last copy out of each stage
};

}  // namespace mnemo::cuda
