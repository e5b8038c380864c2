// An exception must not escape an OpenMP region (it would terminate the
// process), so parallel bodies run through run() and the first exception is
// rethrown after the region, on the calling thread.
#pragma once

#include <exception>
#include <mutex>

namespace mnemo::cpu {

class ParallelErrors {
 public:
  template <class F>
  void run(F&& body) noexcept {
    try {
      body();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!first_) first_ = std::current_exception();
    }
  }
  void rethrow() {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::mutex mu_;
  std::exception_ptr first_;
};

}  // namespace mnemo::cpu
