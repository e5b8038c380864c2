"""Store: a memory store of vectors with caller-chosen uint64 ids.

This module does not import runtime.py (which imports it): a store takes
any runtime object with .handle, ._stores and .active_backend()."""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Tuple, Union

import numpy as np

from . import _cdefs
from ._lib import check, lib
from ._owned import OwnedHandle
from .arrays import (INDICES, aligned_zeros, check_shape, check_u64, host_input,
                     mnemo_dtype, output)
from .arrays import ptr as host_ptr
from .enums import DType, FilterKind, Metric, Status, parse_enum
from .errors import MnemoError, MnemoTypeError, MnemoValueError
from .tensors import Placement, ptr

Runtime = Any  # a mnemo.Runtime (not imported: runtime.py imports this module)

#: Sync policies of open_durable (enum mnemo_sync_policy).
SYNC_POLICIES = {"each_write": 0, "os": 1}

#: MNEMO_NO_ID: the id of result slots that have no candidate.
NO_ID = 2**64 - 1

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

_DATA_DTYPES = (np.float32, np.float16, np.uint16)


@dataclass(frozen=True)
class StoreStats:
    """What a store holds (struct mnemo_store_statistics)."""

    durable: bool
    vectors: int
    tombstones: int
    slots: int
    host_bytes: int
    device_bytes: int
    journal_records: int
    journal_bytes: int
    sequence: int


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


