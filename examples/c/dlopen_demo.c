/*
 * dlopen_demo.c - calls mnemo without linking it at build time.
 *
 * The library is opened with dlopen (argv[1], else "libmnemo.so.1") and each
 * function is resolved with dlsym; mnemo.h is included for its types and
 * macros only. This is the path any language with a dlopen-style FFI takes.
 *
 * It stores a few hundred random vectors, asks for the 5 nearest memories of
 * some of them and checks that each stored vector's own query finds itself
 * first. Exit status 0 on success.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mnemo.h"

#define N_VECTORS 300
#define DIM 96
#define K 5
#define N_QUERIES 4

/* The functions used, resolved at run time. */
struct mnemo_api {
  uint32_t (*abi_version)(void);
  const char* (*version)(void);
  const char* (*status_name)(mnemo_status);
  const char* (*last_error)(void);
  mnemo_status (*alloc)(uint64_t, void**);
  void (*free)(void*);
  mnemo_runtime_options (*runtime_options_default)(void);
  mnemo_status (*runtime_create)(const mnemo_runtime_options*, mnemo_runtime**);
  void (*runtime_destroy)(mnemo_runtime*);
  mnemo_status (*store_create)(mnemo_runtime*, uint64_t, int32_t, int32_t, mnemo_store**);
  void (*store_destroy)(mnemo_store*);
  mnemo_status (*store_add)(mnemo_store*, const uint64_t*, const void*, int32_t, uint64_t);
  mnemo_status (*store_count)(const mnemo_store*, uint64_t*);
  mnemo_status (*store_search)(const mnemo_store*, const float*, uint64_t, uint64_t, const mnemo_search_options*,
                               uint64_t*, float*);
};

/* ISO C has no conversion from void* to a function pointer; POSIX
   guarantees they have the same representation, so copy the bytes. */
static int resolve(void* lib, const char* name, void* fn_ptr, size_t size) {
  void* sym = dlsym(lib, name);
  if (sym == NULL || size != sizeof sym) {
    fprintf(stderr, "dlsym(%s) failed: %s\n", name, dlerror());
    return 0;
  }
  memcpy(fn_ptr, &sym, size);
  return 1;
}

#define RESOLVE(lib, api, field) resolve((lib), "mnemo_" #field, (void*)&(api)->field, sizeof(api)->field)

static int load_api(void* lib, struct mnemo_api* api) {
  return RESOLVE(lib, api, abi_version) && RESOLVE(lib, api, version) && RESOLVE(lib, api, status_name) &&
         RESOLVE(lib, api, last_error) && RESOLVE(lib, api, alloc) && RESOLVE(lib, api, free) &&
         RESOLVE(lib, api, runtime_options_default) && RESOLVE(lib, api, runtime_create) &&
         RESOLVE(lib, api, runtime_destroy) && RESOLVE(lib, api, store_create) && RESOLVE(lib, api, store_destroy) &&
         RESOLVE(lib, api, store_add) && RESOLVE(lib, api, store_count) && RESOLVE(lib, api, store_search);
}

/* Reports a failed status; returns 1 when the call succeeded. */
static int ok(const struct mnemo_api* api, mnemo_status status, const char* what) {
  if (status == MNEMO_OK) return 1;
  fprintf(stderr, "%s failed: %s: %s\n", what, api->status_name(status), api->last_error());
  return 0;
}

