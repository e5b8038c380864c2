/* The binary layout of every public struct and the value of every public
 * constant, checked by a C99 compiler on x86-64 / LP64. A change here breaks
 * callers built against an older header, so it must come with a new
 * MNEMO_ABI_VERSION. The numbers were worked out by hand from the field list
 * (natural alignment, 8-byte pointers and uint64_t). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mnemo.h"

/* C99 has no _Static_assert: a negative array size fails to compile. */
#define ABI_CAT2(a, b) a##b
#define ABI_CAT(a, b) ABI_CAT2(a, b)
#define ABI_CHECK(cond) typedef char ABI_CAT(abi_check_line_, __LINE__)[(cond) ? 1 : -1]

#if defined(__x86_64__) && defined(__LP64__)

ABI_CHECK(sizeof(mnemo_runtime_options) == 48);
ABI_CHECK(offsetof(mnemo_runtime_options, struct_size) == 0);
ABI_CHECK(offsetof(mnemo_runtime_options, backend) == 4);
ABI_CHECK(offsetof(mnemo_runtime_options, precision) == 8);
ABI_CHECK(offsetof(mnemo_runtime_options, device_id) == 12);
ABI_CHECK(offsetof(mnemo_runtime_options, num_threads) == 16);
ABI_CHECK(offsetof(mnemo_runtime_options, validate) == 20);
ABI_CHECK(offsetof(mnemo_runtime_options, workspace_bytes) == 24);
ABI_CHECK(offsetof(mnemo_runtime_options, cpu_shards) == 32);
ABI_CHECK(offsetof(mnemo_runtime_options, device_count) == 36);
ABI_CHECK(offsetof(mnemo_runtime_options, device_ids) == 40);

ABI_CHECK(sizeof(mnemo_runtime_report) == 688);
ABI_CHECK(offsetof(mnemo_runtime_report, struct_size) == 0);
ABI_CHECK(offsetof(mnemo_runtime_report, backend_requested) == 4);
ABI_CHECK(offsetof(mnemo_runtime_report, backend_active) == 8);
ABI_CHECK(offsetof(mnemo_runtime_report, precision) == 12);
ABI_CHECK(offsetof(mnemo_runtime_report, device_id) == 16);
ABI_CHECK(offsetof(mnemo_runtime_report, num_threads) == 20);
ABI_CHECK(offsetof(mnemo_runtime_report, cuda_available) == 24);
ABI_CHECK(offsetof(mnemo_runtime_report, reserved0) == 28);
ABI_CHECK(offsetof(mnemo_runtime_report, auto_gpu_min_bytes) == 32);
ABI_CHECK(offsetof(mnemo_runtime_report, device_name) == 40);
ABI_CHECK(offsetof(mnemo_runtime_report, reason) == 168);
ABI_CHECK(offsetof(mnemo_runtime_report, shards) == 424);
ABI_CHECK(offsetof(mnemo_runtime_report, device_count) == 428);
ABI_CHECK(offsetof(mnemo_runtime_report, devices) == 432);

