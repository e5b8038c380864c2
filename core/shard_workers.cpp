#include "shard_workers.h"

#include <unistd.h>

#include <chrono>

namespace mnemo {

namespace {

// After a call a worker watches for the next one this long before it
// sleeps: calls in a loop then never pay a wake-up.
constexpr auto kWatch = std::chrono::microseconds(200);

inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ShardWorkers::ShardWorkers(size_t shards) : owner_pid_(static_cast<long>(::getpid())) {
  threads_.reserve(shards > 0 ? shards - 1 : 0);
  for (size_t i = 1; i < shards; ++i) threads_.emplace_back(&ShardWorkers::loop, this, i);
}

ShardWorkers::~ShardWorkers() {
  // A forked child's copies of the threads do not exist: nothing to join,
  // and their condition variable is left alone.
  if (static_cast<long>(::getpid()) != owner_pid_) {
    for (auto& t : threads_) t.detach();
    (void)cv_.release();
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_.store(true);
  }
  cv_->notify_all();
  for (auto& t : threads_) t.join();
}

void ShardWorkers::loop(size_t i) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = gen_.load(std::memory_order_acquire);
    const auto until = std::chrono::steady_clock::now() + kWatch;
    while (g == seen && !stop_.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < until) {
      for (int k = 0; k < 64; ++k) relax();
      g = gen_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      std::unique_lock<std::mutex> l(mu_);
      const uint64_t nudged = nudges_.load();
      sleeping_.fetch_add(1);
      cv_->wait(
          l, [&] { return stop_.load() || gen_.load(std::memory_order_acquire) != seen || nudges_.load() != nudged; });
      sleeping_.fetch_sub(1);
      g = gen_.load(std::memory_order_acquire);
      if (g == seen && !stop_.load()) continue;  // nudged: watch for the call
    }
    if (stop_.load()) return;
    seen = g;
    if ((*busy_)[i]) {
      try {
        (*fn_)(i);
      } catch (...) {
        (*errs_)[i] = std::current_exception();
      }
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ShardWorkers::nudge() {
  // Not in a forked child (its condition variable is the parent's copy).
  if (sleeping_.load() == 0 || static_cast<long>(::getpid()) != owner_pid_) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    nudges_.fetch_add(1);
  }
  cv_->notify_all();
}

bool ShardWorkers::try_run(const std::vector<char>& busy, const std::function<void(size_t)>& fn,
                           std::vector<std::exception_ptr>& errs) {
  if (static_cast<long>(::getpid()) != owner_pid_) return false;
  std::unique_lock<std::mutex> call(call_mu_, std::try_to_lock);
  if (!call.owns_lock()) return false;
  fn_ = &fn;
  busy_ = &busy;
  errs_ = &errs;
  pending_.store(threads_.size(), std::memory_order_relaxed);
  {
    // Under mu_, so a worker between its check and its wait cannot miss it.
    std::lock_guard<std::mutex> l(mu_);
    gen_.fetch_add(1, std::memory_order_release);
  }
  cv_->notify_all();
  if (!busy.empty() && busy[0]) {
    try {
      fn(0);
    } catch (...) {
      errs[0] = std::current_exception();
    }
  }
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 4096)
      relax();
    else
      std::this_thread::yield();
  }
  return true;
}

}  // namespace mnemo
