/*
 * consumer.c - a program that links the installed mnemo the way a user's
 * project does (find_package(mnemo CONFIG) or pkg-config), built out of tree
 * by tests/consumers/run.sh.
 *
 * It stores 257 pseudo-random vectors of dimension 33 (awkward sizes), asks
 * for the 3 nearest of three of them and checks that each finds itself first
 * with a cosine of 1 within 1e-5. Exit status 0 on success.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "mnemo.h"

#define N 257
#define DIM 33
#define K 3
#define NQ 3

static int ok(mnemo_status status, const char* what) {
  if (status == MNEMO_OK) return 1;
  fprintf(stderr, "%s: %s: %s\n", what, mnemo_status_name(status), mnemo_last_error());
  return 0;
}

int main(void) {
  mnemo_runtime* rt = NULL;
  mnemo_store* store = NULL;
  uint64_t* ids = NULL;
  float* vectors = NULL;
  uint64_t* hit_ids = NULL;
  float* hit_scores = NULL;
  float* qbuf = NULL;
  mnemo_runtime_options opts = mnemo_runtime_options_default();
  uint32_t state = 0x9e3779b9u;
  int result = 1;
  uint64_t i, j, d;
  const uint64_t queries[NQ] = {0, 128, 256};

  if (mnemo_abi_version() != MNEMO_ABI_VERSION) {
    fprintf(stderr, "library ABI %u, header ABI %d\n", (unsigned)mnemo_abi_version(), MNEMO_ABI_VERSION);
    return 1;
  }
  opts.backend = MNEMO_BACKEND_CPU;
  if (!ok(mnemo_runtime_create(&opts, &rt), "mnemo_runtime_create")) goto done;
  if (!ok(mnemo_store_create(rt, DIM, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, &store), "mnemo_store_create")) goto done;
  if (!ok(mnemo_alloc(sizeof *ids * N, (void**)&ids), "mnemo_alloc") ||
      !ok(mnemo_alloc(sizeof *vectors * N * DIM, (void**)&vectors), "mnemo_alloc") ||
      !ok(mnemo_alloc(sizeof *hit_ids * NQ * K, (void**)&hit_ids), "mnemo_alloc") ||
      !ok(mnemo_alloc(sizeof *hit_scores * NQ * K, (void**)&hit_scores), "mnemo_alloc") ||
      !ok(mnemo_alloc(sizeof *qbuf * NQ * DIM, (void**)&qbuf), "mnemo_alloc"))
    goto done;
  for (i = 0; i < N; ++i) ids[i] = 1000 + i;
  for (i = 0; i < (uint64_t)N * DIM; ++i) {
    state = state * 1664525u + 1013904223u; /* LCG: enough spread for distinct rows */
    vectors[i] = (float)(state >> 8) / 16777216.0f - 0.5f;
  }
  if (!ok(mnemo_store_add(store, ids, vectors, MNEMO_DTYPE_F32, N), "mnemo_store_add")) goto done;
  /* The queries: rows 0, 128 and 256 of the stored vectors. */
  for (j = 0; j < NQ; ++j)
    for (d = 0; d < DIM; ++d) qbuf[j * DIM + d] = vectors[queries[j] * DIM + d];
  for (j = 0; j < NQ * K; ++j) {
    hit_ids[j] = 7; /* poisoned: the search must overwrite every entry */
    hit_scores[j] = NAN;
  }
  if (!ok(mnemo_store_search(store, qbuf, NQ, K, NULL, hit_ids, hit_scores), "mnemo_store_search")) goto done;
  for (j = 0; j < NQ; ++j) {
    const uint64_t want = 1000 + queries[j];
    if (hit_ids[j * K] != want || !(fabsf(hit_scores[j * K] - 1.0f) <= 1e-5f) ||
        !(hit_scores[j * K + 1] <= hit_scores[j * K])) {
      fprintf(stderr, "query %u: got id %llu score %g, want id %llu score 1\n", (unsigned)j,
              (unsigned long long)hit_ids[j * K], (double)hit_scores[j * K], (unsigned long long)want);
      goto done;
    }
  }
  printf("mnemo %s consumer: %d queries found themselves first\n", mnemo_version(), NQ);
  result = 0;
done:
  if (store != NULL) mnemo_store_destroy(store);
  if (rt != NULL) mnemo_runtime_destroy(rt);
  mnemo_free(ids);
  mnemo_free(vectors);
  mnemo_free(hit_ids);
  mnemo_free(hit_scores);
  mnemo_free(qbuf);
  return result;
}