ABI_CHECK(sizeof(mnemo_search_options) == 120);
ABI_CHECK(offsetof(mnemo_search_options, struct_size) == 0);
ABI_CHECK(offsetof(mnemo_search_options, filter_kind) == 4);
ABI_CHECK(offsetof(mnemo_search_options, filter_ids) == 8);
ABI_CHECK(offsetof(mnemo_search_options, filter_bitmap) == 16);
ABI_CHECK(offsetof(mnemo_search_options, filter_count) == 24);
ABI_CHECK(offsetof(mnemo_search_options, apply_bias) == 32);
ABI_CHECK(offsetof(mnemo_search_options, reserved0) == 36);
/* Activation fields, appended after the first ABI's 40 bytes. */
ABI_CHECK(offsetof(mnemo_search_options, activation) == 40);
ABI_CHECK(offsetof(mnemo_search_options, normalize) == 44);
ABI_CHECK(offsetof(mnemo_search_options, w_relevance) == 48);
ABI_CHECK(offsetof(mnemo_search_options, w_recency) == 52);
ABI_CHECK(offsetof(mnemo_search_options, w_importance) == 56);
ABI_CHECK(offsetof(mnemo_search_options, touch) == 60);
ABI_CHECK(offsetof(mnemo_search_options, half_life) == 64);
ABI_CHECK(offsetof(mnemo_search_options, now) == 72);
/* The device check fields, appended after the 80 bytes of the activation ABI. */
ABI_CHECK(offsetof(mnemo_search_options, check_on_device) == 80);
ABI_CHECK(offsetof(mnemo_search_options, reserved1) == 84);
ABI_CHECK(offsetof(mnemo_search_options, device_status) == 88);
/* Sublinear recall, appended after the 96 bytes of the device check. */
ABI_CHECK(offsetof(mnemo_search_options, nprobe) == 96);
ABI_CHECK(offsetof(mnemo_search_options, reserved2) == 100);
/* Filters over memories' fields, appended after 104 bytes. */
ABI_CHECK(offsetof(mnemo_search_options, where) == 104);
ABI_CHECK(offsetof(mnemo_search_options, where_each) == 112);

/* Memories' fields. */
ABI_CHECK(sizeof(mnemo_value) == 32);
ABI_CHECK(offsetof(mnemo_value, type) == 0);
ABI_CHECK(offsetof(mnemo_value, i) == 8);
ABI_CHECK(offsetof(mnemo_value, d) == 16);
ABI_CHECK(offsetof(mnemo_value, s) == 24);
ABI_CHECK(sizeof(mnemo_attribute) == 40);
ABI_CHECK(offsetof(mnemo_attribute, value) == 8);
ABI_CHECK(sizeof(mnemo_memory_fields) == 72);
ABI_CHECK(offsetof(mnemo_memory_fields, set) == 4);
ABI_CHECK(offsetof(mnemo_memory_fields, key) == 8);
ABI_CHECK(offsetof(mnemo_memory_fields, namespace_parts) == 16);
ABI_CHECK(offsetof(mnemo_memory_fields, namespace_depth) == 24);
ABI_CHECK(offsetof(mnemo_memory_fields, tag_count) == 28);
ABI_CHECK(offsetof(mnemo_memory_fields, tags) == 32);
ABI_CHECK(offsetof(mnemo_memory_fields, attributes) == 40);
ABI_CHECK(offsetof(mnemo_memory_fields, attribute_count) == 48);
ABI_CHECK(offsetof(mnemo_memory_fields, payload) == 56);
ABI_CHECK(offsetof(mnemo_memory_fields, payload_bytes) == 64);
ABI_CHECK(MNEMO_OP_NAMESPACE_UNDER == 14);
ABI_CHECK(MNEMO_FIELD_ALL == 31);
ABI_CHECK(MNEMO_READ_META == 256);

ABI_CHECK(sizeof(mnemo_index_options) == 56);
ABI_CHECK(offsetof(mnemo_index_options, nlist) == 4);
ABI_CHECK(offsetof(mnemo_index_options, train_iters) == 8);
ABI_CHECK(offsetof(mnemo_index_options, train_per_list) == 12);
ABI_CHECK(offsetof(mnemo_index_options, seed) == 16);
ABI_CHECK(offsetof(mnemo_index_options, rebuild_hot_fraction) == 24);
ABI_CHECK(offsetof(mnemo_index_options, rebuild_hot_min) == 32);
ABI_CHECK(offsetof(mnemo_index_options, rebuild_skew) == 40);
ABI_CHECK(offsetof(mnemo_index_options, background) == 48);
ABI_CHECK(offsetof(mnemo_index_options, reserved0) == 52);
ABI_CHECK(sizeof(mnemo_index_info) == 56);
ABI_CHECK(offsetof(mnemo_index_info, nlist) == 4);
ABI_CHECK(offsetof(mnemo_index_info, indexed) == 8);
ABI_CHECK(offsetof(mnemo_index_info, hot) == 16);
ABI_CHECK(offsetof(mnemo_index_info, largest_list) == 24);
ABI_CHECK(offsetof(mnemo_index_info, builds) == 32);
ABI_CHECK(offsetof(mnemo_index_info, rebuilding) == 40);
ABI_CHECK(offsetof(mnemo_index_info, reserved0) == 44);
ABI_CHECK(offsetof(mnemo_index_info, last_build_seconds) == 48);

