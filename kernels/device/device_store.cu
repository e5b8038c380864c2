#include <algorithm>

#include "device/device_store.h"
#include "device/host_copy.h"

namespace mnemo::cuda {

DeviceStore::DeviceStore(ContextPool& pool, const StoreView& v)
    : pool_(pool), dtype_(v.dtype), dim_(v.dim), ld_((v.dim + 7) / 8 * 8), esz_(dtype_size(v.dtype)) {
  if (v.slots > 0) update(v, 0, v.slots);
}

DeviceStore::~DeviceStore() {
  // Destruction runs outside the exception barrier: errors are ignored.
  for (cudaEvent_t e : readers_) {
    cudaEventSynchronize(e);
    cudaEventDestroy(e);
  }
  for (cudaEvent_t e : spare_) cudaEventDestroy(e);
  for (cudaEvent_t e : staged_)
    if (e) cudaEventDestroy(e);
}

void DeviceStore::add_reader(cudaStream_t st) const {
  std::lock_guard<std::mutex> lock(readers_mu_);
  // Keep the list short under a long run of searches between writes.
  if (readers_.size() >= 64) {
    auto done = [](cudaEvent_t e) { return cudaEventQuery(e) == cudaSuccess; };
    for (auto it = readers_.begin(); it != readers_.end();) {
      if (done(*it)) {
        spare_.push_back(*it);
        it = readers_.erase(it);
      } else {
        ++it;
      }
    }
  }
  cudaEvent_t e = nullptr;
  if (spare_.empty()) {
    MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  } else {
    e = spare_.back();
    spare_.pop_back();
  }
  const cudaError_t rc = cudaEventRecord(e, st);
  if (rc != cudaSuccess) {
    spare_.push_back(e);
    MNEMO_CUDA_CHECK(rc);
  }
  readers_.push_back(e);
}

void DeviceStore::wait_readers() {
  std::lock_guard<std::mutex> lock(readers_mu_);
  while (!readers_.empty()) {
    MNEMO_CUDA_CHECK(cudaEventSynchronize(readers_.back()));
    spare_.push_back(readers_.back());
    readers_.pop_back();
  }
}

void DeviceStore::grow(uint64_t slots, ExecContext& ctx) {
  // Geometric growth keeps re-uploads amortised; the copy of old rows stays
  // on the device.
  const uint64_t cap = std::max<uint64_t>(slots, cap_ + cap_ / 2 + 1024);
  DeviceBuffer v(cap * ld_ * esz_), ids(cap * 8), norms(cap * 4), biases(cap * 4), times(cap * 8), importance(cap * 4);
  MNEMO_CUDA_CHECK(cudaMemsetAsync(v.get(), 0, v.size(), ctx.stream));
  if (slots_ > 0) {
    MNEMO_CUDA_CHECK(
        cudaMemcpyAsync(v.get(), vectors_.get(), slots_ * ld_ * esz_, cudaMemcpyDeviceToDevice, ctx.stream));
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(ids.get(), ids_.get(), slots_ * 8, cudaMemcpyDeviceToDevice, ctx.stream));
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(norms.get(), norms_.get(), slots_ * 4, cudaMemcpyDeviceToDevice, ctx.stream));
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(biases.get(), biases_.get(), slots_ * 4, cudaMemcpyDeviceToDevice, ctx.stream));
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(times.get(), times_.get(), slots_ * 8, cudaMemcpyDeviceToDevice, ctx.stream));
    MNEMO_CUDA_CHECK(
        cudaMemcpyAsync(importance.get(), importance_.get(), slots_ * 4, cudaMemcpyDeviceToDevice, ctx.stream));
  }
  ctx.sync();
  vectors_ = std::move(v);
  ids_ = std::move(ids);
  norms_ = std::move(norms);
  biases_ = std::move(biases);
  times_ = std::move(times);
  importance_ = std::move(importance);
  cap_ = cap;
}

void DeviceStore::upload_rows(const StoreView& v, uint64_t first, uint64_t count, ExecContext& ctx) {
  const size_t row = dim_ * esz_, pitch = ld_ * esz_;
  const auto* src = static_cast<const unsigned char*>(v.vectors) + first * row;
  unsigned char* dst = vectors_.get<unsigned char>() + first * pitch;
  // Small updates go straight from the host store (pageable memory: the
  // driver stages them, at about 8 GB/s on PCIe 5).
  if (count * row < kStageMin) {
    MNEMO_CUDA_CHECK(cudaMemcpy2DAsync(dst, pitch, src, row, row, count, cudaMemcpyHostToDevice, ctx.stream));
    return;
  }
  // Large ones pass through two pinned buffers in turn: the threads fill one
  // while the copy engine drains the other.
  const uint64_t per = std::max<uint64_t>(1, kStageChunk / row);
  for (int b = 0; b < 2; ++b) {
    stage_[b].reserve(per * row);
    if (!staged_[b]) MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&staged_[b], cudaEventDisableTiming));
  }
  for (uint64_t done = 0, c = 0; done < count; done += per, ++c) {
    const uint64_t n = std::min(per, count - done);
    const int b = static_cast<int>(c & 1);
    MNEMO_CUDA_CHECK(cudaEventSynchronize(staged_[b]));  // its previous chunk has left
    copy_rows(stage_[b].get(), src + done * row, n, row, v.threads);
    MNEMO_CUDA_CHECK(
        cudaMemcpy2DAsync(dst + done * pitch, pitch, stage_[b].get(), row, row, n, cudaMemcpyHostToDevice, ctx.stream));
    MNEMO_CUDA_CHECK(cudaEventRecord(staged_[b], ctx.stream));
  }
}

void DeviceStore::update(const StoreView& v, uint64_t first, uint64_t count) {
  wait_readers();
  auto ctx = pool_.acquire();
  if (v.slots > cap_) grow(v.slots, *ctx);
  slots_ = v.slots;
  count = std::min<uint64_t>(count, v.slots > first ? v.slots - first : 0);
  if (count > 0) {
    upload_rows(v, first, count, *ctx);
    MNEMO_CUDA_CHECK(
        cudaMemcpyAsync(ids_.get<uint64_t>() + first, v.ids + first, count * 8, cudaMemcpyHostToDevice, ctx->stream));
    MNEMO_CUDA_CHECK(
        cudaMemcpyAsync(norms_.get<float>() + first, v.norms + first, count * 4, cudaMemcpyHostToDevice, ctx->stream));
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(biases_.get<float>() + first, v.biases + first, count * 4, cudaMemcpyHostToDevice,
                                     ctx->stream));
    // Zeros where a view carries no times or importances (as a store
    // without them holds).
    if (v.times)
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(times_.get<double>() + first, v.times + first, count * 8, cudaMemcpyHostToDevice,
                                       ctx->stream));
    else
      MNEMO_CUDA_CHECK(cudaMemsetAsync(times_.get<double>() + first, 0, count * 8, ctx->stream));
    if (v.importance)
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(importance_.get<float>() + first, v.importance + first, count * 4,
                                       cudaMemcpyHostToDevice, ctx->stream));
    else
      MNEMO_CUDA_CHECK(cudaMemsetAsync(importance_.get<float>() + first, 0, count * 4, ctx->stream));
  }
  // The host buffers may change as soon as the store's write lock drops.
  ctx->sync();
}

}  // namespace mnemo::cuda
