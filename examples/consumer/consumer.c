/* The smallest program against an installed mnemo: one similarity call on
   the CPU, checked against a direct computation. Built by the install test
   with find_package(mnemo CONFIG) and with pkg-config. */
#include <math.h>
#include <mnemo.h>
#include <stdio.h>

int main(void) {
  /* 16-byte aligned, as the library requires of every data pointer. */
  _Alignas(16) float q[4] = {0.5f, -1.25f, 2.0f, 0.75f};
  _Alignas(16) float t[8] = {1.5f, 0.25f, -0.5f, 2.0f, -3.0f, 1.0f, 0.5f, -0.25f};
  _Alignas(16) float out[2] = {NAN, NAN};
  mnemo_runtime_options opts = mnemo_runtime_options_default();
  opts.backend = MNEMO_BACKEND_CPU;
  mnemo_runtime* rt = NULL;
  if (mnemo_runtime_create(&opts, &rt) != MNEMO_OK) {
    fprintf(stderr, "runtime: %s\n", mnemo_last_error());
    return 1;
  }
  mnemo_status st = mnemo_similarity(rt, MNEMO_METRIC_DOT, q, 1, t, MNEMO_DTYPE_F32, 2, 4, out);
  mnemo_runtime_destroy(rt);
  if (st != MNEMO_OK) {
    fprintf(stderr, "similarity: %s\n", mnemo_last_error());
    return 1;
  }
  for (int j = 0; j < 2; ++j) {
    double want = 0.0;
    for (int d = 0; d < 4; ++d) want += (double)q[d] * (double)t[j * 4 + d];
    if (fabs(out[j] - want) > 1e-5 * (1.0 + fabs(want))) {
      fprintf(stderr, "score %d: got %g, want %g\n", j, out[j], want);
      return 1;
    }
  }
  printf("mnemo %s: scores %g %g\n", mnemo_version(), out[0], out[1]);
  return 0;
}
