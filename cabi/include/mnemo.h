/*
 * mnemo.h - the one public header of mnemo, a cognitive-memory runtime.
 *
 * mnemo stores embeddings and answers what a memory system asks of them:
 * recall by similarity with top-k, raw similarity matrices, episodic pair
 * scoring, trajectory resampling and row normalisation, on the CPU or a GPU.
 *
 * ---------------------------------------------------------------------------
 * General rules (they hold for every function below unless it says otherwise)
 * ---------------------------------------------------------------------------
 * Status.     Every function that can fail returns an mnemo_status. MNEMO_OK
 *             (0) is success; every other value is one of the MNEMO_E_* codes,
 *             whose numbers never change. mnemo_last_error() then holds a
 *             human-readable message naming the offending argument.
 * Outputs.    Results are written through out-parameters. A call that fails
 *             leaves every output buffer and every store untouched: all
 *             arguments are checked before anything is written. (A failure
 *             inside the computation itself, such as running out of memory or
 *             a device error, may leave outputs partly written; stores are
 *             never left partly changed.)
 * Alignment.  Every data pointer (vectors, scores, ids, times, index arrays,
 *             filters, gamma/beta) must be MNEMO_ALIGNMENT (16) byte aligned,
 *             otherwise MNEMO_E_MISALIGNED. mnemo_alloc() returns such memory.
 * Sizes.      Counts and shapes are uint64_t. Zero counts are accepted where
 *             they make sense (nothing is done) and refused where they do not
 *             (a zero dimension, k = 0). Every product of sizes is checked for
 *             overflow (MNEMO_E_OVERFLOW).
 * Layout.     Matrices are dense and row-major: element (i, j) of an
 *             [rows x cols] matrix is at index i * cols + j.
 * Enums.      Enumerations travel as int32_t; an unknown value is
 *             MNEMO_E_INVALID_ARGUMENT.
 * Finite.     With validation on (the default, see mnemo_runtime_options),
 *             a NaN or infinity in any input is MNEMO_E_NON_FINITE. Whatever
 *             the setting, a NaN score is never returned by a search.
 * Exceptions. No C++ exception, abort or print ever leaves a mnemo function.
 * Threading.  mnemo_last_error() is per thread. A runtime may be used from
 *             many threads at once. A store may be searched from many threads
 *             at once; writes (add, remove, set_bias, checkpoint) are
 *             exclusive and are serialised by the store itself. A runtime
 *             must outlive its stores.
 *
 * Numerical contract (identical on every backend), against a float64
 * reference computed over the same stored (rounded) values, dim <= 4096:
 *   - EXACT cosine, and dot of unit vectors: |error| <= 1e-5;
 *   - squared L2: relative error <= 1e-5;
 *   - FAST precision may use reduced-precision tensor arithmetic to find
 *     candidates, but returned scores are re-scored in EXACT mode;
 *   - cosine with a zero-norm vector is 0;
 *   - storage in f16/bf16 is rounded to nearest even; arithmetic accumulates
 *     in f32 or wider.
 * Scale and range (what the bounds above mean away from unit vectors):
 *   - dot of any vectors x, y: |error| <= 1e-5 * |x| * |y| (1e-5 for unit
 *     vectors); squared L2: |error| <= 1e-5 * exact + 2^-126 (the f32
 *     normal floor); FAST scores before re-scoring: 2e-3 on the same scales
 *     (|x| * |y| for dot, |x|^2 + |y|^2 for squared L2);
 *   - the bounds hold for rows whose L2 norm lies in [2^-50, 2^50] (about
 *     8.9e-16 to 1.1e15) or is zero. Beyond that range f32 accumulation can
 *     overflow or underflow: scores carry no bound and may be infinite or
 *     NaN, except that a search never returns NaN.
 */
#ifndef MNEMO_H
#define MNEMO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Versions                                                                  */
/* ------------------------------------------------------------------------ */

#define MNEMO_VERSION_MAJOR 0
#define MNEMO_VERSION_MINOR 3
#define MNEMO_VERSION_PATCH 0
/* Bumped only when a change breaks binary compatibility; it is the SOVERSION. */
#define MNEMO_ABI_VERSION 1

/* Required alignment in bytes of every data pointer passed to mnemo. */
#define MNEMO_ALIGNMENT 16

/* The id written into result slots that have no candidate; never a valid id. */
#define MNEMO_NO_ID UINT64_MAX

/* Most shards of one store (see "Sharded stores and the top-k merge"). */
#define MNEMO_MAX_SHARDS 64
/* mnemo_runtime_options.device_count: every visible CUDA device. */
#define MNEMO_ALL_DEVICES 0xFFFFFFFFu

#if defined(_WIN32)
#define MNEMO_API
#elif defined(__GNUC__) || defined(__clang__)
#define MNEMO_API __attribute__((visibility("default")))
#else
#define MNEMO_API
#endif

/* ------------------------------------------------------------------------ */
/* Status codes (pinned forever: new codes are only ever appended)           */
/* ------------------------------------------------------------------------ */

typedef int32_t mnemo_status;

enum mnemo_status_code {
  MNEMO_OK = 0,
  /* An argument has a value outside its domain (unknown enum, zero dim, k = 0,
     struct_size too small, overlapping buffers, ...). */
  MNEMO_E_INVALID_ARGUMENT = 1,
  /* A required pointer is NULL. */
  MNEMO_E_NULL_POINTER = 2,
  /* A data pointer is not MNEMO_ALIGNMENT-byte aligned. */
  MNEMO_E_MISALIGNED = 3,
  /* A product of sizes overflows 64 bits or the address space. */
  MNEMO_E_OVERFLOW = 4,
  /* An index or id is outside its valid range (pair index >= n_items, the
     reserved id MNEMO_NO_ID, a device id that does not exist). */
  MNEMO_E_OUT_OF_RANGE = 5,
  /* An input holds NaN or infinity (validation on). */
  MNEMO_E_NON_FINITE = 6,
  /* Source times of a resampling row decrease. */
  MNEMO_E_NOT_SORTED = 7,
  /* A dtype is unknown or not accepted for this argument. */
  MNEMO_E_DTYPE = 8,
  /* Shapes disagree (a vector of the wrong dimension, a filter bitmap whose
     length is not the store's slot count). */
  MNEMO_E_SHAPE = 9,
  /* Host or device memory could not be allocated. */
  MNEMO_E_OUT_OF_MEMORY = 10,
  /* The requested backend is not available (no module, no GPU, no driver). */
  MNEMO_E_BACKEND_UNAVAILABLE = 11,
  /* A backend failed while executing (a CUDA error, for example). */
  MNEMO_E_BACKEND = 12,
  /* The id is not in the store. */
  MNEMO_E_NOT_FOUND = 13,
  /* A file could not be read or written. */
  MNEMO_E_IO = 14,
  /* A store file is damaged, truncated or of an unknown format. */
  MNEMO_E_CORRUPT = 15,
  /* The operation is valid but not supported by this build or backend. */
  MNEMO_E_UNSUPPORTED = 16,
  /* A bug in mnemo: please report it with the message. */
  MNEMO_E_INTERNAL = 17
};

/* Static name of a status ("MNEMO_OK", "MNEMO_E_MISALIGNED", ...); never NULL
   ("MNEMO_E_UNKNOWN" for a value that is not a status). */
MNEMO_API const char* mnemo_status_name(mnemo_status status);

/* Message of the last failure on the calling thread; "" if none. The text
   stays valid until the next mnemo call on this thread. Successful calls do
   not clear it. */
MNEMO_API const char* mnemo_last_error(void);

/* ------------------------------------------------------------------------ */
/* Enumerations                                                              */
/* ------------------------------------------------------------------------ */

enum mnemo_dtype {
  MNEMO_DTYPE_F32 = 1,
  MNEMO_DTYPE_F16 = 2,  /* IEEE 754 binary16 */
  MNEMO_DTYPE_BF16 = 3, /* bfloat16: the upper half of a binary32 */
  MNEMO_DTYPE_F64 = 4,  /* resampling times only */
  MNEMO_DTYPE_U32 = 5,  /* pair indices only */
  MNEMO_DTYPE_U64 = 6   /* pair indices only */
};

/* Similarity metrics. Cosine and dot are similarities (higher is better);
   squared L2 is a distance (lower is better). */