def _c_path(path: PathLike, name: str = "path") -> bytes:
    """A file path as the C string the library reads; a NUL byte would cut
    it short silently, so it is refused."""
    raw = os.fsencode(path)
    if b"\0" in raw:
        raise MnemoValueError(Status.E_INVALID_ARGUMENT, f"{name} {path!r} contains a NUL byte")
    return raw


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
        check(lib.mnemo_store_open(runtime.handle, _c_path(path), ctypes.byref(handle)))
        store = cls.__new__(cls)
        store._handle = None
        store._adopt(runtime, handle.value)
        return store

    @classmethod
    def open_durable(cls, runtime: "Runtime", path: PathLike, dim: int = 0,
                     dtype: Any = "f32", metric: Union[Metric, str, int] = "cosine", *,
                     sync: str = "each_write",
                     journal_path: Optional[PathLike] = None) -> "Store":
        """Opens, or with dim > 0 creates, the durable store whose snapshot is
        at `path` (mnemo_store_open_durable): every add, remove and set_bias
        is journaled before it returns, and replayed on the next open.

        Args:
            dim: 0 (default): the store must exist; else the shape of a new
                store, which an existing one must match (MNEMO_E_SHAPE).
            dtype, metric: the shape of a new store.
            sync: "each_write" (fdatasync before each write returns: survives
                a machine crash) or "os" (survives a process crash).
            journal_path: default `path` + ".journal".

        A damaged snapshot or journal raises MnemoError(MNEMO_E_CORRUPT); no
        store and dim = 0, or a journal locked by another process, MNEMO_E_IO.
        """
        if sync not in SYNC_POLICIES:
            raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                                  f"sync must be one of {', '.join(SYNC_POLICIES)}, not {sync!r}")
        opts = lib.mnemo_durable_options_default()
        opts.sync = SYNC_POLICIES[sync]
        journal = None if journal_path is None else _c_path(journal_path, "journal_path")
        opts.journal_path = journal
        opts.dim = check_u64(dim, "dim")
        opts.dtype = _parse_dtype(dtype)
        opts.metric = parse_enum(metric, Metric, "metric")
        handle = ctypes.c_void_p()
        check(lib.mnemo_store_open_durable(runtime.handle, _c_path(path), ctypes.byref(opts),
                                           ctypes.byref(handle)))
        store = cls.__new__(cls)
        store._handle = None
        store._adopt(runtime, handle.value)
        return store

    def checkpoint(self) -> None:
        """Durable store: writes a new snapshot and empties the journal
        (mnemo_store_checkpoint); MNEMO_E_UNSUPPORTED for another store."""
        check(lib.mnemo_store_checkpoint(self.handle))

    def stats(self) -> StoreStats:
        """Counts and sizes of the store (mnemo_store_stats)."""
        raw = _cdefs.StoreStatistics()
        raw.struct_size = ctypes.sizeof(raw)
        check(lib.mnemo_store_stats(self.handle, ctypes.byref(raw)))
        return StoreStats(bool(raw.durable), raw.vectors, raw.tombstones, raw.slots,
                          raw.host_bytes, raw.device_bytes, raw.journal_records,
                          raw.journal_bytes, raw.sequence)

    def save(self, path: PathLike) -> None:
        """Writes the store to `path` atomically (temporary file + rename)."""
        check(lib.mnemo_store_save(self.handle, _c_path(path)))

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

    def _ids(self, ids: Any, copy: Optional[bool] = None) -> np.ndarray:
        if isinstance(ids, (int, np.integer)) and not isinstance(ids, bool):
            # One id: there is no caller's buffer to keep, copy=False or not.
            return host_input([ids], "ids", [np.uint64], ndim=1, kind=INDICES)
        return Placement(self._runtime, ids, (), copy, host=True).input(
            ids, "ids", [np.uint64], ndim=1, kind=INDICES)

    def add(self, ids: Any, vectors: Any, *, copy: Optional[bool] = None) -> None:
        """Adds or replaces (upsert) vectors.

        Args:
            ids: [count] non-negative integers (uint64; lists, int64 and
                int32 arrays are checked and converted; one int for one id).
            vectors: [count, dim] (or [dim] for one id) of float32 or of the
                store's own dtype (float16, or uint16 bf16 bits), passed as
                they are; other real dtypes are converted to float32.
            copy: False refuses arguments that would need a conversion.

        Every check runs before the library is called: a refused argument
        writes nothing. CUDA tensors are copied to the host (the library
        takes host vectors for writes).
        """
        i = self._ids(ids, copy)
        # float32, or the store's own dtype (taken as is): anything else,
        # float16 into a bf16 store included, is converted to float32.
        own = {DType.F16: np.float16, DType.BF16: np.uint16}.get(self._shape.dtype)
        accepted = (np.float32,) if own is None else (np.float32, own)
        v = Placement(self._runtime, vectors, (), copy, host=True).input(
            vectors, "vectors", accepted, ndim=(1, 2))
        if v.ndim == 1:
            v = v.reshape(1, -1)
        check_shape(v, "vectors", (i.shape[0], self.dim))
        check(lib.mnemo_store_add(self.handle, host_ptr(i), host_ptr(v), mnemo_dtype(v),
                                  i.shape[0]))

    def remove(self, ids: Any) -> int:
        """Removes ids (absent ones are ignored); returns how many were present."""
        i = self._ids(ids)
        removed = ctypes.c_uint64()
        check(lib.mnemo_store_remove(self.handle, host_ptr(i), i.shape[0], ctypes.byref(removed)))
        return removed.value

    def set_bias(self, ids: Any, biases: Any) -> None:
        """Sets the additive bias of each id (float32 [count]; lists and
        other real dtypes are converted). An absent id raises
        MnemoError(MNEMO_E_NOT_FOUND) and then no bias changes."""
        i = self._ids(ids)
        if isinstance(biases, (int, float)):
            biases = [biases]
        b = Placement(self._runtime, biases, host=True).input(biases, "biases", [np.float32], ndim=1)
        check_shape(b, "biases", i.shape)
        check(lib.mnemo_store_set_bias(self.handle, host_ptr(i), host_ptr(b), i.shape[0]))

    # Reads.

    def get(self, id: int, *, out: Optional[np.ndarray] = None) -> np.ndarray:
        """The stored (rounded) vector of `id` as float32 [dim];
        MnemoError(MNEMO_E_NOT_FOUND) if absent."""
        res = output(out, "out", (self.dim,), np.float32)
        check(lib.mnemo_store_get(self.handle, check_u64(id, "id"), host_ptr(res)))
        return res

    def search(self, queries: Any, k: int, *,
               filter_ids: Any = None, filter_bitmap: Any = None,
               filter_count: Optional[int] = None, apply_bias: bool = False,
               out_ids: Any = None, out_scores: Any = None,
               copy: Optional[bool] = None) -> Tuple[Any, Any]:
        """k best stored vectors per query (mnemo_store_search; for CUDA
        tensors, mnemo_store_search_device on the producer's stream).

        Args:
            queries: float32 [nq, dim], or [dim] for one query (other real
                dtypes are converted; a torch / CuPy CUDA tensor is searched
                on the device when the store is held by that GPU).
            k: results per query, >= 1; slots past the candidates get id
                NO_ID and score NaN.
            filter_ids: allow-list of ids (non-negative integers; unknown ids
                are ignored). Filters stay in host memory.
            filter_bitmap: allowed slots, either a bool mask of length
                slot_count() or packed uint64 words (bit s of word s // 64).
            filter_count: number of slots a packed bitmap covers; defaults to
                slot_count() (the library requires that value).
            apply_bias: rank by score + bias (cosine, dot) or distance - bias
                (l2sq); returned scores include the bias.
            copy: False refuses queries that would need a conversion.

        Returns:
            (ids, scores float32), each [nq, k] (or [k] for a 1-D query),
            best first, ties broken by the smaller id. ids are uint64 numpy
            or CuPy arrays, int64 torch tensors (NO_ID reads as -1).
        """
        k = check_u64(k, "k")
        opts = lib.mnemo_search_options_default()
        opts.apply_bias = 1 if apply_bias else 0
        keep = None  # the filter array must stay alive through the call
        if filter_ids is not None and filter_bitmap is not None:
            raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                                  "give filter_ids or filter_bitmap, not both")
        if filter_ids is not None:
            keep = Placement(self._runtime, filter_ids, (), copy, host=True).input(
                filter_ids, "filter_ids", [np.uint64], ndim=1, kind=INDICES)
            opts.filter_kind = FilterKind.IDS
            opts.filter_ids = host_ptr(keep)
            opts.filter_count = keep.shape[0]
        elif filter_bitmap is not None:
            keep, count = self._bitmap(filter_bitmap, filter_count)
            opts.filter_kind = FilterKind.SLOT_BITMAP
            opts.filter_bitmap = host_ptr(keep)
            opts.filter_count = count
        where = Placement(self._runtime, queries, (), copy)
        for attempt in range(2):
            q = where.input(queries, "queries", [np.float32], ndim=(1, 2))
            one = len(q.shape) == 1
            nq, qdim = (1, q.shape[0]) if one else q.shape
            if qdim != self.dim:
                raise MnemoValueError(Status.E_SHAPE,
                                      f"queries have dimension {qdim}; the store has {self.dim}")
            shape = (k,) if one else (nq, k)
            ids = where.output(out_ids, "out_ids", shape, np.uint64)
            scores = where.output(out_scores, "out_scores", shape, np.float32)
            if not where.on_device:
                check(lib.mnemo_store_search(self.handle, ptr(q), nq, k, ctypes.byref(opts),
                                             ptr(ids), ptr(scores)))
                break
            if nq == 0:
                break
            try:
                check(lib.mnemo_store_search_device(self.handle, ptr(q), nq, k,
                                                    ctypes.byref(opts), ptr(ids), ptr(scores),
                                                    where.stream))
                break
            except MnemoError as exc:
                # An AUTO runtime may hold a small store in host memory.
                if exc.status != Status.E_BACKEND_UNAVAILABLE or attempt:
                    raise
                where.host_fallback()
        return where.result(ids), where.result(scores)

    def _bitmap(self, bitmap: Any, count: Optional[int]) -> Tuple[np.ndarray, int]:
        arr = np.asarray(bitmap)
        if arr.dtype == bool:
            if count is not None and count != arr.size:
                raise MnemoValueError(Status.E_SHAPE,
                                      f"filter_count {count} differs from the mask length {arr.size}")
            return bitmap_from_mask(arr), arr.size
        words = host_input(bitmap, "filter_bitmap", [np.uint64], ndim=1, kind=INDICES)
        n = self.slot_count() if count is None else check_u64(count, "filter_count")
        # The library reads ceil(n / 64) words; fewer would be read past the end.
        check_shape(words, "filter_bitmap", ((n + 63) // 64,))
        return words, n
