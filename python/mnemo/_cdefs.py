"""ctypes mirrors of the structs and function prototypes of mnemo.h."""

from __future__ import annotations

import ctypes
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_float,
                    c_int32, c_int64, c_uint32, c_uint64, c_void_p)

c_status = c_int32

# MNEMO_MAX_SHARDS and MNEMO_ALL_DEVICES.
MAX_SHARDS = 64
ALL_DEVICES = 0xFFFFFFFF


class RuntimeOptions(Structure):
    """struct mnemo_runtime_options."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("backend", c_int32),
        ("precision", c_int32),
        ("device_id", c_int32),
        ("num_threads", c_uint32),
        ("validate", c_uint32),
        ("workspace_bytes", c_uint64),
        ("cpu_shards", c_uint32),
        ("device_count", c_uint32),
        ("device_ids", c_void_p),
    ]


class RuntimeReport(Structure):
    """struct mnemo_runtime_report."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("backend_requested", c_int32),
        ("backend_active", c_int32),
        ("precision", c_int32),
        ("device_id", c_int32),
        ("num_threads", c_uint32),
        ("cuda_available", c_uint32),
        ("reserved0", c_uint32),
        ("auto_gpu_min_bytes", c_uint64),
        ("device_name", c_char * 128),
        ("reason", c_char * 256),
        ("shards", c_uint32),
        ("device_count", c_uint32),
        ("devices", c_int32 * MAX_SHARDS),
    ]


class SearchOptions(Structure):
    """struct mnemo_search_options."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("filter_kind", c_int32),
        ("filter_ids", c_void_p),
        ("filter_bitmap", c_void_p),
        ("filter_count", c_uint64),
        ("apply_bias", c_uint32),
        ("reserved0", c_uint32),
        # Activation ranking (ABI 1 grew the struct from 40 to 80 bytes).
        ("activation", c_uint32),
        ("normalize", c_uint32),
        ("w_relevance", c_float),
        ("w_recency", c_float),
        ("w_importance", c_float),
        ("touch", c_uint32),
        ("half_life", c_double),
        ("now", c_double),
        # The device search's in-search query check (80 to 96 bytes).
        ("check_on_device", c_uint32),
        ("reserved1", c_uint32),
        ("device_status", c_void_p),
        # Sublinear recall (96 to 104 bytes).
        ("nprobe", c_uint32),
        ("reserved2", c_uint32),
        # Filters over memories' fields (104 to 120 bytes): mnemo_filter*
        # and an array of nq of them.
        ("where", c_void_p),
        ("where_each", c_void_p),
    ]


# What a memory holds besides its vector (MNEMO_MAX_* and mnemo_field_bits).
MAX_KEY_BYTES = 1024
MAX_NAME_BYTES = 1024
MAX_NAMESPACE_DEPTH = 32
MAX_TAGS = 1024
MAX_ATTRIBUTES = 256
MAX_PAYLOAD_BYTES = 16777216
MAX_FILTER_NODES = 65536

FIELD_KEY = 1
FIELD_NAMESPACE = 2
FIELD_TAGS = 4
FIELD_ATTRIBUTES = 8
FIELD_PAYLOAD = 16
FIELD_ALL = 31
# mnemo_store_read_fields: time and importance too.
READ_META = 256

# enum mnemo_value_type.
VALUE_INT = 1
VALUE_DOUBLE = 2
VALUE_BOOL = 3
VALUE_STRING = 4


class Value(Structure):
    """struct mnemo_value."""

    _fields_ = [
        ("type", c_int32),
        ("reserved", c_uint32),
        ("i", c_int64),
        ("d", c_double),
        ("s", c_char_p),
    ]


class Attribute(Structure):
    """struct mnemo_attribute."""

    _fields_ = [
        ("name", c_char_p),
        ("value", Value),
    ]


class MemoryFields(Structure):
    """struct mnemo_memory_fields."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("set", c_uint32),
        ("key", c_char_p),
        ("namespace_parts", POINTER(c_char_p)),
        ("namespace_depth", c_uint32),
        ("tag_count", c_uint32),
        ("tags", POINTER(c_char_p)),
        ("attributes", POINTER(Attribute)),
        ("attribute_count", c_uint32),
        ("reserved0", c_uint32),
        ("payload", c_void_p),
        ("payload_bytes", c_uint64),
    ]


class DurableOptions(Structure):
    """struct mnemo_durable_options."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("sync", c_int32),
        ("journal_path", c_char_p),
        ("dim", c_uint64),
        ("dtype", c_int32),
        ("metric", c_int32),
    ]


class StoreStatistics(Structure):
    """struct mnemo_store_statistics."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("durable", c_uint32),
        ("vectors", c_uint64),
        ("tombstones", c_uint64),
        ("slots", c_uint64),
        ("host_bytes", c_uint64),
        ("device_bytes", c_uint64),
        ("journal_records", c_uint64),
        ("journal_bytes", c_uint64),
        ("sequence", c_uint64),
        ("shards", c_uint32),
        ("reserved1", c_uint32),
        ("shard_vectors", c_uint64 * MAX_SHARDS),
        ("filtered_on_device", c_uint64),
        ("filtered_on_host", c_uint64),
        ("filtered_ranged", c_uint64),
    ]