enum mnemo_metric { MNEMO_METRIC_COSINE = 1, MNEMO_METRIC_DOT = 2, MNEMO_METRIC_L2SQ = 3 };

enum mnemo_backend {
  MNEMO_BACKEND_AUTO = 0, /* GPU for large work when one is usable, else CPU */
  MNEMO_BACKEND_CPU = 1,
  MNEMO_BACKEND_CUDA = 2 /* an error if no usable GPU: never a silent fallback */
};

enum mnemo_precision {
  MNEMO_PRECISION_EXACT = 0, /* no reduced-precision arithmetic */
  MNEMO_PRECISION_FAST = 1   /* tensor cores allowed; final scores re-scored */
};

/* ------------------------------------------------------------------------ */
/* Library information and memory                                           */
/* ------------------------------------------------------------------------ */

/* "MAJOR.MINOR.PATCH" of the loaded library. */
MNEMO_API const char* mnemo_version(void);

/* MNEMO_ABI_VERSION of the loaded library; compare it with the header's. */
MNEMO_API uint32_t mnemo_abi_version(void);

/* One line describing the build: version, ABI, compiler, backends built,
   CPU SIMD level, CUDA architectures of the module (if any). Static text. */
MNEMO_API const char* mnemo_build_info(void);

/* Allocates `bytes` (> 0) of host memory aligned to MNEMO_ALIGNMENT into *out.
   Errors: NULL_POINTER (out), INVALID_ARGUMENT (bytes = 0), OVERFLOW (bytes
   beyond the address space), OUT_OF_MEMORY. */
MNEMO_API mnemo_status mnemo_alloc(uint64_t bytes, void** out);

/* Frees memory from mnemo_alloc. NULL is accepted and ignored. */
MNEMO_API void mnemo_free(void* ptr);

/* ------------------------------------------------------------------------ */
/* Runtime                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct mnemo_runtime mnemo_runtime;

/* Options of a runtime. Always initialise with mnemo_runtime_options_default()
   and change fields afterwards; the struct only ever grows at the end. */
typedef struct mnemo_runtime_options {
  uint32_t struct_size;     /* sizeof(mnemo_runtime_options), set by the default */
  int32_t backend;          /* enum mnemo_backend; default AUTO */
  int32_t precision;        /* enum mnemo_precision; default EXACT */
  int32_t device_id;        /* CUDA device ordinal; default 0 */
  uint32_t num_threads;     /* CPU threads; 0 = one per available core */
  uint32_t validate;        /* 1 = refuse NaN/Inf inputs (default), 0 = skip */
  uint64_t workspace_bytes; /* GPU scratch bound; 0 = default (1 GiB) */
  /* Sharding, see "Sharded stores and the top-k merge". A caller whose
     struct_size ends before these fields gets their defaults (no sharding).
     cpu_shards applies when the runtime runs on the CPU (backend CPU, or AUTO
     without a usable GPU); the device fields when it runs on CUDA, where the
     first device listed also plays device_id's part. */
  uint32_t cpu_shards;       /* CPU runtime: shards of each store, 0 or 1 = none, at most MNEMO_MAX_SHARDS */
  uint32_t device_count;     /* CUDA: devices to shard over; 0 = device_id alone; MNEMO_ALL_DEVICES = all */
  const int32_t* device_ids; /* [device_count] distinct ordinals; NULL = 0 .. device_count - 1 */
} mnemo_runtime_options;

MNEMO_API mnemo_runtime_options mnemo_runtime_options_default(void);

/* Creates a runtime. opts may be NULL (defaults).
   Errors: NULL_POINTER (out), INVALID_ARGUMENT (struct_size smaller than the
   first version of the struct, unknown backend or precision, validate not 0
   or 1, cpu_shards or device_count above MNEMO_MAX_SHARDS, a repeated
   device), OUT_OF_RANGE (device_id, a device of device_ids), BACKEND_UNAVAILABLE (backend CUDA without
   a usable GPU; the message says why), OUT_OF_MEMORY.
   Thread safety: may be called from any thread. */
MNEMO_API mnemo_status mnemo_runtime_create(const mnemo_runtime_options* opts, mnemo_runtime** out);

/* Destroys a runtime; NULL is accepted. All its stores must be destroyed
   first. Must not run concurrently with other calls on the same runtime. */
MNEMO_API void mnemo_runtime_destroy(mnemo_runtime* rt);

/* What a runtime is and why. */
typedef struct mnemo_runtime_report {
  uint32_t struct_size;        /* set by the caller to sizeof(mnemo_runtime_report) */
  int32_t backend_requested;   /* enum mnemo_backend as asked */
  int32_t backend_active;      /* CPU or CUDA: where large work goes */
  int32_t precision;           /* enum mnemo_precision */
  int32_t device_id;           /* CUDA device in use, -1 when none */
  uint32_t num_threads;        /* CPU threads in use */
  uint32_t cuda_available;     /* 1 if a CUDA backend can run on device_id */
  uint32_t reserved0;          /* zero */
  uint64_t auto_gpu_min_bytes; /* AUTO: work touching fewer bytes runs on CPU */
  char device_name[128];       /* GPU name, or the CPU SIMD level for CPU */
  char reason[256];            /* why this backend (and why not CUDA) */
  /* Sharding (absent from a struct_size that ends before them). */
  uint32_t shards;                   /* shards of each store; 1 = unsharded */
  uint32_t device_count;             /* CUDA devices in use, one per shard; 0 on the CPU */
  int32_t devices[MNEMO_MAX_SHARDS]; /* their ordinals, in shard order */
} mnemo_runtime_report;

/* Fills *info. The caller sets info->struct_size first; a larger struct from a
   newer header is accepted and only the known prefix is written.
   Errors: NULL_POINTER, INVALID_ARGUMENT (struct_size too small). */
MNEMO_API mnemo_status mnemo_runtime_info(const mnemo_runtime* rt, mnemo_runtime_report* info);

/* ------------------------------------------------------------------------ */
/* Similarity: the raw score matrix                                          */
/* ------------------------------------------------------------------------ */

/* scores[i * n + j] = metric(queries[i], targets[j]) for i < nq, j < n.
   queries: f32 [nq x dim]; targets: [n x dim] of target_dtype (F32, F16,
   BF16); scores: f32 [nq x n]. nq = 0 or n = 0 does nothing.
   Errors: NULL_POINTER, MISALIGNED, INVALID_ARGUMENT (metric, dim = 0), DTYPE,
   OVERFLOW, NON_FINITE, BACKEND.
   Thread safety: concurrent calls on one runtime are allowed. */
MNEMO_API mnemo_status mnemo_similarity(mnemo_runtime* rt, int32_t metric, const float* queries, uint64_t nq,
                                        const void* targets, int32_t target_dtype, uint64_t n, uint64_t dim,
                                        float* scores);

/* mnemo_similarity on device pointers (queries, targets and scores in the
   memory of the runtime's GPU), queued on `stream` (a cudaStream_t; NULL is
   the default stream); returns without waiting, as the other `_device`
   calls (see mnemo_score_pairs_device). Rows whose length is not a multiple
   of 8 elements are copied once into padded device scratch; nothing travels
   through host memory. With validation on (the default) the non-finite
   check reads queries and targets on the device and waits for the stream
   before the scores are computed. A runtime without the CUDA backend
   returns BACKEND_UNAVAILABLE.
   Errors: those of mnemo_similarity, and BACKEND_UNAVAILABLE. */
MNEMO_API mnemo_status mnemo_similarity_device(mnemo_runtime* rt, int32_t metric, const float* queries, uint64_t nq,
                                               const void* targets, int32_t target_dtype, uint64_t n, uint64_t dim,
                                               float* scores, void* stream);

/* ------------------------------------------------------------------------ */
/* Memory store                                                              */
/* ------------------------------------------------------------------------ */

typedef struct mnemo_store mnemo_store;

/* Creates an empty store of `dim`-dimensional vectors kept in `dtype` (F32,
   F16 or BF16) and searched with `metric`. The store lives on the runtime's
   backend (resident on the GPU for a CUDA runtime).
   Errors: NULL_POINTER, INVALID_ARGUMENT (dim = 0 or > 65536, metric), DTYPE,
   OUT_OF_MEMORY. */
