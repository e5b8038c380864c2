// One host thread per shard beyond the first, started with a sharded store
// and kept for its life: a call over the shards wakes them instead of
// starting threads (tens of microseconds each, which a one-query search over
// several GPUs would pay on every call). One call uses them at a time; a
// concurrent call is told so and starts threads of its own, and so is a call
// in a process forked from the one that started them (a child has none).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mnemo {

class ShardWorkers {
 public:
  explicit ShardWorkers(size_t shards);
  ~ShardWorkers();
  ShardWorkers(const ShardWorkers&) = delete;
  ShardWorkers& operator=(const ShardWorkers&) = delete;

  // Runs fn(i) for every i with busy[i], shard 0 on the caller's thread, and
  // returns once all are done, each failure in errs[i]. Returns false, having
  // run nothing, while another call holds the workers.
  bool try_run(const std::vector<char>& busy, const std::function<void(size_t)>& fn,
               std::vector<std::exception_ptr>& errs);
  // Wakes sleeping workers to watch for a call that is about to come, so
  // their wake-up overlaps the caller's work before it (a device search's
  // query check and set-up) instead of following it.
  void nudge();

 private:
  void loop(size_t i);
  std::mutex call_mu_;  // held by the call using the workers
  std::mutex mu_;       // with cv_: sleeping workers
  // On the heap: a forked child leaks it, since destroying a condition
  // variable waits for its waiters, which in a child never return.
  std::unique_ptr<std::condition_variable> cv_ = std::make_unique<std::condition_variable>();
  const std::function<void(size_t)>* fn_ = nullptr;
  const std::vector<char>* busy_ = nullptr;
  std::vector<std::exception_ptr>* errs_ = nullptr;
  std::atomic<uint64_t> gen_{0};     // one more per call
  std::atomic<uint64_t> nudges_{0};  // one more per nudge that woke sleepers
  std::atomic<int> sleeping_{0};     // workers waiting on cv_
  std::atomic<size_t> pending_{0};   // workers yet to finish the call
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;  // threads_[i - 1] serves shard i
  long owner_pid_ = 0;                // the process the threads run in
};

}  // namespace mnemo
