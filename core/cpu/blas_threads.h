// OpenBLAS runs single-threaded while any of our OpenMP-parallel sgemm users
// is in flight (the OpenMP threads give the parallelism), and gets its thread
// count back after.
#pragma once

#include <mutex>

extern "C" {
int openblas_get_num_threads(void);
void openblas_set_num_threads(int);
}

namespace mnemo::cpu {

class BlasSingleThread {
 public:
  BlasSingleThread() {
    std::lock_guard<std::mutex> lock(mu());
    if (users()++ == 0) {
      saved() = openblas_get_num_threads();
      if (saved() != 1) openblas_set_num_threads(1);
    }
  }
  ~BlasSingleThread() {
    std::lock_guard<std::mutex> lock(mu());
    if (--users() == 0 && saved() != 1) openblas_set_num_threads(saved());
  }
  BlasSingleThread(const BlasSingleThread&) = delete;
  BlasSingleThread& operator=(const BlasSingleThread&) = delete;

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static int& users() {
    static int n = 0;
    return n;
  }
  static int& saved() {
    static int n = 1;
    return n;
  }
};

}  // namespace mnemo::cpu