MNEMO_API mnemo_status mnemo_store_create(mnemo_runtime* rt, uint64_t dim, int32_t dtype, int32_t metric,
                                          mnemo_store** out);

/* Destroys a store; NULL is accepted. Must not run concurrently with other
   calls on the same store. */
MNEMO_API void mnemo_store_destroy(mnemo_store* store);

/* Adds `count` vectors with the given ids; an id already present is replaced
   (upsert, keeping its slot and bias). Within one call a repeated id takes the
   last vector. vectors: [count x dim] of `vectors_dtype`, which is F32 or the
   store's dtype (F32 input to an F16/BF16 store is rounded to nearest even).
   count = 0 does nothing.
   Errors: NULL_POINTER, MISALIGNED, DTYPE, OVERFLOW, OUT_OF_RANGE (id =
   MNEMO_NO_ID, naming its position), NON_FINITE (also an F32 value that
   rounds to infinity in an F16/BF16 store, e.g. 65520 for F16; validation
   on), OUT_OF_MEMORY. On error the
   store is unchanged. Thread safety: exclusive (waits for running searches). */
MNEMO_API mnemo_status mnemo_store_add(mnemo_store* store, const uint64_t* ids, const void* vectors,
                                       int32_t vectors_dtype, uint64_t count);

/* Removes the given ids; ids not present are ignored. *removed (may be NULL)
   receives how many were present. Removal frees the slot; slots are compacted
   when removed slots exceed a quarter of all slots, which renumbers slots.
   Errors: NULL_POINTER (ids with count > 0), MISALIGNED.
   Thread safety: exclusive. */
MNEMO_API mnemo_status mnemo_store_remove(mnemo_store* store, const uint64_t* ids, uint64_t count, uint64_t* removed);

/* Number of live vectors. */
MNEMO_API mnemo_status mnemo_store_count(const mnemo_store* store, uint64_t* out);

/* Dimension, storage dtype and metric of the store; any out may be NULL. */
MNEMO_API mnemo_status mnemo_store_shape(const mnemo_store* store, uint64_t* dim, int32_t* dtype, int32_t* metric);

/* Copies the stored (rounded) vector of `id` as f32 into out [dim].
   Errors: NULL_POINTER, MISALIGNED, NOT_FOUND. */
MNEMO_API mnemo_status mnemo_store_get(const mnemo_store* store, uint64_t id, float* out);

/* Slots: every live vector occupies a slot in [0, slot_count). A slot is
   stable until a remove compacts the store (see mnemo_store_remove); a new id
   takes a fresh slot at the end. Slots index the bitmap filter. */
MNEMO_API mnemo_status mnemo_store_slot_count(const mnemo_store* store, uint64_t* out);
/* Errors: NULL_POINTER, NOT_FOUND. */
MNEMO_API mnemo_status mnemo_store_slot_of(const mnemo_store* store, uint64_t id, uint64_t* slot);

/* Sets the additive bias (activation: recency, importance...) of each id; a
   memory's bias starts at 0 and survives upserts. biases: f32 [count].
   Errors: NULL_POINTER, MISALIGNED, NOT_FOUND (naming the position),
   NON_FINITE. On error no bias changes. Thread safety: exclusive. */
MNEMO_API mnemo_status mnemo_store_set_bias(mnemo_store* store, const uint64_t* ids, const float* biases,
                                            uint64_t count);

/* Memory metadata. Besides its vector and bias, every memory carries a
   last-access time (f64 seconds on any clock the caller keeps, typically UNIX
   time; 0 when never given) and an importance (f32; 0 when never given),
   which activation search (below) ranks by. Both survive upserts, are kept in
   snapshots and journals, and mirrored on the GPU.

   mnemo_store_add with metadata: times (f64 [count]) and importance (f32
   [count]) may each be NULL. A given array sets the value of every listed
   memory (new or upserted; a repeated id takes its last entry); a NULL one
   leaves an upserted memory's value as it was and gives a new memory 0.
   Errors: those of mnemo_store_add, and NON_FINITE for a NaN or infinite
   time or importance (checked whatever the validation setting, naming the
   position). On error the store is unchanged. Thread safety: exclusive. */
MNEMO_API mnemo_status mnemo_store_add_memories(mnemo_store* store, const uint64_t* ids, const void* vectors,
                                                int32_t vectors_dtype, uint64_t count, const double* times,
                                                const float* importance);

/* Set the last-access times (f64 [count]) or importances (f32 [count]) of
   existing memories; a repeated id takes its last entry.
   Errors: NULL_POINTER, MISALIGNED, OVERFLOW, NOT_FOUND (naming the
   position), NON_FINITE. On error nothing changes. Thread safety: exclusive. */
MNEMO_API mnemo_status mnemo_store_set_times(mnemo_store* store, const uint64_t* ids, const double* times,
                                             uint64_t count);
MNEMO_API mnemo_status mnemo_store_set_importance(mnemo_store* store, const uint64_t* ids, const float* importance,
                                                  uint64_t count);

/* The metadata of `count` memories: times (f64 [count]), importance and
   biases (f32 [count]); any output may be NULL. Errors: NULL_POINTER (ids
   with count > 0), MISALIGNED, OVERFLOW, NOT_FOUND (naming the position;
   nothing written). Thread safety: runs alongside searches. */
MNEMO_API mnemo_status mnemo_store_get_meta(const mnemo_store* store, const uint64_t* ids, uint64_t count,
                                            double* times, float* importance, float* biases);

/* ------------------------------------------------------------------------ */
/* What a memory holds besides its vector: key, namespace, tags, attributes  */
/* and payload                                                               */
/* ------------------------------------------------------------------------ */

/* Every memory may carry, besides its vector, time, importance and bias:
   - a key: a string unique in the store, mapped to the memory's id (look-up
     both ways: mnemo_store_ids_of_keys, mnemo_store_read);
   - a namespace: a path of strings ("users", "42", "episodic"), which scoped
     searches match exactly or by prefix;
   - tags: a set of strings;
   - attributes: name -> value, each an INT (int64), DOUBLE (finite f64),
     BOOL or STRING;
   - a payload: bytes (the memory's text or a JSON document), returned as
     given and never searched.
   Strings are UTF-8 bytes without NUL; names, tags, namespace parts and
   string values are interned once per store. A memory without a field
   simply lacks it: every predicate on a field it lacks is false for it (so
   a scoped search never returns a memory outside its scope, whatever it
   lacks), and NOT turns that into true. All of it is journaled in a durable
   store, kept in snapshots, and follows the memory through upserts,
   compaction and index layouts. Limits (MNEMO_E_INVALID_ARGUMENT beyond
   them, naming the memory and the field): */
#define MNEMO_MAX_KEY_BYTES 1024u         /* a key */
#define MNEMO_MAX_NAME_BYTES 1024u        /* a namespace part, tag, attribute name or string value */
#define MNEMO_MAX_NAMESPACE_DEPTH 32u     /* parts of a namespace */
#define MNEMO_MAX_TAGS 1024u              /* tags of a memory */
#define MNEMO_MAX_ATTRIBUTES 256u         /* attributes of a memory */
#define MNEMO_MAX_PAYLOAD_BYTES 16777216u /* a payload (16 MiB) */

enum mnemo_value_type {
  MNEMO_VALUE_INT = 1,    /* i */
  MNEMO_VALUE_DOUBLE = 2, /* d, finite */
  MNEMO_VALUE_BOOL = 3,   /* i: 0 or 1 */
  MNEMO_VALUE_STRING = 4  /* s: NUL-terminated UTF-8 */
};

/* A typed value (an attribute's, or a filter's operand). INT and DOUBLE
   compare with each other as numbers (exactly: an int64 beyond 2^53 is not
   rounded); STRING compares bytewise; BOOL only equals or differs. Values of
   different kinds (a number and a string, a bool and a number) are never
   equal and never ordered: EQ, IN, LT, LE, GT, GE and BETWEEN are false for
   them, NE and NOT_IN true (the memory has the attribute and it differs). */
typedef struct mnemo_value {
  int32_t type;      /* enum mnemo_value_type */
  uint32_t reserved; /* zero */
  int64_t i;
  double d;
  const char* s;
} mnemo_value;