/* A small deterministic generator, so the demo needs no libc randomness. */
static uint64_t next_random(uint64_t* state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

static float uniform(uint64_t* state) { return (float)(next_random(state) >> 40) / (float)(1u << 24) * 2.0f - 1.0f; }

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "libmnemo.so.1";
  struct mnemo_api api;
  mnemo_runtime* rt = NULL;
  mnemo_store* store = NULL;
  uint64_t* ids = NULL;
  float* vectors = NULL;
  uint64_t* hit_ids = NULL;
  float* hit_scores = NULL;
  uint64_t count = 0, state = 0x9E3779B97F4A7C15u;
  mnemo_runtime_options opts;
  int failed = 1, q, j;
  size_t i;

  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen(%s) failed: %s\n", path, dlerror());
    return 1;
  }
  if (!load_api(lib, &api)) goto done;
  if (api.abi_version() != MNEMO_ABI_VERSION) {
    fprintf(stderr, "%s has ABI version %u; this program was built for %d\n", path, (unsigned)api.abi_version(),
            MNEMO_ABI_VERSION);
    goto done;
  }
  printf("loaded mnemo %s (ABI %u) from %s\n", api.version(), (unsigned)api.abi_version(), path);

  opts = api.runtime_options_default();
  opts.backend = MNEMO_BACKEND_CPU;
  if (!ok(&api, api.runtime_create(&opts, &rt), "mnemo_runtime_create")) goto done;
  if (!ok(&api, api.store_create(rt, DIM, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, &store), "mnemo_store_create"))
    goto done;

  /* mnemo_alloc hands out the 16-byte aligned memory every data pointer needs. */
  if (!ok(&api, api.alloc(sizeof *ids * N_VECTORS, (void**)&ids), "mnemo_alloc") ||
      !ok(&api, api.alloc(sizeof *vectors * N_VECTORS * DIM, (void**)&vectors), "mnemo_alloc") ||
      !ok(&api, api.alloc(sizeof *hit_ids * N_QUERIES * K, (void**)&hit_ids), "mnemo_alloc") ||
      !ok(&api, api.alloc(sizeof *hit_scores * N_QUERIES * K, (void**)&hit_scores), "mnemo_alloc"))
    goto done;
  for (i = 0; i < N_VECTORS; ++i) ids[i] = 1000 + 7 * (uint64_t)i;
  for (i = 0; i < (size_t)N_VECTORS * DIM; ++i) vectors[i] = uniform(&state);

  if (!ok(&api, api.store_add(store, ids, vectors, MNEMO_DTYPE_F32, N_VECTORS), "mnemo_store_add") ||
      !ok(&api, api.store_count(store, &count), "mnemo_store_count"))
    goto done;
  printf("stored %llu vectors of dimension %d\n", (unsigned long long)count, DIM);
  if (count != N_VECTORS) {
    fprintf(stderr, "expected %d vectors in the store\n", N_VECTORS);
    goto done;
  }

  /* Recall with the first N_QUERIES stored vectors as queries (row-major, so
     they are the first N_QUERIES rows). opts NULL: no filter, no bias. */
  if (!ok(&api, api.store_search(store, vectors, N_QUERIES, K, NULL, hit_ids, hit_scores), "mnemo_store_search"))
    goto done;
  failed = 0;
  for (q = 0; q < N_QUERIES; ++q) {
    printf("query of id %llu:", (unsigned long long)ids[q]);
    for (j = 0; j < K; ++j) printf(" %llu (%.4f)", (unsigned long long)hit_ids[q * K + j], hit_scores[q * K + j]);
    printf("\n");
    if (hit_ids[q * K] != ids[q] || hit_scores[q * K] < 0.9999f) {
      fprintf(stderr, "query %d: the stored vector did not find itself first\n", q);
      failed = 1;
    }
  }
  if (!failed) printf("ok: every query found itself first\n");

done:
  /* Stores before their runtime; all destroy/free functions accept NULL. */
  if (store != NULL) api.store_destroy(store);
  if (rt != NULL) api.runtime_destroy(rt);
  if (ids != NULL) api.free(ids);
  if (vectors != NULL) api.free(vectors);
  if (hit_ids != NULL) api.free(hit_ids);
  if (hit_scores != NULL) api.free(hit_scores);
  fflush(stdout); /* the report survives even if unloading goes wrong */
  if (dlclose(lib) != 0) {
    fprintf(stderr, "dlclose failed: %s\n", dlerror());
    failed = 1;
  }
  return failed;
}