class IndexOptions(Structure):
    """struct mnemo_index_options."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("nlist", c_uint32),
        ("train_iters", c_uint32),
        ("train_per_list", c_uint32),
        ("seed", c_uint64),
        ("rebuild_hot_fraction", c_double),
        ("rebuild_hot_min", c_uint64),
        ("rebuild_skew", c_double),
        ("background", c_uint32),
        ("reserved0", c_uint32),
    ]


class IndexInfo(Structure):
    """struct mnemo_index_info."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("nlist", c_uint32),
        ("indexed", c_uint64),
        ("hot", c_uint64),
        ("largest_list", c_uint64),
        ("builds", c_uint64),
        ("rebuilding", c_uint32),
        ("reserved0", c_uint32),
        ("last_build_seconds", c_double),
    ]


class ResampleOptions(Structure):
    """struct mnemo_resample_options."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved0", c_uint32),
        ("src_lengths", c_void_p),
        ("tgt_lengths", c_void_p),
    ]


# Handles are opaque; c_void_p keeps them as plain ints on the Python side.
_H = c_void_p
_P = c_void_p  # any data pointer
_U64 = c_uint64
_I32 = c_int32

# name: (restype, argtypes)
PROTOTYPES = {
    "mnemo_status_name": (c_char_p, [c_status]),
    "mnemo_last_error": (c_char_p, []),
    "mnemo_version": (c_char_p, []),
    "mnemo_abi_version": (c_uint32, []),
    "mnemo_build_info": (c_char_p, []),
    "mnemo_alloc": (c_status, [_U64, POINTER(c_void_p)]),
    "mnemo_free": (None, [_P]),
    "mnemo_runtime_options_default": (RuntimeOptions, []),
    "mnemo_runtime_create": (c_status, [POINTER(RuntimeOptions), POINTER(_H)]),
    "mnemo_runtime_destroy": (None, [_H]),
    "mnemo_runtime_info": (c_status, [_H, POINTER(RuntimeReport)]),
    "mnemo_similarity": (c_status, [_H, _I32, _P, _U64, _P, _I32, _U64, _U64, _P]),
    "mnemo_similarity_device": (c_status, [_H, _I32, _P, _U64, _P, _I32, _U64, _U64, _P,
                                           _P]),
    "mnemo_store_create": (c_status, [_H, _U64, _I32, _I32, POINTER(_H)]),
    "mnemo_store_destroy": (None, [_H]),
    "mnemo_store_add": (c_status, [_H, _P, _P, _I32, _U64]),
    "mnemo_store_remove": (c_status, [_H, _P, _U64, POINTER(c_uint64)]),
    "mnemo_store_count": (c_status, [_H, POINTER(c_uint64)]),
    "mnemo_store_shape": (c_status, [_H, POINTER(c_uint64), POINTER(c_int32),
                                     POINTER(c_int32)]),
    "mnemo_store_get": (c_status, [_H, _U64, _P]),
    "mnemo_store_slot_count": (c_status, [_H, POINTER(c_uint64)]),
    "mnemo_store_slot_of": (c_status, [_H, _U64, POINTER(c_uint64)]),
    "mnemo_store_set_bias": (c_status, [_H, _P, _P, _U64]),
    "mnemo_store_add_memories": (c_status, [_H, _P, _P, _I32, _U64, _P, _P]),
    "mnemo_store_set_times": (c_status, [_H, _P, _P, _U64]),
    "mnemo_store_set_importance": (c_status, [_H, _P, _P, _U64]),
    "mnemo_store_get_meta": (c_status, [_H, _P, _U64, _P, _P, _P]),
    "mnemo_memory_fields_default": (MemoryFields, []),
    "mnemo_store_add_with_fields": (c_status, [_H, _P, _P, _I32, _U64, _P, _P, _P]),
    "mnemo_store_update_fields": (c_status, [_H, _P, _P, _U64]),
    "mnemo_store_ids_of_keys": (c_status, [_H, _P, _U64, _P]),
    "mnemo_store_read": (c_status, [_H, _P, _U64, POINTER(_H)]),
    "mnemo_store_read_fields": (c_status, [_H, _P, _U64, c_uint32, POINTER(_H)]),
    "mnemo_records_destroy": (None, [_H]),
    "mnemo_records_count": (c_uint64, [_H]),
    "mnemo_records_get": (c_status, [_H, _U64, POINTER(c_uint32), POINTER(c_uint64),
                                     POINTER(MemoryFields), POINTER(c_double),
                                     POINTER(c_float)]),
    "mnemo_filter_create": (c_status, [POINTER(_H)]),
    "mnemo_filter_destroy": (None, [_H]),
    "mnemo_filter_namespace": (c_status, [_H, _I32, _P, c_uint32, POINTER(c_uint32)]),
    "mnemo_filter_tags": (c_status, [_H, _I32, _P, c_uint32, POINTER(c_uint32)]),
    "mnemo_filter_attribute": (c_status, [_H, c_char_p, _I32, _P, c_uint32,
                                          POINTER(c_uint32)]),
    "mnemo_filter_keys": (c_status, [_H, _P, _U64, POINTER(c_uint32)]),
    "mnemo_filter_ids": (c_status, [_H, _P, _U64, POINTER(c_uint32)]),
    "mnemo_filter_time": (c_status, [_H, c_double, c_double, POINTER(c_uint32)]),
    "mnemo_filter_importance": (c_status, [_H, c_double, c_double, POINTER(c_uint32)]),
    "mnemo_filter_and": (c_status, [_H, _P, c_uint32, POINTER(c_uint32)]),
    "mnemo_filter_or": (c_status, [_H, _P, c_uint32, POINTER(c_uint32)]),
    "mnemo_filter_not": (c_status, [_H, c_uint32, POINTER(c_uint32)]),
    "mnemo_filter_set_root": (c_status, [_H, c_uint32]),
    "mnemo_store_select": (c_status, [_H, _H, _U64, _U64, _P, POINTER(c_uint64),
                                      POINTER(c_uint64)]),
    "mnemo_store_namespaces": (c_status, [_H, POINTER(_H)]),
    "mnemo_store_cluster": (c_status, [_H]),
    "mnemo_namespaces_destroy": (None, [_H]),
    "mnemo_namespaces_count": (c_uint64, [_H]),
    "mnemo_namespaces_get": (c_status, [_H, _U64, POINTER(POINTER(c_char_p)),
                                        POINTER(c_uint32), POINTER(c_uint64)]),
    "mnemo_search_options_default": (SearchOptions, []),
    "mnemo_store_search": (c_status, [_H, _P, _U64, _U64, POINTER(SearchOptions),
                                      _P, _P]),
    "mnemo_store_search_device": (c_status, [_H, _P, _U64, _U64, POINTER(SearchOptions),
                                             _P, _P, _P]),
    "mnemo_store_save": (c_status, [_H, c_char_p]),
    "mnemo_store_open": (c_status, [_H, c_char_p, POINTER(_H)]),
    "mnemo_durable_options_default": (DurableOptions, []),
    "mnemo_store_open_durable": (c_status, [_H, c_char_p, POINTER(DurableOptions),
                                            POINTER(_H)]),
    "mnemo_store_checkpoint": (c_status, [_H]),
    "mnemo_store_stats": (c_status, [_H, POINTER(StoreStatistics)]),
    "mnemo_index_options_default": (IndexOptions, []),
    "mnemo_store_build_index": (c_status, [_H, POINTER(IndexOptions)]),
    "mnemo_store_drop_index": (c_status, [_H]),
    "mnemo_store_wait_index": (c_status, [_H]),
    "mnemo_store_index_info": (c_status, [_H, POINTER(IndexInfo)]),
    "mnemo_topk_merge": (c_status, [_I32, _U64, _U64, _U64, _P, _P, _P, _P]),
    "mnemo_score_pairs": (c_status, [_H, _I32, _P, _I32, _U64, _U64, _P, _P,
                                     _I32, _U64, _P]),
    "mnemo_score_pairs_device": (c_status, [_H, _I32, _P, _I32, _U64, _U64, _P, _P,
                                            _I32, _U64, _P, _P]),
    "mnemo_resample_options_default": (ResampleOptions, []),
    "mnemo_resample": (c_status, [_H, _P, _I32, _U64, _U64, _U64, _P, _P, _I32,
                                  _U64, POINTER(ResampleOptions), _P]),
    "mnemo_resample_device": (c_status, [_H, _P, _I32, _U64, _U64, _U64, _P, _P, _I32,
                                         _U64, POINTER(ResampleOptions), _P, _P]),
    "mnemo_normalize_rows": (c_status, [_H, _P, _P, _I32, _U64, _U64]),
    "mnemo_normalize_rows_device": (c_status, [_H, _P, _P, _I32, _U64, _U64, _P]),
    "mnemo_layer_norm": (c_status, [_H, _P, _P, _I32, _U64, _U64, _P, _P,
                                    c_float]),
    "mnemo_layer_norm_device": (c_status, [_H, _P, _P, _I32, _U64, _U64, _P, _P,
                                           c_float, _P]),
}


def declare(lib: ctypes.CDLL) -> None:
    """Sets restype/argtypes of every function; raises AttributeError naming
    the missing ones."""
    missing = [name for name in PROTOTYPES if not hasattr(lib, name)]
    if missing:
        raise AttributeError("missing symbols: " + ", ".join(missing))
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