ABI_CHECK(sizeof(mnemo_durable_options) == 32);
ABI_CHECK(offsetof(mnemo_durable_options, struct_size) == 0);
ABI_CHECK(offsetof(mnemo_durable_options, sync) == 4);
ABI_CHECK(offsetof(mnemo_durable_options, journal_path) == 8);
ABI_CHECK(offsetof(mnemo_durable_options, dim) == 16);
ABI_CHECK(offsetof(mnemo_durable_options, dtype) == 24);
ABI_CHECK(offsetof(mnemo_durable_options, metric) == 28);

ABI_CHECK(sizeof(mnemo_store_statistics) == 616);
ABI_CHECK(offsetof(mnemo_store_statistics, struct_size) == 0);
ABI_CHECK(offsetof(mnemo_store_statistics, durable) == 4);
ABI_CHECK(offsetof(mnemo_store_statistics, vectors) == 8);
ABI_CHECK(offsetof(mnemo_store_statistics, tombstones) == 16);
ABI_CHECK(offsetof(mnemo_store_statistics, slots) == 24);
ABI_CHECK(offsetof(mnemo_store_statistics, host_bytes) == 32);
ABI_CHECK(offsetof(mnemo_store_statistics, device_bytes) == 40);
ABI_CHECK(offsetof(mnemo_store_statistics, journal_records) == 48);
ABI_CHECK(offsetof(mnemo_store_statistics, journal_bytes) == 56);
ABI_CHECK(offsetof(mnemo_store_statistics, sequence) == 64);
ABI_CHECK(offsetof(mnemo_store_statistics, shards) == 72);
ABI_CHECK(offsetof(mnemo_store_statistics, reserved1) == 76);
ABI_CHECK(offsetof(mnemo_store_statistics, shard_vectors) == 80);
ABI_CHECK(offsetof(mnemo_store_statistics, filtered_on_device) == 592);
ABI_CHECK(offsetof(mnemo_store_statistics, filtered_on_host) == 600);
ABI_CHECK(offsetof(mnemo_store_statistics, filtered_ranged) == 608);

ABI_CHECK(sizeof(mnemo_resample_options) == 24);
ABI_CHECK(offsetof(mnemo_resample_options, struct_size) == 0);
ABI_CHECK(offsetof(mnemo_resample_options, reserved0) == 4);
ABI_CHECK(offsetof(mnemo_resample_options, src_lengths) == 8);
ABI_CHECK(offsetof(mnemo_resample_options, tgt_lengths) == 16);

#endif

/* Field widths are part of the contract on every platform. */
ABI_CHECK(sizeof(mnemo_status) == 4);
ABI_CHECK(sizeof(((mnemo_runtime_options*)0)->workspace_bytes) == 8);
ABI_CHECK(sizeof(((mnemo_runtime_report*)0)->device_name) == 128);
ABI_CHECK(sizeof(((mnemo_runtime_report*)0)->reason) == 256);
ABI_CHECK(sizeof(((mnemo_search_options*)0)->filter_count) == 8);

