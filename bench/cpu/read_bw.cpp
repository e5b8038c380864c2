// The machine's read bandwidth, for the shape grid's floor: a sum over a
// buffer split evenly among `threads` OpenMP threads, 64 floats per step in
// four independent vector sums so that nothing but the loads limits it.
// Compiled and loaded by bench/cpu/shape_grid.py (c++ -O3 -march=native).
#include <omp.h>

#include <cstddef>

extern "C" double mnemo_bench_read_sum(const float* x, size_t n, int threads) {
  double total = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    const size_t t = static_cast<size_t>(omp_get_thread_num()), nt = static_cast<size_t>(omp_get_num_threads());
    const size_t lo = n * t / nt, hi = n * (t + 1) / nt;
    float s[4][16] = {};
    size_t i = lo;
    for (; i + 64 <= hi; i += 64)
      for (size_t a = 0; a < 4; ++a)
#pragma omp simd
        for (size_t j = 0; j < 16; ++j) s[a][j] += x[i + a * 16 + j];
    double sum = 0.0;
    for (; i < hi; ++i) sum += x[i];
    for (size_t a = 0; a < 4; ++a)
      for (size_t j = 0; j < 16; ++j) sum += s[a][j];
    total += sum;
  }
  return total;
}