typedef struct mnemo_attribute {
  const char* name; /* NUL-terminated, not empty */
  mnemo_value value;
} mnemo_attribute;

/* Which fields a write sets (mnemo_memory_fields.set). */
enum mnemo_field_bits {
  MNEMO_FIELD_KEY = 1,
  MNEMO_FIELD_NAMESPACE = 2,
  MNEMO_FIELD_TAGS = 4,
  MNEMO_FIELD_ATTRIBUTES = 8,
  MNEMO_FIELD_PAYLOAD = 16,
  MNEMO_FIELD_ALL = 31
};

/* The fields of one memory, as written and as read back. A write replaces
   each field named in `set` (an empty or NULL value clears it) and keeps the
   others (a new memory starts without them). Read back, every field is
   filled and `set` names those the memory has. Tags come back sorted and
   unique, attributes sorted by name (a name given twice in one write keeps
   its last value). */
typedef struct mnemo_memory_fields {
  uint32_t struct_size; /* sizeof(mnemo_memory_fields) */
  uint32_t set;         /* MNEMO_FIELD_* bits */
  const char* key;      /* NULL or "": no key */
  const char* const* namespace_parts;
  uint32_t namespace_depth; /* 0: no namespace */
  uint32_t tag_count;
  const char* const* tags;
  const mnemo_attribute* attributes;
  uint32_t attribute_count;
  uint32_t reserved0; /* zero */
  const void* payload;
  uint64_t payload_bytes; /* 0: no payload */
} mnemo_memory_fields;

MNEMO_API mnemo_memory_fields mnemo_memory_fields_default(void);

/* mnemo_store_add_memories with each memory's fields: fields [count] (may
   be NULL: then as mnemo_store_add_memories). fields[i] belongs to ids[i];
   a repeated id takes its last entry. A key already held by another memory
   (before the call or earlier in it) is refused with INVALID_ARGUMENT
   naming both. Errors: those of mnemo_store_add_memories, INVALID_ARGUMENT
   (a limit, an empty name, an unknown value type, a non-finite DOUBLE,
   struct_size, a key taken). On error the store is unchanged.
   Thread safety: exclusive. */
MNEMO_API mnemo_status mnemo_store_add_with_fields(mnemo_store* store, const uint64_t* ids, const void* vectors,
                                                   int32_t vectors_dtype, uint64_t count, const double* times,
                                                   const float* importance, const mnemo_memory_fields* fields);

/* Updates the fields named in each fields[i].set of existing memories in
   place (their vectors, slots and the other fields untouched).
   Errors: NULL_POINTER, NOT_FOUND (naming the position), INVALID_ARGUMENT
   (as above). On error nothing changes. Thread safety: exclusive. */
MNEMO_API mnemo_status mnemo_store_update_fields(mnemo_store* store, const uint64_t* ids,
                                                 const mnemo_memory_fields* fields, uint64_t count);

/* The ids of `count` keys (NUL-terminated); ids[i] = MNEMO_NO_ID for a key
   no memory holds. Errors: NULL_POINTER, MISALIGNED (ids).
   Thread safety: runs alongside searches. */
MNEMO_API mnemo_status mnemo_store_ids_of_keys(const mnemo_store* store, const char* const* keys, uint64_t count,
                                               uint64_t* ids);

/* Memories read back: a snapshot of their fields taken by one call, valid
   until mnemo_records_destroy (the store may change meanwhile). */
typedef struct mnemo_records mnemo_records;

/* Reads the fields of `count` memories (times and importance too, through
   mnemo_records_get). A missing id is not an error: its entry is marked not
   found. Errors: NULL_POINTER, MISALIGNED, OUT_OF_MEMORY.
   Thread safety: runs alongside searches. */
MNEMO_API mnemo_status mnemo_store_read(const mnemo_store* store, const uint64_t* ids, uint64_t count,
                                        mnemo_records** out);
/* With mnemo_store_read_fields: each memory's time and importance too. */
enum mnemo_read_bits { MNEMO_READ_META = 256 };

/* mnemo_store_read of only what `fields` names: MNEMO_FIELD_* bits (the
   fields to copy; the others come back empty and absent from `set`) and
   MNEMO_READ_META (time and importance; without it mnemo_records_get gives
   0 for both). 0: whether each id is found, and nothing else. Each part
   left out is memory not read: after other work has taken the caches, a
   scattered read costs microseconds, and a search's results often need a
   key and a payload only. mnemo_store_read is MNEMO_FIELD_ALL |
   MNEMO_READ_META. Errors: those of mnemo_store_read, INVALID_ARGUMENT (a
   bit outside MNEMO_FIELD_ALL | MNEMO_READ_META); on error *out is left as
   it was. Thread safety: runs alongside searches. */
MNEMO_API mnemo_status mnemo_store_read_fields(const mnemo_store* store, const uint64_t* ids, uint64_t count,
                                               uint32_t fields, mnemo_records** out);
MNEMO_API void mnemo_records_destroy(mnemo_records* records);
MNEMO_API uint64_t mnemo_records_count(const mnemo_records* records);
/* Entry i: *found = 0 for an id not in the store (then nothing else is
   written); else its id, fields (pointers into `records`), time and
   importance; any of fields, time, importance may be NULL.
   Errors: NULL_POINTER, OUT_OF_RANGE (i >= count), INVALID_ARGUMENT
   (fields->struct_size). */
MNEMO_API mnemo_status mnemo_records_get(const mnemo_records* records, uint64_t i, uint32_t* found, uint64_t* id,
                                         mnemo_memory_fields* fields, double* time, float* importance);

/* ------------------------------------------------------------------------ */
/* Filters: which memories a search or a selection may return                */
/* ------------------------------------------------------------------------ */

/* A filter is a small expression tree built node by node; each call appends
   one node and returns its number in *node (may be NULL). Children are
   given by number, so they are built first. The root is the last node built
   unless mnemo_filter_set_root names another. A filter copies everything it
   is given, is not tied to a store, and may be used by any number of
   searches at once (it is only read by them). Its evaluation is exact: a
   filtered search returns min(k, matching memories) results, never fewer,
   on every plan, with and without an index. */
typedef struct mnemo_filter mnemo_filter;

enum mnemo_filter_op {
  /* attributes (mnemo_filter_attribute) */
  MNEMO_OP_EQ = 1,
  MNEMO_OP_NE = 2, /* has the attribute and it differs */
  MNEMO_OP_LT = 3,
  MNEMO_OP_LE = 4,
  MNEMO_OP_GT = 5,
  MNEMO_OP_GE = 6,
  MNEMO_OP_IN = 7,      /* equals one of the values */
  MNEMO_OP_NOT_IN = 8,  /* has the attribute and equals none of them */
  MNEMO_OP_BETWEEN = 9, /* values[0] <= v <= values[1] */
  MNEMO_OP_EXISTS = 10, /* has the attribute (no values) */
  /* tags (mnemo_filter_tags) */
  MNEMO_OP_ANY = 11, /* holds at least one of the tags */
  MNEMO_OP_ALL = 12, /* holds every one of them */
  /* namespaces (mnemo_filter_namespace) */
  MNEMO_OP_NAMESPACE_EQ = 13,    /* exactly this namespace */
  MNEMO_OP_NAMESPACE_UNDER = 14  /* this namespace or one below it (a prefix of parts) */
};

#define MNEMO_MAX_FILTER_NODES 65536u

MNEMO_API mnemo_status mnemo_filter_create(mnemo_filter** out);
MNEMO_API void mnemo_filter_destroy(mnemo_filter* filter);
/* NAMESPACE_EQ or NAMESPACE_UNDER over `depth` parts (UNDER with depth 0:
   every memory that has a namespace). */
MNEMO_API mnemo_status mnemo_filter_namespace(mnemo_filter* f, int32_t op, const char* const* parts, uint32_t depth,
                                              uint32_t* node);
/* ANY or ALL of `count` tags (ANY of none: nothing; ALL of none: every
   memory). */
MNEMO_API mnemo_status mnemo_filter_tags(mnemo_filter* f, int32_t op, const char* const* tags, uint32_t count,
                                         uint32_t* node);
/* An attribute predicate: EQ ... GE take one value, IN and NOT_IN any
   number, BETWEEN two, EXISTS none. */
