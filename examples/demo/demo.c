/* The end-to-end demo behind `make demo`: every operation of mnemo once, on
   made-up but meaningful data, printing what it did. Plain C99 over mnemo.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mnemo.h"

#define CHECK(call)                                                                             \
  do {                                                                                          \
    mnemo_status s_ = (call);                                                                   \
    if (s_ != MNEMO_OK) {                                                                       \
      fprintf(stderr, "%s failed: %s: %s\n", #call, mnemo_status_name(s_), mnemo_last_error()); \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

static void* aligned(uint64_t bytes) {
  void* p = NULL;
  CHECK(mnemo_alloc(bytes, &p));
  return p;
}

/* A small deterministic generator so the demo prints the same every run. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

int main(void) {
  enum { DIM = 64, CLUSTERS = 8, PER = 500, N = CLUSTERS * PER };
  printf("%s\n", mnemo_build_info());
  mnemo_runtime* rt = NULL;
  CHECK(mnemo_runtime_create(NULL, &rt));
  mnemo_runtime_report info;
  info.struct_size = sizeof info;
  CHECK(mnemo_runtime_info(rt, &info));
  printf("runtime: backend %s, %u threads; %s\n", info.backend_active == MNEMO_BACKEND_CUDA ? "CUDA" : "CPU",
         info.num_threads, info.reason);

  /* 1. A store of memories: 8 topics (cluster centres), 500 memories each. */
  float* centres = aligned(sizeof(float) * CLUSTERS * DIM);
  float* vecs = aligned(sizeof(float) * N * DIM);
  uint64_t* ids = aligned(sizeof(uint64_t) * N);
  for (int c = 0; c < CLUSTERS * DIM; ++c) centres[c] = frand();
  for (int i = 0; i < N; ++i) {
    ids[i] = 1000 + (uint64_t)i;
    for (int d = 0; d < DIM; ++d) vecs[i * DIM + d] = centres[(i / PER) * DIM + d] + 0.3f * frand();
  }
  mnemo_store* store = NULL;
  CHECK(mnemo_store_create(rt, DIM, MNEMO_DTYPE_F16, MNEMO_METRIC_COSINE, &store));
  CHECK(mnemo_store_add(store, ids, vecs, MNEMO_DTYPE_F32, N));
  uint64_t count = 0;
  CHECK(mnemo_store_count(store, &count));
  printf("store: %llu memories of dim %d kept as f16, cosine\n", (unsigned long long)count, DIM);

  /* Recall: query with topic 3's centre; every hit should be from topic 3. */
  enum { K = 5 };
  uint64_t* hit_ids = aligned(sizeof(uint64_t) * K);
  float* hit_scores = aligned(sizeof(float) * K);
  CHECK(mnemo_store_search(store, centres + 3 * DIM, 1, K, NULL, hit_ids, hit_scores));
  printf("recall (topic 3 centre, k=%d):", K);
  for (int j = 0; j < K; ++j)
    printf(" %llu(topic %llu, %.3f)", (unsigned long long)hit_ids[j], (unsigned long long)((hit_ids[j] - 1000) / PER),
           hit_scores[j]);
  printf("\n");

  /* Activation: boost one memory of topic 5 and filter to topics 5 and 6. */
  uint64_t boosted = 1000 + 5 * PER + 7;
  float boost = 2.0f;
  float* bias = aligned(sizeof(float));
  uint64_t* bias_id = aligned(sizeof(uint64_t));
  *bias = boost;
  *bias_id = boosted;
  CHECK(mnemo_store_set_bias(store, bias_id, bias, 1));
  uint64_t* allow = aligned(sizeof(uint64_t) * 2 * PER);
  for (int i = 0; i < 2 * PER; ++i) allow[i] = 1000 + 5 * PER + (uint64_t)i;
  mnemo_search_options so = mnemo_search_options_default();
  so.filter_kind = MNEMO_FILTER_IDS;
  so.filter_ids = allow;
  so.filter_count = 2 * PER;
  so.apply_bias = 1;
  CHECK(mnemo_store_search(store, centres + 6 * DIM, 1, K, &so, hit_ids, hit_scores));
  printf("filtered to topics 5-6, bias +%.1f on %llu, query topic 6: first hit %llu (%.3f)\n", boost,
         (unsigned long long)boosted, (unsigned long long)hit_ids[0], hit_scores[0]);

  /* Save and reopen. */
  const char* path = "mnemo-demo.store";
  CHECK(mnemo_store_save(store, path));
  mnemo_store* reopened = NULL;
  CHECK(mnemo_store_open(rt, path, &reopened));
  CHECK(mnemo_store_count(reopened, &count));
  printf("saved to %s and reopened: %llu memories\n", path, (unsigned long long)count);
  remove(path);

  /* 2. Similarity matrix: 3 topic centres against the 8 centres. */
  float* sims = aligned(sizeof(float) * 3 * CLUSTERS);
  CHECK(mnemo_similarity(rt, MNEMO_METRIC_COSINE, centres, 3, centres, MNEMO_DTYPE_F32, CLUSTERS, DIM, sims));
  printf("similarity of centres 0..2 to themselves: %.3f %.3f %.3f\n", sims[0], sims[CLUSTERS + 1],
         sims[2 * CLUSTERS + 2]);

  /* 3. Episodic pairs: same-topic pairs should score higher than cross-topic. */
  enum { P = 4 };
  uint32_t* src = aligned(sizeof(uint32_t) * P);
  uint32_t* tgt = aligned(sizeof(uint32_t) * P);
  float* pair_scores = aligned(sizeof(float) * P);
  const uint32_t s_init[P] = {0, 1, 0, 3 * PER}, t_init[P] = {1, 2, 4 * PER, 3 * PER + 1};
  memcpy(src, s_init, sizeof s_init);
  memcpy(tgt, t_init, sizeof t_init);
  CHECK(mnemo_score_pairs(rt, MNEMO_METRIC_COSINE, vecs, MNEMO_DTYPE_F32, N, DIM, src, tgt, MNEMO_DTYPE_U32, P,
                          pair_scores));
  printf("pairs (same, same, cross, same topic): %.3f %.3f %.3f %.3f\n", pair_scores[0], pair_scores[1], pair_scores[2],
         pair_scores[3]);

  /* 4. Trajectory resampling: 2 robot arm trajectories, 5 irregular samples
        of 3 joints, resampled onto 4 even times. */
  enum { B = 2, S = 5, T = 4, J = 3 };
  float* traj = aligned(sizeof(float) * B * S * J);
  float* st = aligned(sizeof(float) * B * S);
  float* tt = aligned(sizeof(float) * B * T);
  float* out = aligned(sizeof(float) * B * T * J);
  const float times[S] = {0.0f, 0.1f, 0.35f, 0.6f, 1.0f};
  for (int b = 0; b < B; ++b)
    for (int s = 0; s < S; ++s) {
      st[b * S + s] = times[s];
      for (int j = 0; j < J; ++j) traj[(b * S + s) * J + j] = sinf(times[s] * (float)(j + 1 + b));
    }
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) tt[b * T + t] = (float)t / (T - 1);
  CHECK(mnemo_resample(rt, traj, MNEMO_DTYPE_F32, B, S, J, st, tt, MNEMO_DTYPE_F32, T, NULL, out));
  printf("resampled joint 0 of trajectory 0 at t=0,1/3,2/3,1: %.3f %.3f %.3f %.3f\n", out[0], out[J], out[2 * J],
         out[3 * J]);

  /* 5. Row normalisation and LayerNorm of the centres, in place. */
  CHECK(mnemo_normalize_rows(rt, centres, centres, MNEMO_DTYPE_F32, CLUSTERS, DIM));
  double n0 = 0;
  for (int d = 0; d < DIM; ++d) n0 += (double)centres[d] * centres[d];
  CHECK(mnemo_layer_norm(rt, vecs, vecs, MNEMO_DTYPE_F32, N, DIM, NULL, NULL, 1e-5f));
  double mean = 0, var = 0;
  for (int d = 0; d < DIM; ++d) mean += vecs[d];
  mean /= DIM;
  for (int d = 0; d < DIM; ++d) var += (vecs[d] - mean) * (vecs[d] - mean);
  printf("normalised centre 0 has norm %.6f; layer-normed row 0 has mean %.2e, variance %.4f\n", sqrt(n0), mean,
         var / DIM);

  mnemo_store_destroy(reopened);
  mnemo_store_destroy(store);
  mnemo_runtime_destroy(rt);
  void* bufs[] = {centres, vecs, ids, hit_ids,     hit_scores, bias, bias_id, allow,
                  sims,    src,  tgt, pair_scores, traj,       st,   tt,      out};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) mnemo_free(bufs[i]);
  printf("demo finished: all five operations ran\n");
  return 0;
}
