/* An agent's day of memories, recalled at 21:00 four ways: by similarity
 * alone, by activation (relevance + recency + importance, as Generative
 * Agents ranks), by activation with each term min-max normalised over the
 * candidates, and again after a touching recall. Embeddings are synthetic:
 * each memory is its topic's direction plus seeded noise, so the program
 * prints the same table everywhere. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mnemo.h"

#define DIM 64
#define TOPICS 5
#define K 5

typedef struct {
  const char* clock; /* hh:mm */
  int topic;         /* 0 budget, 1 food, 2 family, 3 health, 4 errands */
  float importance;  /* 1 (mundane) .. 10 (poignant) */
  const char* text;
} memory;

static const memory kDay[] = {
    {"06:50", 3, 2, "woke up, stiff back"},
    {"07:05", 1, 1, "made coffee"},
    {"07:20", 1, 2, "ate toast with jam"},
    {"07:45", 2, 4, "drove Mia to school"},
    {"08:30", 0, 3, "read the quarterly budget draft"},
    {"09:30", 0, 8, "meeting with Ana: the budget is cut by 20%"},
    {"10:15", 0, 5, "emailed finance about the travel budget"},
    {"10:40", 4, 1, "refilled the printer"},
    {"11:30", 0, 6, "Ana asked for a revised budget by Friday"},
    {"12:15", 1, 2, "lunch: noodles with Sam"},
    {"13:00", 3, 3, "walked around the block"},
    {"13:45", 0, 4, "spreadsheet of budget cuts, first pass"},
    {"14:30", 2, 9, "mother called: she is in hospital"},
    {"15:10", 3, 7, "booked a doctor's appointment for the back pain"},
    {"15:40", 4, 2, "bought stamps"},
    {"16:20", 0, 3, "budget line for the offsite questioned"},
    {"17:00", 2, 6, "picked Mia up, she won the chess game"},
    {"17:45", 4, 2, "groceries: milk, rice, apples"},
    {"18:30", 1, 3, "cooked dinner for the family"},
    {"19:15", 2, 5, "video call with mother, she is better"},
    {"19:50", 0, 2, "glanced at the budget numbers again"},
    {"20:30", 4, 1, "took the bins out"},
};
#define N (sizeof kDay / sizeof kDay[0])

static uint64_t g_state = 0x9E3779B97F4A7C15ull;
static float noise(void) { /* xorshift, uniform in [-0.5, 0.5) */
  g_state ^= g_state << 13, g_state ^= g_state >> 7, g_state ^= g_state << 17;
  return (float)(g_state >> 40) / 16777216.0f - 0.5f;
}

static double seconds(const char* hhmm) { return 3600.0 * atoi(hhmm) + 60.0 * atoi(hhmm + 3); }

static void check(mnemo_status s, const char* what) {
  if (s == MNEMO_OK) return;
  fprintf(stderr, "%s: %s: %s\n", what, mnemo_status_name(s), mnemo_last_error());
  exit(1);
}

static void* alloc(size_t bytes) {
  void* p = NULL;
  check(mnemo_alloc(bytes, &p), "alloc");
  return p;
}

/* Prints the K best and returns the best id. */
static uint64_t recall(mnemo_store* st, const float* q, const mnemo_search_options* o, const char* title) {
  uint64_t* ids = alloc(K * sizeof *ids);
  float* scores = alloc(K * sizeof *scores);
  int i;
  uint64_t best;
  check(mnemo_store_search(st, q, 1, K, o, ids, scores), title);
  printf("%s\n", title);
  for (i = 0; i < K; ++i) printf("  %d. [%s] %-48s %8.4f\n", i + 1, kDay[ids[i]].clock, kDay[ids[i]].text, scores[i]);
  best = ids[0];
  mnemo_free(ids);
  mnemo_free(scores);
  return best;
}