MNEMO_API mnemo_status mnemo_filter_attribute(mnemo_filter* f, const char* name, int32_t op, const mnemo_value* values,
                                              uint32_t count, uint32_t* node);
/* Keys: the memories holding any of these keys. */
MNEMO_API mnemo_status mnemo_filter_keys(mnemo_filter* f, const char* const* keys, uint64_t count, uint32_t* node);
/* Ids: the memories with any of these ids (ids not in the store ignored). */
MNEMO_API mnemo_status mnemo_filter_ids(mnemo_filter* f, const uint64_t* ids, uint64_t count, uint32_t* node);
/* Last-access time in [lo, hi] and importance in [lo, hi] (inclusive; an
   infinite end is open; NaN refused). */
MNEMO_API mnemo_status mnemo_filter_time(mnemo_filter* f, double lo, double hi, uint32_t* node);
MNEMO_API mnemo_status mnemo_filter_importance(mnemo_filter* f, double lo, double hi, uint32_t* node);
/* AND / OR of `count` earlier nodes (AND of none: every memory; OR of none:
   nothing); NOT of one. */
MNEMO_API mnemo_status mnemo_filter_and(mnemo_filter* f, const uint32_t* children, uint32_t count, uint32_t* node);
MNEMO_API mnemo_status mnemo_filter_or(mnemo_filter* f, const uint32_t* children, uint32_t count, uint32_t* node);
MNEMO_API mnemo_status mnemo_filter_not(mnemo_filter* f, uint32_t child, uint32_t* node);
MNEMO_API mnemo_status mnemo_filter_set_root(mnemo_filter* f, uint32_t node);

/* The ids of the memories a filter matches (filter NULL: every memory), in
   ascending id order, skipping the first `offset`: up to `capacity` of them
   into ids, their number into *written, and the number of all matches into
   *total (may be NULL). Errors: NULL_POINTER, MISALIGNED, INVALID_ARGUMENT
   (an empty filter, or one whose root is not set).
   Thread safety: runs alongside searches. */
MNEMO_API mnemo_status mnemo_store_select(const mnemo_store* store, const mnemo_filter* filter, uint64_t offset,
                                          uint64_t capacity, uint64_t* ids, uint64_t* written, uint64_t* total);

/* The namespaces the store's memories hold, with how many memories each:
   entry i's parts through mnemo_namespaces_get. */
typedef struct mnemo_namespaces mnemo_namespaces;
MNEMO_API mnemo_status mnemo_store_namespaces(const mnemo_store* store, mnemo_namespaces** out);
MNEMO_API void mnemo_namespaces_destroy(mnemo_namespaces* list);
MNEMO_API uint64_t mnemo_namespaces_count(const mnemo_namespaces* list);
/* Errors: NULL_POINTER, OUT_OF_RANGE. */
MNEMO_API mnemo_status mnemo_namespaces_get(const mnemo_namespaces* list, uint64_t i, const char* const** parts,
                                            uint32_t* depth, uint64_t* memories);

/* Lays the store's memories out by namespace: each namespace's memories,
   with those of the namespaces under it, become one run of the store's
   rows (within each list of an index, and its hot tier); removed rows are
   dropped. Searches return what they returned before; a search scoped to a
   namespace then reads its run of rows as an unfiltered search of those
   rows alone would. Memories added afterwards go to the end: call it again
   after many adds. The order is kept by a snapshot (mnemo_store_save,
   mnemo_store_checkpoint) but not journaled. It takes room for a second
   copy of the rows while it runs, as an index build's layout does.
   Errors: NULL_POINTER, OUT_OF_MEMORY. Thread safety: exclusive, like a
   write. */
MNEMO_API mnemo_status mnemo_store_cluster(mnemo_store* store);

enum mnemo_filter_kind {
  MNEMO_FILTER_NONE = 0,
  MNEMO_FILTER_IDS = 1,        /* allow-list of ids (unknown ids ignored) */
  MNEMO_FILTER_SLOT_BITMAP = 2 /* bit s of word s/64 set = slot s allowed */
};

/* Search options. Initialise with mnemo_search_options_default(). */
typedef struct mnemo_search_options {
  uint32_t struct_size; /* sizeof(mnemo_search_options) */
  int32_t filter_kind;  /* enum mnemo_filter_kind; default NONE */
  /* MNEMO_FILTER_IDS: filter_ids [filter_count].
     MNEMO_FILTER_SLOT_BITMAP: filter_bitmap [ceil(filter_count / 64)] with
     filter_count equal to mnemo_store_slot_count (else MNEMO_E_SHAPE). */
  const uint64_t* filter_ids;
  const uint64_t* filter_bitmap;
  uint64_t filter_count;
  /* 1 = rank by score + bias (cosine, dot) or distance - bias (L2), so a
     positive bias always favours a memory; returned scores include it. */
  uint32_t apply_bias;
  uint32_t reserved0; /* zero */
  /* Activation ranking (absent from a struct_size of 40, the first ABI's
     size: then off). With activation = 1 a memory i is ranked by
       A_i = w_relevance * rel_i + w_recency * rec_i + w_importance * imp_i
             (+ bias_i when apply_bias = 1)
     where rel_i is the cosine or dot score, rec_i = 2^(-(now - t_i) /
     half_life) from the memory's last-access time t_i (a time after `now`
     counts as now: rec_i = 1), imp_i its importance. Cosine and dot return
     A_i, best = highest; for L2SQ rel_i is the negated squared distance and
     the returned score is -A_i, best = lowest, as for distances. Computed in
     the scan on every backend (no extra pass over the store); rec_i in f64
     up to the exponent, A_i accumulated in f32: |error| <= 1e-5 *
     (|w_relevance| * s + |w_recency| + |w_importance * imp_i| + |bias_i|),
     s the scale of the plain score's bound. Ties to the smaller id, NaN never
     returned, filters apply.
     normalize = 1: each of rel, rec and imp is first min-max scaled to
     [0, 1] over the candidates of the query (live memories the filter
     allows), x' = (x - min) / (max - min), or 0.5 for every candidate when
     max = min (Generative Agents' retrieval). The minimum and maximum are
     only known after every candidate is scored, so this mode keeps each
     query's scores (4 bytes per memory, in the workspace on a GPU) and
     selects from them in a second pass over those scores; a store sharded
     over several devices also scans its vectors twice (ranges, then keys).
     touch = 1: the returned memories' last-access times become `now`,
     atomically with the search (the search then takes the store exclusively,
     like a write) and journaled in a durable store. */
  uint32_t activation; /* 0 (default) or 1 */
  uint32_t normalize;  /* 0 (default) or 1; needs activation */
  float w_relevance;   /* default 1 */
  float w_recency;     /* default 0 */
  float w_importance;  /* default 0 */
  uint32_t touch;      /* 0 (default) or 1; needs activation */
  double half_life;    /* seconds, > 0, may be +infinity; default 86400 */
  double now;          /* seconds on the times' clock; NaN (default): the
                          current UNIX time (CLOCK_REALTIME) of the call */
  /* mnemo_store_search_device only (absent from a struct_size of 80, the
     size before it: then 0 and NULL). check_on_device = 1: with validation
     on, the queries' non-finite check runs on the device inside the search
     instead of before it, so the call never waits for the stream. A query
     holding NaN or infinity then gets, in its row, ids MNEMO_NO_ID and scores
     NaN (the other queries' rows are unaffected), and device_status, when
     not NULL, receives MNEMO_E_NON_FINITE at the search's point in the
     stream, else MNEMO_OK; the call itself returns MNEMO_OK. device_status
     is an int32_t in the memory of the store's GPU (16-byte aligned), read
     by the caller after the stream reaches that point. check_on_device = 0
     (default): the check waits for the stream and the call returns
     MNEMO_E_NON_FINITE, writing nothing. mnemo_store_search ignores
     check_on_device (its checks are on the host) and refuses a
     device_status. */
  uint32_t check_on_device; /* 0 (default) or 1 */
  uint32_t reserved1;       /* zero */
  int32_t* device_status;   /* default NULL */
  /* Sublinear recall (absent from a struct_size of 96, the size before it:
     then 0). On a store with an index (mnemo_store_build_index), nprobe > 0
     reads only the nprobe lists whose centroids rank best for each query,
     plus the hot tier (every memory written since the index was built),
     which every such search scans exactly: a memory is found by the search
     after the write that stored it. nprobe = 0 (default), nprobe >= the
     store's list count, or a store without an index: the exact scan of every
     memory. Within the lists read, scores, ties, filters, bias and
     activation are those of the exact scan (with normalize, the min-max
     ranges are taken over the candidates read); recall against the exact
     scan depends on the data and on nprobe (mnemo eval --nprobe). */
  uint32_t nprobe;
  uint32_t reserved2; /* zero */
  /* Filters over what memories hold (absent from a struct_size of 104, the
     size before them: then NULL). where: one filter for every query;
     where_each: nq filters, query i searching only what where_each[i]
     matches (an entry may be NULL: no filter for that query). Both may be
     given, and with filter_kind: a memory must pass each. Each query gets
     min(k, its candidates) results, never fewer, whatever the plan: the
     store evaluates a filter from its postings (tags, namespaces, attribute
     values) and ordered attribute indexes, then scans only the matching
     memories when they are few and the whole store with a mask otherwise;
     on an indexed store with nprobe > 0 a filtered query reads further
     lists until it has k candidates, or scans its matching memories
     exactly. */
  const mnemo_filter* where;
  const mnemo_filter* const* where_each;
} mnemo_search_options;

