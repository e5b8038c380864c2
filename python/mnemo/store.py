"""Store: a memory store of vectors with caller-chosen uint64 ids."""

from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Optional, Tuple, Union

import numpy as np

from . import _cdefs
from ._lib import check, lib
from ._owned import OwnedHandle
from .arrays import (aligned_zeros, as_data, as_ids, as_input, check_array,
                     check_shape, check_u64, mnemo_dtype, output, ptr)
from .enums import DType, FilterKind, Metric, Status, parse_enum
from .errors import MnemoTypeError, MnemoValueError
from .tensors import DeviceArray, empty_like_framework, is_device_tensor, stream_of

if TYPE_CHECKING:
    from .runtime import Runtime

#: MNEMO_NO_ID: the id of result slots that have no candidate.
NO_ID = 2**64 - 1

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

_DATA_DTYPES = (np.float32, np.float16, np.uint16)


class StoreShape(NamedTuple):
    """mnemo_store_shape: dimension, storage dtype and metric."""

    dim: int
    dtype: Union[DType, int]
    metric: Union[Metric, int]


def _parse_dtype(dtype: Any) -> int:
    """A storage dtype given as DType, name ("f32", "f16", "bf16"), int, or
    numpy dtype (float32, float16, and uint16 meaning bf16 bits)."""
    if isinstance(dtype, (DType, str, int)) and not isinstance(dtype, bool):
        return parse_enum(dtype, DType, "dtype")
    try:
        return int(mnemo_dtype(np.empty(0, dtype=dtype)))
    except TypeError:
        raise MnemoTypeError(Status.E_DTYPE, f"unknown dtype {dtype!r}") from None


