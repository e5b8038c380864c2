// The calling thread's number in the current OpenMP team (0 outside one, or
// in a build without OpenMP): the index of its per-thread partial results.
#pragma once

#ifdef _OPENMP
#include <omp.h>
#endif

namespace mnemo::cpu {

inline int thread_index() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

}  // namespace mnemo::cpu