MNEMO_API mnemo_search_options mnemo_search_options_default(void);

/* k nearest stored vectors for each of nq queries (f32 [nq x dim]).
   ids: [nq x k], scores: f32 [nq x k]; row i holds query i's results, best
   first (highest cosine/dot, lowest squared L2), ties broken by the smaller
   id, so results are deterministic. Any k >= 1 is accepted: when fewer than k
   candidates exist the remaining slots get id MNEMO_NO_ID and score NaN.
   Vectors whose score is NaN are never returned. opts may be NULL.
   Errors: NULL_POINTER, MISALIGNED, INVALID_ARGUMENT (k = 0, filter kind,
   struct_size, a flag not 0 or 1, normalize or touch without activation,
   a weight not finite, half_life not > 0, now infinite), SHAPE (bitmap
   length), OVERFLOW (nq * k), NON_FINITE, IO (touch on a durable store
   whose journal cannot be written; the times stay as they were).
   Thread safety: concurrent searches allowed; with touch, exclusive. */
MNEMO_API mnemo_status mnemo_store_search(const mnemo_store* store, const float* queries, uint64_t nq, uint64_t k,
                                          const mnemo_search_options* opts, uint64_t* ids, float* scores);

/* mnemo_store_search on device pointers: queries (f32 [nq x dim]), ids
   ([nq x k]) and scores ([nq x k]) in the memory of the GPU that holds the
   store (a store created on a CUDA runtime, or an AUTO runtime that placed
   it there). `opts` and its filter arrays stay in host memory. The search
   is queued on `stream` (a cudaStream_t; NULL is the default stream) and the
   call returns without waiting: the results are ready when the stream
   reaches that point. A later write to the store (add, remove, bias) waits
   for the searches queued before it, so they see the store as it was when
   they were called. With validation on (the default) the queries' non-finite
   check runs on the device and waits for the stream before the search is
   queued. Same results, order, ties and padding as mnemo_store_search.
   With touch the call waits for the stream (the returned ids are read back
   to set their times) before it returns.
   A store sharded over several GPUs takes the buffers on its first device
   (the runtime's device_id, shard 0's): every shard searches a copy of the
   queries on its own device and stream, ordered after the work queued on
   `stream` before the call, and the shards' lists are copied back to the
   first device and merged there on `stream`, so the caller still waits on
   one stream only. The runtime enables peer access between its first device
   and the others where the hardware allows (copies then go straight over
   NVLink or PCIe).
   Errors: those of mnemo_store_search, BACKEND_UNAVAILABLE (the store is
   not held by a GPU). Thread safety: as mnemo_store_search. */
MNEMO_API mnemo_status mnemo_store_search_device(const mnemo_store* store, const float* queries, uint64_t nq,
                                                 uint64_t k, const mnemo_search_options* opts, uint64_t* ids,
                                                 float* scores, void* stream);

/* Writes the store to `path` (a versioned binary format with a checksum per
   section): to a temporary file in the same folder, flushed to disk, then
   renamed over `path`, so a crash never leaves a half-written store.
   Errors: NULL_POINTER, IO. Thread safety: runs alongside searches. */
MNEMO_API mnemo_status mnemo_store_save(const mnemo_store* store, const char* path);

/* Opens a store saved by mnemo_store_save on runtime rt.
   Errors: NULL_POINTER, IO (cannot open or read), CORRUPT (bad magic,
   unknown version, checksum mismatch, truncation, inconsistent counts; the
   message says which), OUT_OF_MEMORY. Nothing is returned on error. The
   snapshot of a durable store opens too, without its journal (a copy that
   lacks the writes made since its last checkpoint). */
MNEMO_API mnemo_status mnemo_store_open(mnemo_runtime* rt, const char* path, mnemo_store** out);

/* Durable stores. A durable store is a snapshot file (the format of
   mnemo_store_save) plus an append-only journal beside it. Every add, remove
   and set_bias is appended to the journal, with its own checksum and sequence
   number, before the call returns; with MNEMO_SYNC_EACH_WRITE the record is
   on disk (fdatasync) by then, so every acknowledged write survives a crash
   of the process or the machine. mnemo_store_checkpoint writes a new snapshot
   and empties the journal; the snapshot records the last write it holds, so a
   crash at any point of a checkpoint neither loses nor repeats a write.
   Opening replays the journal records after the snapshot and ignores a torn
   final record (a write cut short by the crash, never acknowledged). A
   journal is used by one process at a time (a file lock). */
enum mnemo_sync_policy {
  MNEMO_SYNC_EACH_WRITE = 0, /* fdatasync before each write returns (default) */
  MNEMO_SYNC_OS = 1          /* written at once, flushed by the OS: survives a
                                crash of the process, not of the machine */
};

/* Options of mnemo_store_open_durable. Initialise with
   mnemo_durable_options_default(); the struct only ever grows at the end. */
typedef struct mnemo_durable_options {
  uint32_t struct_size;     /* sizeof(mnemo_durable_options) */
  int32_t sync;             /* enum mnemo_sync_policy; default EACH_WRITE */
  const char* journal_path; /* NULL (default): the snapshot path + ".journal" */
  /* The shape of a new store, created when no snapshot exists at the path.
     dim = 0 (default): the store must exist. When a store exists and dim is
     not 0, its shape must match (else MNEMO_E_SHAPE). */
  uint64_t dim;
  int32_t dtype;  /* default F32 */
  int32_t metric; /* default COSINE */
} mnemo_durable_options;

MNEMO_API mnemo_durable_options mnemo_durable_options_default(void);

/* Opens (or, with opts->dim set, creates) the durable store whose snapshot is
   at `path`. opts may be NULL only for an existing store.
   Errors: NULL_POINTER, INVALID_ARGUMENT (struct_size, sync, dim > 65536,
   metric), DTYPE, SHAPE, IO (no store and no dim; a file cannot be read,
   written or locked: the journal is open in another process), CORRUPT
   (snapshot or journal damaged anywhere but a torn final journal record,
   files that do not belong together; the message says which), OUT_OF_MEMORY.
   Nothing is returned on error. */
MNEMO_API mnemo_status mnemo_store_open_durable(mnemo_runtime* rt, const char* path, const mnemo_durable_options* opts,
                                                mnemo_store** out);

/* Durable store: writes a new snapshot of the whole store (temporary file,
   flushed, renamed, folder flushed) and starts an empty journal.
   Errors: NULL_POINTER, UNSUPPORTED (not a durable store), IO.
   Thread safety: exclusive, like a write. */
MNEMO_API mnemo_status mnemo_store_checkpoint(mnemo_store* store);

/* What a store holds. The caller sets struct_size first; a larger struct
   from a newer header is accepted and only the known prefix is written. */