int main(void) {
  mnemo_runtime_options ro = mnemo_runtime_options_default();
  mnemo_runtime* rt = NULL;
  mnemo_store* st = NULL;
  float topic[TOPICS][DIM];
  float* vecs = alloc(N * DIM * sizeof(float));
  uint64_t* ids = alloc(N * sizeof(uint64_t));
  double* times = alloc(N * sizeof(double));
  float* imp = alloc(N * sizeof(float));
  float* q = alloc(DIM * sizeof(float));
  float* sc = alloc(2 * sizeof(float));
  uint64_t plain, act;
  int touched_ok;
  const double now = seconds("21:00");
  mnemo_search_options o;
  size_t i, d;

  ro.backend = MNEMO_BACKEND_CPU;
  check(mnemo_runtime_create(&ro, &rt), "runtime");
  check(mnemo_store_create(rt, DIM, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, &st), "store");
  for (i = 0; i < TOPICS; ++i)
    for (d = 0; d < DIM; ++d) topic[i][d] = noise();
  for (i = 0; i < N; ++i) {
    for (d = 0; d < DIM; ++d) vecs[i * DIM + d] = topic[kDay[i].topic][d] + 0.6f * noise();
    ids[i] = i;
    times[i] = seconds(kDay[i].clock);
    imp[i] = kDay[i].importance;
  }
  check(mnemo_store_add_memories(st, ids, vecs, MNEMO_DTYPE_F32, N, times, imp), "add");
  /* The question at 21:00: "what about the budget?", a little off-topic. */
  for (d = 0; d < DIM; ++d) q[d] = topic[0][d] + 0.3f * noise();

  printf("%u memories of one day; recall at 21:00 for a budget question\n\n", (unsigned)N);
  plain = recall(st, q, NULL, "similarity only");

  o = mnemo_search_options_default();
  o.activation = 1;
  o.w_relevance = 1.0f;
  o.w_recency = 0.5f;
  o.w_importance = 0.05f;
  o.half_life = 3.0 * 3600.0; /* memories fade by half in three hours */
  o.now = now;
  act = recall(st, q, &o, "\nactivation: 1 x similarity + 0.5 x recency (half-life 3 h) + 0.05 x importance");

  o.normalize = 1;
  o.w_recency = 1.0f;
  o.w_importance = 1.0f;
  recall(st, q, &o, "\nnormalised (Generative Agents): each term min-max scaled, weights 1 / 1 / 1");

  /* Recalling refreshes: touch sets the returned memories' times to now,
     so a later question about the family finds the budget memories fresh. */
  o.touch = 1;
  check(mnemo_store_search(st, q, 1, 2, &o, ids, sc), "touching recall");
  o.touch = 0;
  for (d = 0; d < DIM; ++d) q[d] = topic[2][d] + 0.3f * noise();
  o.now = seconds("21:30");
  o.normalize = 0;
  o.w_recency = 0.5f;
  o.w_importance = 0.05f;
  recall(st, q, &o, "\nat 21:30, about the family (after the budget recall touched its top 2)");
  check(mnemo_store_get_meta(st, ids, 2, times, NULL, NULL), "get_meta");
  printf("\ntouched: [%s] now last accessed at %02d:%02d, [%s] at %02d:%02d\n", kDay[ids[0]].clock,
         (int)(times[0] / 3600), (int)fmod(times[0] / 60, 60), kDay[ids[1]].clock, (int)(times[1] / 3600),
         (int)fmod(times[1] / 60, 60));

  touched_ok = times[0] == now && times[1] == now;
  mnemo_free(vecs), mnemo_free(ids), mnemo_free(times), mnemo_free(imp), mnemo_free(q), mnemo_free(sc);
  mnemo_store_destroy(st);
  mnemo_runtime_destroy(rt);
  if (!touched_ok) {
    printf("the touched memories' times are not 21:00\n");
    return 1;
  }
  /* The point of the example: recency and importance change what is recalled. */
  if (plain == act) {
    printf("activation recalled the same first memory as similarity\n");
    return 1;
  }
  return 0;
}