/* Pinned values. */
ABI_CHECK(MNEMO_ALIGNMENT == 16);
ABI_CHECK(MNEMO_NO_ID == UINT64_MAX);
ABI_CHECK(MNEMO_OK == 0);
ABI_CHECK(MNEMO_E_INVALID_ARGUMENT == 1);
ABI_CHECK(MNEMO_E_NULL_POINTER == 2);
ABI_CHECK(MNEMO_E_MISALIGNED == 3);
ABI_CHECK(MNEMO_E_OVERFLOW == 4);
ABI_CHECK(MNEMO_E_OUT_OF_RANGE == 5);
ABI_CHECK(MNEMO_E_NON_FINITE == 6);
ABI_CHECK(MNEMO_E_NOT_SORTED == 7);
ABI_CHECK(MNEMO_E_DTYPE == 8);
ABI_CHECK(MNEMO_E_SHAPE == 9);
ABI_CHECK(MNEMO_E_OUT_OF_MEMORY == 10);
ABI_CHECK(MNEMO_E_BACKEND_UNAVAILABLE == 11);
ABI_CHECK(MNEMO_E_BACKEND == 12);
ABI_CHECK(MNEMO_E_NOT_FOUND == 13);
ABI_CHECK(MNEMO_E_IO == 14);
ABI_CHECK(MNEMO_E_CORRUPT == 15);
ABI_CHECK(MNEMO_E_UNSUPPORTED == 16);
ABI_CHECK(MNEMO_E_INTERNAL == 17);
ABI_CHECK(MNEMO_DTYPE_F32 == 1);
ABI_CHECK(MNEMO_DTYPE_F16 == 2);
ABI_CHECK(MNEMO_DTYPE_BF16 == 3);
ABI_CHECK(MNEMO_DTYPE_F64 == 4);
ABI_CHECK(MNEMO_DTYPE_U32 == 5);
ABI_CHECK(MNEMO_DTYPE_U64 == 6);
ABI_CHECK(MNEMO_METRIC_COSINE == 1);
ABI_CHECK(MNEMO_METRIC_DOT == 2);
ABI_CHECK(MNEMO_METRIC_L2SQ == 3);
ABI_CHECK(MNEMO_BACKEND_AUTO == 0);
ABI_CHECK(MNEMO_BACKEND_CPU == 1);
ABI_CHECK(MNEMO_BACKEND_CUDA == 2);
ABI_CHECK(MNEMO_PRECISION_EXACT == 0);
ABI_CHECK(MNEMO_PRECISION_FAST == 1);
ABI_CHECK(MNEMO_FILTER_NONE == 0);
ABI_CHECK(MNEMO_FILTER_IDS == 1);
ABI_CHECK(MNEMO_FILTER_SLOT_BITMAP == 2);
ABI_CHECK(MNEMO_SYNC_EACH_WRITE == 0);
ABI_CHECK(MNEMO_SYNC_OS == 1);

/* A C caller links and runs: the initialisers fill struct_size, the library
   is the one this header describes, and a runtime round trip works. */
int main(void) {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  mnemo_search_options so = mnemo_search_options_default();
  mnemo_resample_options ro = mnemo_resample_options_default();
  mnemo_durable_options dop = mnemo_durable_options_default();
  mnemo_runtime* rt = NULL;
  mnemo_runtime_report info;

  if (o.struct_size != sizeof o) return 1;
  if (so.struct_size != sizeof so) return 2;
  if (ro.struct_size != sizeof ro) return 3;
  if (dop.struct_size != sizeof dop || dop.journal_path != NULL) return 9;
  if (mnemo_abi_version() != MNEMO_ABI_VERSION) return 4;
  if (strcmp(mnemo_status_name(MNEMO_E_CORRUPT), "MNEMO_E_CORRUPT") != 0) return 5;

  o.backend = MNEMO_BACKEND_CPU;
  if (mnemo_runtime_create(&o, &rt) != MNEMO_OK) return 6;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (mnemo_runtime_info(rt, &info) != MNEMO_OK) return 7;
  mnemo_runtime_destroy(rt);
  if (info.backend_active != MNEMO_BACKEND_CPU) return 8;
  return 0;
}