typedef struct mnemo_store_statistics {
  uint32_t struct_size;     /* sizeof(mnemo_store_statistics), set by the caller */
  uint32_t durable;         /* 1 for a store opened by mnemo_store_open_durable */
  uint64_t vectors;         /* live vectors (mnemo_store_count) */
  uint64_t tombstones;      /* removed slots not yet compacted away */
  uint64_t slots;           /* mnemo_store_slot_count */
  uint64_t host_bytes;      /* host memory of vectors, norms, biases, id index */
  uint64_t device_bytes;    /* device memory of the GPU copy; 0 without one */
  uint64_t journal_records; /* writes journaled since the last snapshot */
  uint64_t journal_bytes;   /* size of the journal file */
  uint64_t sequence;        /* number of the last journaled write */
  /* Sharding (absent from a struct_size that ends before them). */
  uint32_t shards;                          /* shards of the store; 1 = unsharded */
  uint32_t reserved1;                       /* zero */
  uint64_t shard_vectors[MNEMO_MAX_SHARDS]; /* live vectors of each shard */
  /* Filtered searches since the store was made or opened (absent from a
     struct_size that ends before them): queries whose filter the store's
     GPU evaluated (mnemo_search_options.where / where_each on a store the
     GPU holds, host buffers, k <= 256), and queries whose filter was
     evaluated on the host. */
  uint64_t filtered_on_device;
  uint64_t filtered_on_host;
  /* Of filtered_on_host, the queries whose matches were one run of rows
     (a namespace of a store laid out by mnemo_store_cluster), read as an
     unfiltered search of those rows alone. Absent from a struct_size that
     ends before it. */
  uint64_t filtered_ranged;
} mnemo_store_statistics;

/* Errors: NULL_POINTER, INVALID_ARGUMENT (struct_size too small).
   Thread safety: runs alongside searches. */
MNEMO_API mnemo_status mnemo_store_stats(const mnemo_store* store, mnemo_store_statistics* out);

/* ------------------------------------------------------------------------ */
/* Sublinear recall: an inverted-file index on a store                       */
/* ------------------------------------------------------------------------ */

/* mnemo_store_build_index trains nlist centroids by k-means on a sample of
   the store's memories (the store's metric: cosine rows are clustered on the
   unit sphere; dot stores are clustered by squared L2 and assigned by dot
   product), assigns every memory to its best centroid and lays the store's
   slots out list by list, so a list is one contiguous run read by the same
   scan as the whole store. Searches with nprobe > 0
   (mnemo_search_options) then read nprobe lists and the hot tier.
   Writes after a build: a new memory, and an upserted one (which moves out
   of its list, so its slot changes), go to the hot tier; a removed one is
   tombstoned in place. The index is rebuilt (retrained and laid out again)
   when the hot tier holds more than rebuild_hot_fraction of the indexed
   memories and at least rebuild_hot_min, or when the largest list holds
   more than rebuild_skew times the mean list (removes shrink lists unevenly).
   With background = 1 the rebuild runs on a thread of the store: searches
   go on with the old index meanwhile (writes too, except during the final
   re-layout, which holds the store like a write); memories written during
   the rebuild stay in the hot tier of the new index. In a durable store the
   built layout (centroids and each memory's list) is journaled before the
   build returns, and snapshots hold the index; a damaged index section is
   refused like any other (MNEMO_E_CORRUPT). A sharded store trains one
   set of centroids over all its memories; each shard lays its own memories
   out by them (nprobe then reads nprobe lists in every shard). */
typedef struct mnemo_index_options {
  uint32_t struct_size;    /* sizeof(mnemo_index_options) */
  uint32_t nlist;          /* lists; 0 (default): round(sqrt(count)), at least 1 */
  uint32_t train_iters;    /* k-means iterations; 0 (default): 10 */
  uint32_t train_per_list; /* training sample rows per list; 0 (default): 256 */
  uint64_t seed;           /* sample and initial centroids; default 1 */
  double rebuild_hot_fraction; /* default 0.25; +infinity: never rebuild for the hot tier */
  uint64_t rebuild_hot_min;    /* default 4096 */
  double rebuild_skew;         /* default 8; +infinity: never rebuild for skew */
  uint32_t background;         /* 1 (default): automatic rebuilds on a thread; 0: inside the write */
  uint32_t reserved0;          /* zero */
} mnemo_index_options;

MNEMO_API mnemo_index_options mnemo_index_options_default(void);

/* Builds (or rebuilds) the store's index now and returns when it is in
   place; a background rebuild under way is waited for first. A store with
   fewer memories than lists gets one list per memory. opts may be NULL.
   Errors: NULL_POINTER, INVALID_ARGUMENT (struct_size, a fraction or skew
   not > 0 or NaN, background not 0 or 1, nlist >= 2^23), IO (durable store:
   the journal cannot be written; the store keeps its previous layout),
   OUT_OF_MEMORY. Thread safety: searches run alongside the training and
   assignment; the final re-layout is exclusive, like a write. */
MNEMO_API mnemo_status mnemo_store_build_index(mnemo_store* store, const mnemo_index_options* opts);

/* Removes the index (searches then always scan every memory); waits for a
   background rebuild first. Journaled in a durable store. No index: OK. */
MNEMO_API mnemo_status mnemo_store_drop_index(mnemo_store* store);

/* Waits until no background rebuild is under way. */
MNEMO_API mnemo_status mnemo_store_wait_index(mnemo_store* store);

/* The state of a store's index. The caller sets struct_size first. A
   sharded store reports the counts summed over its shards; nlist is the
   list count of the centroids its shards share. */
typedef struct mnemo_index_info {
  uint32_t struct_size;   /* sizeof(mnemo_index_info), set by the caller */
  uint32_t nlist;         /* lists; 0: no index */
  uint64_t indexed;       /* live memories in lists */
  uint64_t hot;           /* live memories in the hot tier */
  uint64_t largest_list;  /* slots of the largest list */
  uint64_t builds;        /* builds and rebuilds since the store was opened
                             (a layout loaded or replayed is not counted) */
  uint32_t rebuilding;    /* 1 while a background rebuild is under way */
  uint32_t reserved0;     /* zero */
  double last_build_seconds; /* wall time of the last build or rebuild */
} mnemo_index_info;

/* Errors: NULL_POINTER, INVALID_ARGUMENT (struct_size too small). A failed
   background rebuild leaves the previous index; its error is reported by
   the next mnemo_store_wait_index. */
MNEMO_API mnemo_status mnemo_store_index_info(const mnemo_store* store, mnemo_index_info* out);

/* ------------------------------------------------------------------------ */
/* Sharded stores and the top-k merge                                        */
/* ------------------------------------------------------------------------ */

/* A runtime created with cpu_shards > 1 (CPU backend) or with several CUDA
   devices (device_count > 1 or MNEMO_ALL_DEVICES) shards every store made on
   it: each shard holds part of the memories, on its own device (CUDA) or in
   host memory (CPU). The store behaves as one store in every call:
   - a new id goes to the shard holding the fewest memories at that moment,
     so shards stay balanced by count; an existing id (upsert, remove,
     set_bias, get) is routed to its shard; removes may empty a shard;
   - a search runs on all shards at once (on a GPU runtime each shard on its
     own device and stream, with no waiting between shards), then the
     per-shard results are merged by mnemo_topk_merge's rule. Results are
     identical, bit for bit and ties included, to an unsharded store of the
     same memories on one such device (AUTO decides CPU or GPU once, from the
     whole store's size);
   - slots (mnemo_store_slot_count, mnemo_store_slot_of, slot bitmaps) are
     the shards' slots end to end, shard 0 first;
   - a durable sharded store has one snapshot and one journal for the whole
     store, exactly as an unsharded one: the files do not record the shards
     and open on a runtime with any shard count;
   - mnemo_runtime_info reports the shards and devices, mnemo_store_stats
     the live vectors per shard;
   - mnemo_store_search_device takes buffers on the first device and merges
     there (see that call); results as mnemo_store_search's.
   Threading is that of any store. */

/* Merges n_lists result lists of one search into one: ids and scores are
   [n_lists x nq x k] (list l, query q, place j at (l * nq + q) * k + j), as
   mnemo_store_search writes them, from disjoint or overlapping parts (shards,
   hosts, replicas); out_ids, out_scores are [nq x k]. Row q of the output
   holds the k best entries of the rows q of all lists, in the search order:
   best first by `metric` (higher score for COSINE and DOT, lower for L2SQ),
   equal scores to the smaller id. Entries with id MNEMO_NO_ID or a NaN score
   are padding and skipped; an id present in several lists is kept once, at
   its best place; fewer than k entries leave id MNEMO_NO_ID, score NaN. The
   input lists need not be sorted. Scores are copied bit for bit.
   nq = 0 does nothing; n_lists = 0 writes padding only.
   Errors: NULL_POINTER, MISALIGNED, INVALID_ARGUMENT (metric, k = 0, an
   output overlapping an input or the other output), OVERFLOW. Nothing is
   written on error.
   Thread safety: a pure function; any thread, concurrently. */