def bitmap_from_mask(mask: Any) -> np.ndarray:
    """Packs a bool mask over slots into the uint64 words of a slot bitmap:
    bit s of word s // 64 is set when slot s is allowed."""
    m = np.asarray(mask, dtype=bool).ravel()
    words = aligned_zeros((m.size + 63) // 64, np.uint64)
    for s in np.flatnonzero(m):
        words[s // 64] |= np.uint64(1) << np.uint64(s % 64)
    return words


class Store(OwnedHandle):
    """A mnemo store (mnemo_store_create / mnemo_store_destroy).

    Args:
        runtime: the Runtime the store lives on (kept alive by the store).
        dim: vector dimension, 1..65536.
        dtype: storage "f32", "f16" or "bf16" (or numpy float32 / float16 /
            uint16); f32 input is rounded to nearest even into f16/bf16.
        metric: "cosine", "dot" or "l2sq".

    Searches may run from many threads; add/remove/set_bias are serialised
    by the library. close() must not race other calls on the store.
    """

    def __init__(self, runtime: "Runtime", dim: int, dtype: Any = "f32",
                 metric: Union[Metric, str, int] = "cosine") -> None:
        self._handle: Optional[int] = None
        handle = ctypes.c_void_p()
        check(lib.mnemo_store_create(runtime.handle, check_u64(dim, "dim"),
                                     _parse_dtype(dtype),
                                     parse_enum(metric, Metric, "metric"),
                                     ctypes.byref(handle)))
        self._adopt(runtime, handle.value)

    def _adopt(self, runtime: "Runtime", handle: int) -> None:
        self._runtime = runtime
        self._handle = handle
        self._pid = os.getpid()
        runtime._stores.add(self)
        self._shape = self._read_shape()

    @classmethod
    def open(cls, runtime: "Runtime", path: PathLike) -> "Store":
        """Opens a store written by save() (mnemo_store_open). A damaged
        file raises MnemoError(MNEMO_E_CORRUPT), a missing one MNEMO_E_IO."""
        handle = ctypes.c_void_p()
        check(lib.mnemo_store_open(runtime.handle, os.fsencode(path), ctypes.byref(handle)))
        store = cls.__new__(cls)
        store._handle = None
        store._adopt(runtime, handle.value)
        return store

    @classmethod
    def open_durable(cls, runtime: "Runtime", path: PathLike, dim: Optional[int] = None,
                     dtype: Any = "f32", metric: Union[Metric, str, int] = "cosine", *,
                     sync: str = "each_write",
                     journal_path: Optional[PathLike] = None) -> "Store":
        """Opens, or with `dim` creates, a durable store: a snapshot at `path`
        plus a journal (default `path` + ".journal") to which every add,
        remove and set_bias is appended before it returns
        (mnemo_store_open_durable).

        sync: "each_write" (fdatasync per write: survives a machine crash) or
        "os" (survives a crash of the process). A damaged snapshot or journal
        raises MnemoError(MNEMO_E_CORRUPT); a journal locked by another
        process, or no store and no dim, MNEMO_E_IO."""
        opts = lib.mnemo_durable_options_default()
        policies = {"each_write": 0, "os": 1}
        if sync not in policies:
            raise ValueError(f"sync must be one of {sorted(policies)}, not {sync!r}")
        opts.sync = policies[sync]
        journal = None if journal_path is None else os.fsencode(journal_path)
        opts.journal_path = journal
        if dim is not None:
            opts.dim = check_u64(dim, "dim")
            opts.dtype = _parse_dtype(dtype)
            opts.metric = parse_enum(metric, Metric, "metric")
        handle = ctypes.c_void_p()
        check(lib.mnemo_store_open_durable(runtime.handle, os.fsencode(path),
                                           ctypes.byref(opts), ctypes.byref(handle)))
        store = cls.__new__(cls)
        store._handle = None
        store._adopt(runtime, handle.value)
        return store

    def checkpoint(self) -> None:
        """Durable store: writes a new snapshot and empties the journal
        (mnemo_store_checkpoint); MNEMO_E_UNSUPPORTED on a plain store."""
        check(lib.mnemo_store_checkpoint(self.handle))

    def stats(self) -> Dict[str, int]:
        """What the store holds (mnemo_store_stats): durable, vectors,
        tombstones, slots, host_bytes, device_bytes, journal_records,
        journal_bytes, sequence."""
        out = _cdefs.StoreStatistics()
        out.struct_size = ctypes.sizeof(out)
        check(lib.mnemo_store_stats(self.handle, ctypes.byref(out)))
        return {name: int(getattr(out, name)) for name, _ in out._fields_
                if name != "struct_size"}

    def save(self, path: PathLike) -> None:
        """Writes the store to `path` atomically (temporary file + rename)."""
        check(lib.mnemo_store_save(self.handle, os.fsencode(path)))

    @property
    def handle(self) -> int:
        """The mnemo_store* as an int; MnemoValueError if closed."""
        if self._handle is None:
            raise MnemoValueError(Status.E_NULL_POINTER, "the store is closed")
        return self._handle

    @property
    def runtime(self) -> "Runtime":
        return self._runtime

    @property
    def closed(self) -> bool:
        return self._handle is None

    def close(self) -> None:
        """Destroys the store; further calls raise MnemoValueError."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        lib.mnemo_store_destroy(handle)


    def __len__(self) -> int:
        return self.count()

    def __repr__(self) -> str:
        if self.closed:
            return "<mnemo.Store closed>"
        s = self._shape
        return (f"<mnemo.Store dim={s.dim} dtype={getattr(s.dtype, 'name', s.dtype)} "
                f"metric={getattr(s.metric, 'name', s.metric)}>")

    # Shape and bookkeeping.

    def _read_shape(self) -> StoreShape:
        dim, dtype, metric = ctypes.c_uint64(), ctypes.c_int32(), ctypes.c_int32()
        check(lib.mnemo_store_shape(self.handle, ctypes.byref(dim), ctypes.byref(dtype),
                                    ctypes.byref(metric)))
        try:
            dt: Union[DType, int] = DType(dtype.value)
        except ValueError:
            dt = dtype.value
        try:
            me: Union[Metric, int] = Metric(metric.value)
        except ValueError:
            me = metric.value
        return StoreShape(dim.value, dt, me)

    def shape(self) -> StoreShape:
        """(dim, dtype, metric) as reported by the library."""
        return self._read_shape()

    @property
    def dim(self) -> int:
        return self._shape.dim

    @property
    def dtype(self) -> Union[DType, int]:
        return self._shape.dtype

    @property
    def metric(self) -> Union[Metric, int]:
        return self._shape.metric

    def _u64_out(self, fn: Any, *args: Any) -> int:
        value = ctypes.c_uint64()
        check(fn(self.handle, *args, ctypes.byref(value)))
        return value.value

    def count(self) -> int:
        """Number of live vectors."""
        return self._u64_out(lib.mnemo_store_count)

    def slot_count(self) -> int:
        """Number of slots; slots index the bitmap filter of search()."""
        return self._u64_out(lib.mnemo_store_slot_count)

    def slot_of(self, id: int) -> int:
        """Slot of `id`; MnemoError(MNEMO_E_NOT_FOUND) if absent."""
        return self._u64_out(lib.mnemo_store_slot_of, check_u64(id, "id"))

    # Writes.

    def _ids(self, ids: Any, copy: bool = True) -> np.ndarray:
        return as_ids(ids, "ids", (np.uint64,), copy=copy)

    def add(self, ids: Any, vectors: Any, *, copy: bool = True) -> None:
        """Adds or replaces (upsert) vectors.

        Args:
            ids: [count] non-negative integers: uint64 passes as it is; other
                integer arrays, whole-number floats, lists or one int are
                converted (negative, non-integral or too large values raise
                ValueError).
            vectors: [count, dim] (or [dim] for one id) of float32 or of the
                store's own dtype (float16, or uint16 bf16 bits); other real
                arrays, lists, strided or misaligned data are converted to
                float32 with one copy.
            copy: False raises instead of making any conversion copy.
        """
        i = self._ids(ids, copy)
        v = as_data(vectors, "vectors", _DATA_DTYPES, (1, 2), copy)
        if v.ndim == 1:
            v = v.reshape(1, -1)
        check_shape(v, "vectors", (i.shape[0], self.dim))
        check(lib.mnemo_store_add(self.handle, ptr(i), ptr(v), mnemo_dtype(v), i.shape[0]))

    def remove(self, ids: Any) -> int:
        """Removes ids (absent ones are ignored); returns how many were present."""
        i = self._ids(ids)
        removed = ctypes.c_uint64()
        check(lib.mnemo_store_remove(self.handle, ptr(i), i.shape[0], ctypes.byref(removed)))
        return removed.value

    def set_bias(self, ids: Any, biases: Any) -> None:
        """Sets the additive bias of each id (float32 [count]; lists are
        converted). An absent id raises MnemoError(MNEMO_E_NOT_FOUND) and
        then no bias changes."""
        i = self._ids(ids)
        if isinstance(biases, (int, float)):
            biases = [biases]
        b = as_input(biases, "biases", [np.float32], ndim=1)
        check_shape(b, "biases", i.shape)
        check(lib.mnemo_store_set_bias(self.handle, ptr(i), ptr(b), i.shape[0]))

    # Reads.

    def get(self, id: int, *, out: Optional[np.ndarray] = None) -> np.ndarray:
        """The stored (rounded) vector of `id` as float32 [dim];
        MnemoError(MNEMO_E_NOT_FOUND) if absent."""
        res = output(out, "out", (self.dim,), np.float32)
        check(lib.mnemo_store_get(self.handle, check_u64(id, "id"), ptr(res)))
        return res

    def search(self, queries: Any, k: int, *,
               filter_ids: Any = None, filter_bitmap: Any = None,
               filter_count: Optional[int] = None, apply_bias: bool = False,
               out_ids: Optional[np.ndarray] = None,
               out_scores: Optional[np.ndarray] = None,
               copy: bool = True) -> Tuple[np.ndarray, np.ndarray]:
        """k best stored vectors per query (mnemo_store_search).

        Args:
            queries: float32 [nq, dim], or [dim] for one query; other real
                arrays and lists are converted with one copy (copy=False
                raises instead).
            k: results per query, >= 1; slots past the candidates get id
                NO_ID and score NaN.
            filter_ids: allow-list of ids (uint64; unknown ids are ignored).
            filter_bitmap: allowed slots, either a bool mask of length
                slot_count() or packed uint64 words (bit s of word s // 64).
            filter_count: number of slots a packed bitmap covers; defaults to
                slot_count() (the library requires that value).
            apply_bias: rank by score + bias (cosine, dot) or distance - bias
                (l2sq); returned scores include the bias.

        Returns:
            (ids uint64, scores float32), each [nq, k] (or [k] for a 1-D
            query), best first, ties broken by the smaller id. Queries that
            are a GPU tensor (torch, CuPy) are searched on the device on the
            producer's current stream (mnemo_store_search_device; the store
            must be held by that GPU) and the results are tensors of the same
            framework on the same device; filters stay host arrays.
        """
        device = is_device_tensor(queries)
        one = False
        if device:
            q: Any = DeviceArray(queries, "queries")
            one = len(q.shape) == 1
            nq, qdim = (1, q.shape[0]) if one else (q.shape + (0,))[:2]
            if len(q.shape) not in (1, 2) or q.dtype != DType.F32:
                raise MnemoTypeError(Status.E_DTYPE, "queries on the device must be a "
                                     "float32 [nq, dim] or [dim] tensor")
        else:
            q = as_data(queries, "queries", [np.float32], (1, 2), copy)
            one = q.ndim == 1
            q = q.reshape(1, -1) if one else q
            nq, qdim = q.shape
        if qdim != self.dim:
            raise MnemoValueError(Status.E_SHAPE,
                                  f"queries have dimension {qdim}; the store has {self.dim}")
        k = check_u64(k, "k")
        opts = lib.mnemo_search_options_default()
        opts.apply_bias = 1 if apply_bias else 0
        keep = None  # the filter array must stay alive through the call
        if filter_ids is not None and filter_bitmap is not None:
            raise ValueError("give filter_ids or filter_bitmap, not both")
        if filter_ids is not None:
            keep = as_ids(filter_ids, "filter_ids", (np.uint64,), copy=copy)
            opts.filter_kind = FilterKind.IDS
            opts.filter_ids = ptr(keep)
            opts.filter_count = keep.shape[0]
        elif filter_bitmap is not None:
            keep, count = self._bitmap(filter_bitmap, filter_count)
            opts.filter_kind = FilterKind.SLOT_BITMAP
            opts.filter_bitmap = ptr(keep)
            opts.filter_count = count
        shape = (k,) if one else (nq, k)
        if device:
            # Outputs of the producer's framework, on its device and stream.
            ids = empty_like_framework(q, shape, DType.U64)
            scores = empty_like_framework(q, shape, DType.F32)
            check(lib.mnemo_store_search_device(
                self.handle, q.ptr, nq, k, ctypes.byref(opts),
                DeviceArray(ids, "ids").ptr, DeviceArray(scores, "scores").ptr, stream_of(q)))
            return ids, scores
        ids = output(out_ids, "out_ids", shape, np.uint64)
        scores = output(out_scores, "out_scores", shape, np.float32)
        check(lib.mnemo_store_search(self.handle, ptr(q), nq, k, ctypes.byref(opts),
                                     ptr(ids), ptr(scores)))
        return ids, scores

    def _bitmap(self, bitmap: Any, count: Optional[int]) -> Tuple[np.ndarray, int]:
        arr = np.asarray(bitmap)
        if arr.dtype == bool:
            if count is not None and count != arr.size:
                raise MnemoValueError(Status.E_SHAPE,
                                      f"filter_count {count} differs from the mask length {arr.size}")
            return bitmap_from_mask(arr), arr.size
        words = check_array(bitmap, "filter_bitmap", [np.uint64], ndim=1)
        n = self.slot_count() if count is None else check_u64(count, "filter_count")
        # The library reads ceil(n / 64) words; fewer would be read past the end.
        check_shape(words, "filter_bitmap", ((n + 63) // 64,))
        return words, n