MNEMO_API mnemo_status mnemo_topk_merge(int32_t metric, uint64_t n_lists, uint64_t nq, uint64_t k, const uint64_t* ids,
                                        const float* scores, uint64_t* out_ids, float* out_scores);

/* ------------------------------------------------------------------------ */
/* Pair scoring                                                              */
/* ------------------------------------------------------------------------ */

/* Device-pointer variants (the _device functions below). Every buffer
   argument is memory the runtime's GPU can use (cudaMalloc, managed, or
   pinned host memory; pageable host memory is INVALID_ARGUMENT), with the
   same shapes, alignment and rules as the host function. The work is queued
   on `stream` (a cudaStream_t; NULL is the default stream) and the function
   returns without waiting for it: the outputs are ready when the stream
   reaches that point. The content checks the host functions make (indices
   below n_items, valid lengths, sorted times; non-finite values unless the
   runtime was created with validate = 0) read the inputs on the device and
   wait for the stream before any output is written. A runtime without the
   CUDA backend returns BACKEND_UNAVAILABLE. */

/* scores[p] = metric(table[src[p]], table[tgt[p]]) for p < n_pairs, in input
   order. table: [n_items x dim] of table_dtype (F32, F16, BF16); src, tgt:
   [n_pairs] of index_dtype (U32 or U64); scores: f32 [n_pairs]. Repeated
   pairs and src = tgt are allowed. n_pairs = 0 does nothing.
   Errors: NULL_POINTER, MISALIGNED, INVALID_ARGUMENT (metric, dim = 0), DTYPE,
   OVERFLOW, OUT_OF_RANGE (an index >= n_items; the message names the pair
   position), NON_FINITE (table). Nothing is written on error. */
MNEMO_API mnemo_status mnemo_score_pairs(mnemo_runtime* rt, int32_t metric, const void* table, int32_t table_dtype,
                                         uint64_t n_items, uint64_t dim, const void* src, const void* tgt,
                                         int32_t index_dtype, uint64_t n_pairs, float* scores);

/* mnemo_score_pairs on device pointers, queued on `stream` (see above). */
MNEMO_API mnemo_status mnemo_score_pairs_device(mnemo_runtime* rt, int32_t metric, const void* table,
                                                int32_t table_dtype, uint64_t n_items, uint64_t dim, const void* src,
                                                const void* tgt, int32_t index_dtype, uint64_t n_pairs, float* scores,
                                                void* stream);

/* ------------------------------------------------------------------------ */
/* Trajectory resampling                                                     */
/* ------------------------------------------------------------------------ */

/* Optional per-row valid lengths. Initialise with
   mnemo_resample_options_default(). */
typedef struct mnemo_resample_options {
  uint32_t struct_size; /* sizeof(mnemo_resample_options) */
  uint32_t reserved0;   /* zero */
  /* NULL = every row has n_src samples. Else src_lengths[b] in [1, n_src]:
     only the first src_lengths[b] samples and times of row b are used. */
  const uint64_t* src_lengths;
  /* NULL = every row has n_tgt targets. Else tgt_lengths[b] in [0, n_tgt]:
     targets past it are not read and their output rows are set to zero. */
  const uint64_t* tgt_lengths;
} mnemo_resample_options;

MNEMO_API mnemo_resample_options mnemo_resample_options_default(void);

/* Linear interpolation of trajectories at new times.
   data: [batch x n_src x dim] of data_dtype (F32, F16, BF16);
   src_times: [batch x n_src], tgt_times: [batch x n_tgt], both of time_dtype
   (F32 or F64); out: [batch x n_tgt x dim] of data_dtype.
   Per row, with S valid source times t_0 <= t_1 <= ... <= t_{S-1} (checked)
   and a target time t (targets may come in any order):
     - S = 1, or t >= t_{S-1}: the output is the last sample (an exact copy);
     - t < t_0: the first sample (an exact copy);
     - else i = the largest index with t_i <= t (so t_i <= t < t_{i+1}:
       equal neighbouring times form an empty interval that no target falls
       in, and a target equal to a repeated time takes the last sample of
       that time, the left end of the interval that follows),
       w = (t - t_i) / (t_{i+1} - t_i) computed in time_dtype and clamped to
       [0, 1], and out = fma(w, b - a, a) in f32 with a = sample i and
       b = sample i+1 (w = 0 gives a and w = 1 gives b exactly), rounded to
       data_dtype.
   This is numpy.interp's rule, applied to every dimension.
   opts may be NULL.
   Errors: NULL_POINTER, MISALIGNED, INVALID_ARGUMENT (n_src = 0, dim = 0, a
   length out of range), DTYPE, OVERFLOW, NOT_SORTED (names row and index),
   NON_FINITE (data or times). `out` must not overlap the inputs
   (INVALID_ARGUMENT). */
MNEMO_API mnemo_status mnemo_resample(mnemo_runtime* rt, const void* data, int32_t data_dtype, uint64_t batch,
                                      uint64_t n_src, uint64_t dim, const void* src_times, const void* tgt_times,
                                      int32_t time_dtype, uint64_t n_tgt, const mnemo_resample_options* opts,
                                      void* out);

/* mnemo_resample on device pointers (opts->src_lengths and
   opts->tgt_lengths too), queued on `stream` (see mnemo_score_pairs_device). */
MNEMO_API mnemo_status mnemo_resample_device(mnemo_runtime* rt, const void* data, int32_t data_dtype, uint64_t batch,
                                             uint64_t n_src, uint64_t dim, const void* src_times, const void* tgt_times,
                                             int32_t time_dtype, uint64_t n_tgt, const mnemo_resample_options* opts,
                                             void* out, void* stream);

/* ------------------------------------------------------------------------ */
/* Row normalisation                                                         */
/* ------------------------------------------------------------------------ */

/* out[i] = in[i] / ||in[i]||_2 for each row of [rows x dim] in `dtype` (F32,
   F16, BF16); a zero row stays zero. in == out (in place) is allowed; any
   other overlap is INVALID_ARGUMENT.
   Errors: NULL_POINTER, MISALIGNED, INVALID_ARGUMENT, DTYPE, OVERFLOW,
   NON_FINITE. */
MNEMO_API mnemo_status mnemo_normalize_rows(mnemo_runtime* rt, const void* in, void* out, int32_t dtype, uint64_t rows,
                                            uint64_t dim);

/* mnemo_normalize_rows on device pointers, queued on `stream` (see
   mnemo_score_pairs_device). */
MNEMO_API mnemo_status mnemo_normalize_rows_device(mnemo_runtime* rt, const void* in, void* out, int32_t dtype,
                                                   uint64_t rows, uint64_t dim, void* stream);

/* LayerNorm over each row: out = (x - mean) / sqrt(var + eps) * gamma + beta,
   with the biased variance (divided by dim), statistics in f32 or wider.
   When var + eps is 0 (a constant row with eps = 0) the row becomes beta.
   gamma, beta: f32 [dim], each may be NULL (ones / zeros). eps must be finite
   and >= 0; In place (in == out) is
   allowed; other overlap is INVALID_ARGUMENT.
   Errors: NULL_POINTER, MISALIGNED, INVALID_ARGUMENT, DTYPE, OVERFLOW,
   NON_FINITE. */
MNEMO_API mnemo_status mnemo_layer_norm(mnemo_runtime* rt, const void* in, void* out, int32_t dtype, uint64_t rows,
                                        uint64_t dim, const float* gamma, const float* beta, float eps);

/* mnemo_layer_norm on device pointers (gamma and beta too), queued on
   `stream` (see mnemo_score_pairs_device). */
MNEMO_API mnemo_status mnemo_layer_norm_device(mnemo_runtime* rt, const void* in, void* out, int32_t dtype,
                                               uint64_t rows, uint64_t dim, const float* gamma, const float* beta,
                                               float eps, void* stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MNEMO_H */
