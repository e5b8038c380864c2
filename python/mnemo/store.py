"""Store: a memory store of vectors with caller-chosen uint64 ids.

This module does not import runtime.py (which imports it): a store takes
any runtime object with .handle, ._stores and .active_backend()."""

from __future__ import annotations

import ctypes
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Tuple, Union

import numpy as np

from . import _cdefs, _native
from . import fields as _fields
from ._lib import check, lib
from ._owned import OwnedHandle
from .arrays import (ALIGNMENT, INDICES, aligned_empty, aligned_zeros, check_shape, check_u64,
                     host_input, mnemo_dtype, output)
from .arrays import ptr as host_ptr
from .enums import Backend, DType, FilterKind, Metric, Status, parse_enum
from .errors import MnemoError, MnemoTypeError, MnemoValueError
from .fields import Memory
from .filters import Filter, Where, as_filter, as_filters
from .tensors import Placement, ptr

# The compiled search calls (mnemo._mnemo_ext), or a stand-in that raises
# LibraryLoadError when the extension is missing.
_ext = _native.ext

Runtime = Any  # a mnemo.Runtime (not imported: runtime.py imports this module)

#: Sync policies of open_durable (enum mnemo_sync_policy).
SYNC_POLICIES = {"each_write": 0, "os": 1}

#: MNEMO_NO_ID: the id of result slots that have no candidate.
NO_ID = 2**64 - 1

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

_DATA_DTYPES = (np.float32, np.float16, np.uint16)

# The smallest magnitude that rounds to infinity in float32 (max + half an ulp).
_F32_OVERFLOW = float(np.finfo(np.float32).max) * (1 + 2.0**-25)

_U32_MAX = 2**32 - 1


def _is_real(value: Any) -> bool:
    """A Python or numpy real number (bool excluded: True is no weight)."""
    return (isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, (bool, np.bool_)))


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
    # Filtered queries since the store was made or opened, by where their
    # filter was evaluated: the store's GPU, or the host.
    filtered_on_device: int = 0
    filtered_on_host: int = 0
    # Of those on the host, queries whose matches were one run of rows (a
    # namespace of a store laid out by Store.cluster), read as such.
    filtered_ranged: int = 0


@dataclass(frozen=True)
class IndexInfo:
    """The state of a store's inverted-file index (struct mnemo_index_info).
    A store sharded by its runtime reports the counts summed over its
    shards; nlist is the list count of the centroids its shards share.

    Attributes:
        nlist: lists; 0 when the store has no index.
        indexed: live memories in lists.
        hot: live memories in the hot tier (written since the last build;
            every search with nprobe > 0 scans them exactly).
        largest_list: slots of the largest list.
        builds: builds and rebuilds since the store was opened.
        rebuilding: a background rebuild is under way.
        last_build_seconds: wall time of the last build or rebuild.
    """

    nlist: int
    indexed: int
    hot: int
    largest_list: int
    builds: int
    rebuilding: bool
    last_build_seconds: float


def _check_count(value: Any, name: str, limit: int = _U32_MAX) -> int:
    """A non-negative int up to `limit` (a C uint32_t by default): ctypes
    would wrap a negative value silently and truncate a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise MnemoTypeError(Status.E_DTYPE, f"{name} must be an int, not {type(value).__name__}")
    v = int(value)
    if v < 0:
        raise MnemoValueError(Status.E_INVALID_ARGUMENT, f"{name} must be >= 0, not {v}")
    if v > limit:
        raise MnemoValueError(Status.E_OUT_OF_RANGE, f"{name} = {v} is above its maximum {limit}")
    return v


def _check_nprobe(nprobe: Any) -> int:
    """Store.search's nprobe: an int in [0, 2**32)."""
    if type(nprobe) is int and 0 <= nprobe <= _U32_MAX:
        return nprobe
    if isinstance(nprobe, (bool, np.bool_)) or not isinstance(nprobe, (int, np.integer)):
        raise MnemoTypeError(Status.E_DTYPE, "nprobe must be an int (lists of the index to read; "
                                             f"0: the exact scan), not {type(nprobe).__name__}")
    if nprobe < 0:
        raise MnemoValueError(Status.E_INVALID_ARGUMENT, f"nprobe must be >= 0 (lists of the index "
                                                         f"to read; 0: the exact scan), not {nprobe}")
    return _check_count(nprobe, "nprobe")


def _check_positive(value: Any, name: str) -> float:
    """A real number > 0 (math.inf allowed)."""
    if not _is_real(value):
        raise MnemoTypeError(Status.E_DTYPE, f"{name} must be a real number, not {value!r}")
    v = float(value)
    if not v > 0:  # NaN fails too
        raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                              f"{name} must be > 0 (math.inf: never), not {v}")
    return v


@dataclass(frozen=True)
class Activation:
    """How an activation search ranks memories (the activation fields of
    struct mnemo_search_options): memory i scores

        w_relevance * rel_i + w_recency * 2 ** (-(now - t_i) / half_life)
            + w_importance * importance_i (+ bias_i with apply_bias)

    rel_i being the cosine or dot score (the negated distance for l2sq,
    whose returned score is then the negated activation, lower is better)
    and t_i the memory's last-access time (a time after `now` counts as now).

    Args:
        w_relevance, w_recency, w_importance: finite weights (defaults 1, 0, 0).
        half_life: seconds, > 0; math.inf for no decay (default one day).
        normalize: min-max scale each of relevance, recency and importance
            to [0, 1] over the query's candidates first (0.5 for all when
            they are equal), as Generative Agents does.

    Checked on construction: MnemoValueError (MNEMO_E_INVALID_ARGUMENT).
    """

    w_relevance: float = 1.0
    w_recency: float = 0.0
    w_importance: float = 0.0
    half_life: float = 86400.0
    normalize: bool = False

    def __post_init__(self) -> None:
        for name in ("w_relevance", "w_recency", "w_importance", "half_life"):
            value = getattr(self, name)
            if not _is_real(value):
                raise MnemoTypeError(Status.E_DTYPE,
                                     f"{name} must be a real number, not {value!r}")
            # Stored as float so that equal settings compare and hash equal.
            object.__setattr__(self, name, float(value))
        for name in ("w_relevance", "w_recency", "w_importance"):
            # The weights travel as float32: past its range they would be infinite.
            if not abs(getattr(self, name)) < _F32_OVERFLOW:
                raise MnemoValueError(Status.E_INVALID_ARGUMENT, f"{name} must be finite in "
                                      f"float32, not {getattr(self, name)}")
        if not self.half_life > 0:  # NaN fails too
            raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                                  f"half_life must be > 0 seconds (math.inf: no decay), "
                                  f"not {self.half_life}")
        if not isinstance(self.normalize, (bool, np.bool_)):
            raise MnemoTypeError(Status.E_DTYPE,
                                 f"normalize must be a bool, not {self.normalize!r}")
        object.__setattr__(self, "normalize", bool(self.normalize))


class MemoryMeta(NamedTuple):
    """mnemo_store_get_meta: per-id last-access times (float64 seconds),
    importance and bias (float32), each a numpy array in the order asked."""

    times: np.ndarray
    importance: np.ndarray
    biases: np.ndarray


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


def _set_activation(opts: Any, activation: Union[Activation, bool, None],
                    now: Optional[float], touch: bool) -> None:
    """Fills the activation fields of a mnemo_search_options."""
    if activation is True:
        activation = Activation()
    if activation is None or activation is False:
        # The library would ignore `now` and refuse touch: both are mistakes.
        if now is not None or touch:
            raise MnemoValueError(Status.E_INVALID_ARGUMENT, "now and touch need activation "
                                  "(activation=mnemo.Activation(...))")
        return
    if not isinstance(activation, Activation):
        raise MnemoTypeError(Status.E_DTYPE, "activation must be a mnemo.Activation, True or "
                                             f"None, not {type(activation).__name__}")
    opts.activation = 1
    opts.normalize = 1 if activation.normalize else 0
    opts.w_relevance = activation.w_relevance
    opts.w_recency = activation.w_recency
    opts.w_importance = activation.w_importance
    opts.half_life = activation.half_life
    opts.touch = 1 if touch else 0
    if now is None:
        opts.now = math.nan  # the library reads the clock at the call
        return
    if not _is_real(now):
        raise MnemoTypeError(Status.E_DTYPE, f"now must be seconds as a real number, not {now!r}")
    if not math.isfinite(now):
        raise MnemoValueError(Status.E_INVALID_ARGUMENT, f"now must be finite, not {now}")
    opts.now = float(now)


def _index_options(nlist: Any, train_iters: Any, train_per_list: Any, seed: Any,
                   rebuild_hot_fraction: Any, rebuild_hot_min: Any, rebuild_skew: Any,
                   background: Any) -> Any:
    """A mnemo_index_options of Store.build_index's arguments, checked."""
    opts = lib.mnemo_index_options_default()
    opts.nlist = _check_count(nlist, "nlist")
    opts.train_iters = _check_count(train_iters, "train_iters")
    opts.train_per_list = _check_count(train_per_list, "train_per_list")
    opts.seed = check_u64(seed, "seed")
    opts.rebuild_hot_fraction = _check_positive(rebuild_hot_fraction, "rebuild_hot_fraction")
    opts.rebuild_hot_min = check_u64(rebuild_hot_min, "rebuild_hot_min")
    opts.rebuild_skew = _check_positive(rebuild_skew, "rebuild_skew")
    if not isinstance(background, (bool, np.bool_)):
        raise MnemoTypeError(Status.E_DTYPE,
                             f"background must be a bool, not {type(background).__name__}")
    opts.background = 1 if background else 0
    return opts


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
        self._dim = self._shape.dim
        # The last out_ids / out_scores checked by the torch fast path, with
        # their pointers and shape (_search_torch).
        self._torch_outs: Optional[tuple] = None
        # The int32 the torch fast path's searches write their query check's
        # verdict to (check_on_device), per device; read by device_status().
        self._torch_status: Optional[Any] = None

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
        at `path` (mnemo_store_open_durable): every add, remove, set_bias,
        set_times, set_importance and touching search is journaled before it
        returns, and replayed on the next open.

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
                          raw.journal_bytes, raw.sequence, raw.filtered_on_device,
                          raw.filtered_on_host, raw.filtered_ranged)

    def save(self, path: PathLike) -> None:
        """Writes the store to `path` atomically (temporary file + rename)."""
        check(lib.mnemo_store_save(self.handle, _c_path(path)))

    # Sublinear recall: the inverted-file index.

    def build_index(self, nlist: int = 0, train_iters: int = 0, train_per_list: int = 0,
                    seed: int = 1, rebuild_hot_fraction: float = 0.25,
                    rebuild_hot_min: int = 4096, rebuild_skew: float = 8.0,
                    background: bool = True) -> None:
        """Builds (or rebuilds) the store's inverted-file index and returns
        when it is in place (mnemo_store_build_index): k-means centroids
        trained on a sample of the memories, every memory assigned to its
        best list and the slots laid out list by list. search(nprobe=n) with
        n > 0 then reads only the n lists nearest each query, plus the hot
        tier: every memory written since the build (new and upserted ones),
        scanned exactly, so a new memory is found at once. The index is kept
        by save() and, in a durable store, journaled before this returns.

        Args:
            nlist: lists; 0: round(sqrt(count)), at least 1 (a store with
                fewer memories than lists gets one list per memory); below
                2**23.
            train_iters: k-means iterations; 0: 10.
            train_per_list: training sample rows per list; 0: 256.
            seed: of the sample and the initial centroids.
            rebuild_hot_fraction, rebuild_hot_min: the store rebuilds the
                index by itself when the hot tier holds more than this
                fraction of the indexed memories and at least this many
                (math.inf: never for this reason).
            rebuild_skew: ... or when the largest list holds more than this
                many times the mean list (math.inf: never).
            background: automatic rebuilds run on a thread of the store
                (searches go on with the old index meanwhile); False: inside
                the write that triggers them.

        A background rebuild under way is waited for first. Bad values raise
        MnemoTypeError / MnemoValueError before the call; a durable store
        whose journal cannot be written raises MnemoError(MNEMO_E_IO) and
        keeps its previous layout.
        """
        opts = _index_options(nlist, train_iters, train_per_list, seed, rebuild_hot_fraction,
                              rebuild_hot_min, rebuild_skew, background)
        check(lib.mnemo_store_build_index(self.handle, ctypes.byref(opts)))

    def drop_index(self) -> None:
        """Removes the index (mnemo_store_drop_index): searches then scan
        every memory whatever their nprobe. Waits for a background rebuild
        first; journaled in a durable store. No index: nothing happens."""
        check(lib.mnemo_store_drop_index(self.handle))

    def wait_index(self) -> None:
        """Waits until no background rebuild is under way
        (mnemo_store_wait_index). A background rebuild that failed left the
        previous index in place; its error is raised here."""
        check(lib.mnemo_store_wait_index(self.handle))

    def index_info(self) -> IndexInfo:
        """The state of the store's index (mnemo_store_index_info)."""
        raw = _cdefs.IndexInfo()
        raw.struct_size = ctypes.sizeof(raw)
        check(lib.mnemo_store_index_info(self.handle, ctypes.byref(raw)))
        return IndexInfo(raw.nlist, raw.indexed, raw.hot, raw.largest_list, raw.builds,
                         bool(raw.rebuilding), raw.last_build_seconds)

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

    def add(self, ids: Any, vectors: Any, *, times: Any = None, importance: Any = None,
            keys: Any = None, namespaces: Any = None, tags: Any = None,
            attributes: Any = None, payloads: Any = None,
            copy: Optional[bool] = None) -> None:
        """Adds or replaces (upsert) vectors, and what the memories hold
        besides them.

        Args:
            ids: [count] non-negative integers (uint64; lists, int64 and
                int32 arrays are checked and converted; one int for one id).
            vectors: [count, dim] (or [dim] for one id) of float32 or of the
                store's own dtype (float16, or uint16 bf16 bits), passed as
                they are; other real dtypes are converted to float32.
            times: last-access times, float64 seconds [count] (or a number
                for one id), e.g. time.time(); None keeps an upserted
                memory's time and gives a new memory 0.
            importance: float32 [count] (or a number), same rules.
            keys, namespaces, tags, attributes, payloads: None (the field is
                not written), or a list with one entry per id: None leaves
                that memory's field as it is (a new memory has none), any
                other entry replaces it. keys: str, unique in the store ("":
                none); namespaces: tuples of str (a str is refused: "/" may
                be inside a part); tags: lists of str; attributes: dicts of
                name -> int, float, bool or str; payloads: str (stored as
                UTF-8) or bytes. mnemo_store_add_with_fields; a key held by
                another memory raises MnemoError(MNEMO_E_INVALID_ARGUMENT).
            copy: False refuses arguments that would need a conversion.

        Every check runs before the library is called: a refused argument
        writes nothing. CUDA tensors are copied to the host (the library
        takes host vectors for writes). A NaN or infinite time or importance
        raises MnemoError(MNEMO_E_NON_FINITE) and adds nothing.
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
        if _fields.any_given(keys, namespaces, tags, attributes, payloads):
            rows = _fields.pack_rows(i.shape[0], keys, namespaces, tags, attributes, payloads)
            t = None if times is None else self._per_id(i, times, "times", np.float64, copy)
            m = None if importance is None else self._per_id(i, importance, "importance",
                                                              np.float32, copy)
            check(lib.mnemo_store_add_with_fields(self.handle, host_ptr(i), host_ptr(v),
                                                  mnemo_dtype(v), i.shape[0], host_ptr(t),
                                                  host_ptr(m), rows.address))
            return
        if times is None and importance is None:
            check(lib.mnemo_store_add(self.handle, host_ptr(i), host_ptr(v), mnemo_dtype(v),
                                      i.shape[0]))
            return
        t = None if times is None else self._per_id(i, times, "times", np.float64, copy)
        m = None if importance is None else self._per_id(i, importance, "importance",
                                                          np.float32, copy)
        check(lib.mnemo_store_add_memories(self.handle, host_ptr(i), host_ptr(v), mnemo_dtype(v),
                                           i.shape[0], host_ptr(t), host_ptr(m)))

    def _per_id(self, ids: np.ndarray, values: Any, name: str, dtype: Any,
                copy: Optional[bool] = None) -> np.ndarray:
        """A host array of one value per id ([count]; a number for one id)."""
        if _is_real(values):
            values = [values]
        out = Placement(self._runtime, values, (), copy, host=True).input(
            values, name, [dtype], ndim=1)
        check_shape(out, name, ids.shape)
        return out

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

    def set_times(self, ids: Any, times: Any) -> None:
        """Sets the last-access time of each id (float64 seconds [count], or
        a number for one id). An absent id raises MnemoError
        (MNEMO_E_NOT_FOUND), a NaN or infinite time MNEMO_E_NON_FINITE, and
        then no time changes. A repeated id takes its last entry."""
        i = self._ids(ids)
        t = self._per_id(i, times, "times", np.float64)
        check(lib.mnemo_store_set_times(self.handle, host_ptr(i), host_ptr(t), i.shape[0]))

    def set_importance(self, ids: Any, importance: Any) -> None:
        """Sets the importance of each id (float32 [count], or a number for
        one id); errors as for set_times."""
        i = self._ids(ids)
        m = self._per_id(i, importance, "importance", np.float32)
        check(lib.mnemo_store_set_importance(self.handle, host_ptr(i), host_ptr(m), i.shape[0]))

    def update_fields(self, ids: Any, *, keys: Any = None, namespaces: Any = None,
                      tags: Any = None, attributes: Any = None, payloads: Any = None) -> None:
        """Writes fields of memories already in the store, their vectors,
        times and other fields untouched (mnemo_store_update_fields). The
        arguments are those of add(). An absent id raises
        MnemoError(MNEMO_E_NOT_FOUND), a key held by another memory
        MNEMO_E_INVALID_ARGUMENT; then nothing changes."""
        i = self._ids(ids)
        rows = _fields.pack_rows(i.shape[0], keys, namespaces, tags, attributes, payloads)
        check(lib.mnemo_store_update_fields(self.handle, host_ptr(i), rows.address, i.shape[0]))

    # Reads.

    def ids_of_keys(self, keys: Any) -> np.ndarray:
        """The id of each key (a list of str) as uint64 [len(keys)]; NO_ID
        for a key no memory holds (mnemo_store_ids_of_keys)."""
        packed = _ext.pack_keys(keys) if _native.AVAILABLE else None
        if packed is not None:
            arr, n = packed.texts_address, len(keys)
        else:
            arr, n = _fields.lookup_keys(keys)
        out = aligned_empty(n, np.uint64)
        if n:
            check(lib.mnemo_store_ids_of_keys(self.handle, arr, n, host_ptr(out)))
        return out

    def read(self, ids: Any) -> "list[Optional[Memory]]":
        """The fields, time and importance of each id as a Memory, None for
        an id not in the store (mnemo_store_read); one int reads one."""
        return _fields.read_memories(self.handle, self._ids(ids))

    def select(self, where: Optional[Where] = None, offset: int = 0,
               limit: Optional[int] = None) -> np.ndarray:
        """The ids (uint64, ascending) of the memories `where` (a Filter or
        its dictionary form; None: every memory) matches, skipping the
        first `offset`, at most `limit` of them (mnemo_store_select)."""
        offset = check_u64(offset, "offset")
        limit = None if limit is None else check_u64(limit, "limit")
        f = as_filter(where)
        h = None if f is None else f.handle
        want = max(self.count() - offset, 0)
        while True:
            cap = want if limit is None else min(want, limit)
            out = aligned_empty(cap, np.uint64)
            written, total = ctypes.c_uint64(), ctypes.c_uint64()
            check(lib.mnemo_store_select(self.handle, h, offset, cap,
                                         host_ptr(out) if cap else None,
                                         ctypes.byref(written), ctypes.byref(total)))
            want = max(total.value - offset, 0)
            # Grown meanwhile by another thread's add: once more.
            if written.value >= (want if limit is None else min(want, limit)):
                return out[:written.value]

    def count_where(self, where: Optional[Where] = None) -> int:
        """How many memories `where` matches (None: every memory)."""
        f = as_filter(where)
        written, total = ctypes.c_uint64(), ctypes.c_uint64()
        check(lib.mnemo_store_select(self.handle, None if f is None else f.handle, 0, 0, None,
                                     ctypes.byref(written), ctypes.byref(total)))
        return total.value

    def namespaces(self) -> "list[Tuple[Tuple[str, ...], int]]":
        """Each namespace the memories hold, as (parts, how many memories),
        sorted by parts (mnemo_store_namespaces)."""
        return _fields.store_namespaces(self.handle)

    def cluster(self) -> None:
        """Lays the memories out by namespace (mnemo_store_cluster): each
        namespace's memories, with those under it, become one run of rows,
        so a search scoped to it reads just that run. Results do not change.
        Memories added later go to the end: call it again after many adds.
        A snapshot keeps the order; it is not journaled."""
        check(lib.mnemo_store_cluster(self.handle))

    def get(self, id: int, *, out: Optional[np.ndarray] = None) -> np.ndarray:
        """The stored (rounded) vector of `id` as float32 [dim];
        MnemoError(MNEMO_E_NOT_FOUND) if absent."""
        res = output(out, "out", (self.dim,), np.float32)
        check(lib.mnemo_store_get(self.handle, check_u64(id, "id"), host_ptr(res)))
        return res

    def get_meta(self, ids: Any) -> MemoryMeta:
        """(times float64, importance float32, biases float32), one entry per
        id in the order given (arrays of length 1 for one id). An absent id
        raises MnemoError(MNEMO_E_NOT_FOUND)."""
        i = self._ids(ids)
        n = i.shape[0]
        meta = MemoryMeta(aligned_empty(n, np.float64), aligned_empty(n, np.float32),
                          aligned_empty(n, np.float32))
        check(lib.mnemo_store_get_meta(self.handle, host_ptr(i), n, host_ptr(meta.times),
                                       host_ptr(meta.importance), host_ptr(meta.biases)))
        return meta

    def search(self, queries: Any, k: int, *,
               filter_ids: Any = None, filter_bitmap: Any = None,
               filter_count: Optional[int] = None, apply_bias: bool = False,
               activation: Union[Activation, bool, None] = None,
               now: Optional[float] = None, touch: bool = False, nprobe: int = 0,
               where: Optional[Where] = None, where_each: Any = None,
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
            activation: an Activation: rank by relevance, recency and
                importance (see Activation); True for Activation().
                None or False: plain similarity.
            now: the present, in seconds on the clock of the stored times;
                None: the current UNIX time of the call. Needs activation.
            touch: the returned memories' last-access times become `now`
                (atomically with the search, which then runs exclusively;
                journaled in a durable store). Needs activation.
            nprobe: on a store with an index (build_index), n > 0 reads only
                the n lists whose centroids rank best for each query, plus
                the hot tier (every memory written since the build, scanned
                exactly). 0 (default), n >= the index's nlist, or a store
                without an index: the exact scan of every memory. Within the
                lists read, scores, ties, filters, bias and activation are
                those of the exact scan; how much of the exact top-k is
                found depends on the data and on n (mnemo eval --nprobe).
            where: a Filter, or its dictionary form (see mnemo.Filter):
                every query searches only the memories it matches.
            where_each: one Filter, dict or None per query: query i searches
                only what where_each[i] matches (None: no filter of its
                own). With where and the id or bitmap filters, a memory must
                pass each. A filtered query gets min(k, matching memories)
                results, never fewer, with or without an index.
            copy: False refuses queries that would need a conversion.

        Returns:
            (ids, scores float32), each [nq, k] (or [k] for a 1-D query),
            best first, ties broken by the smaller id. ids are uint64 numpy
            or CuPy arrays, int64 torch tensors (NO_ID reads as -1).

        A torch CUDA tensor searched with the default options never waits
        for the GPU: the queries' NaN/Inf check runs inside the search
        (check_on_device), so a query holding NaN or infinity does not raise;
        its row comes back as padding (ids -1, scores NaN), the other rows
        are unaffected, and device_status() then returns
        Status.E_NON_FINITE. Every other call checks its queries before the
        search and raises MnemoError(E_NON_FINITE), writing nothing.
        """
        if type(nprobe) is not int or not 0 <= nprobe <= _U32_MAX:
            nprobe = _check_nprobe(nprobe)
        handle = self._handle
        if (handle is not None and filter_ids is None and filter_bitmap is None
                and activation is None and not apply_bias and now is None and not touch
                and where_each is None):
            kind = type(queries)
            if where is not None:
                if kind is np.ndarray:
                    # The extension's numpy path with the filter in the options.
                    f = as_filter(where)  # held through the call
                    opts = _cdefs.SearchOptions.from_buffer_copy(_DEFAULT_OPTIONS)
                    opts.where = f.handle  # type: ignore[union-attr]
                    found = _ext.search_host(handle, queries, k, opts, self._dim, out_ids,
                                             out_scores, False, nprobe)
                    if found is not None:
                        return found
            elif kind is np.ndarray:
                # Host arrays that are right as they are: checks, results and
                # the call in the extension (None: something needs converting).
                found = _ext.search_host(handle, queries, k, None, self._dim, out_ids,
                                         out_scores, False, nprobe)
                if found is not None:
                    return found
            else:
                fast = _FAST_PATHS.get(kind, _unknown)
                if fast is _unknown:
                    fast = _fast_path_for(kind)
                if fast is not None:
                    found = fast(self, handle, queries, k, out_ids, out_scores, nprobe)
                    if found is not None:
                        return found
        return self._search(queries, k, filter_ids, filter_bitmap, filter_count, apply_bias,
                            activation, now, touch, out_ids, out_scores, copy, nprobe,
                            where, where_each)

    def device_status(self) -> Status:
        """The verdict of the query check of the last search queued from a
        torch CUDA tensor with the default options (Status.OK, or
        Status.E_NON_FINITE when a query held NaN or infinity and its row
        came back as padding). Waits for that search: it reads a device
        word written at the search's point in the stream. Status.OK before
        any such search; not written when the runtime's validation is off."""
        t = self._torch_status
        return Status.OK if t is None else Status(int(t[0].item()))

    def _search(self, queries: Any, k: Any, filter_ids: Any, filter_bitmap: Any,
                filter_count: Optional[int], apply_bias: bool,
                activation: Union[Activation, bool, None], now: Optional[float], touch: bool,
                out_ids: Any, out_scores: Any, copy: Optional[bool],
                nprobe: int = 0, where: Optional[Where] = None,
                where_each: Any = None) -> Tuple[Any, Any]:
        """search() for every argument: conversions, filters, options, CUDA
        tensors of any producer, the host fallback of an AUTO runtime."""
        k = check_u64(k, "k")
        opts = lib.mnemo_search_options_default()
        opts.nprobe = _check_nprobe(nprobe)
        opts.apply_bias = 1 if apply_bias else 0
        _set_activation(opts, activation, now, touch)
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
        f = as_filter(where)
        if f is not None:
            opts.where = f.handle
        each = None  # the where_each array and its filters, alive through the call
        place = Placement(self._runtime, queries, (), copy)
        for attempt in range(2):
            q = place.input(queries, "queries", [np.float32], ndim=(1, 2))
            one = len(q.shape) == 1
            nq, qdim = (1, q.shape[0]) if one else q.shape
            if qdim != self.dim:
                raise MnemoValueError(Status.E_SHAPE,
                                      f"queries have dimension {qdim}; the store has {self.dim}")
            if where_each is not None and each is None:
                each = _where_each(where_each, nq)
                opts.where_each = ctypes.addressof(each[0])
            shape = (k,) if one else (nq, k)
            ids = place.output(out_ids, "out_ids", shape, np.uint64)
            scores = place.output(out_scores, "out_scores", shape, np.float32)
            if not place.on_device:
                _ext.search_host(self.handle, q, k, opts, self.dim, ids, scores, True)
                break
            if nq == 0:
                break
            try:
                _ext.search_device(self.handle, ptr(q), nq, k, opts, ptr(ids), ptr(scores),
                                   place.stream)
                break
            except MnemoError as exc:
                # An AUTO runtime may hold a small store in host memory.
                if exc.status != Status.E_BACKEND_UNAVAILABLE or attempt:
                    raise
                place.host_fallback()
        return place.result(ids), place.result(scores)

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


def _where_each(where_each: Any, nq: int) -> Tuple[Any, "list[Filter]"]:
    """(mnemo_filter* [nq], the Filters it points to) of search()'s
    where_each: one Filter, dict or None per query. Equal dicts get one
    filter, so that queries in a row sharing it are searched together."""
    wrong = MnemoTypeError(Status.E_DTYPE, "where_each must be a list with one Filter, dict or "
                                           f"None per query, not a {type(where_each).__name__}")
    if isinstance(where_each, (str, bytes, Filter, Mapping)):
        raise wrong
    try:
        entries = list(where_each)
    except TypeError:
        raise wrong from None
    if len(entries) != nq:
        raise MnemoValueError(Status.E_SHAPE, f"where_each has {len(entries)} entries; "
                                              f"expected one per query ({nq})")
    arr = (ctypes.c_void_p * max(nq, 1))()
    held = []
    # A TypeError for anything but a Filter, a dict or None.
    for i, f in enumerate(as_filters(entries)):
        if f is not None:
            held.append(f)
            arr[i] = f.handle
    return arr, held


# The search options' defaults, copied by the filtered fast path.
_DEFAULT_OPTIONS = lib.mnemo_search_options_default()


# Fast paths of Store.search by query type, beside numpy's (which the
# extension takes whole): found once per type, None for types without one.
_FAST_PATHS: Dict[type, Optional[Callable[..., Optional[Tuple[Any, Any]]]]] = {}
_unknown: Any = object()


def _fast_path_for(kind: type) -> Optional[Callable[..., Optional[Tuple[Any, Any]]]]:
    fast = None
    if kind.__module__.split(".")[0] == "torch":
        torch = sys.modules.get("torch")
        # Subclasses (nn.Parameter, ...) take the general path.
        if torch is not None and kind is getattr(torch, "Tensor", None):
            fast = _search_torch
    if len(_FAST_PATHS) < 256:
        _FAST_PATHS[kind] = fast
    return fast


_torch_raw_stream: Any = None


def _torch_stream(torch: Any, device: int) -> int:
    """torch's current stream on `device` as a cudaStream_t int, without
    making a torch.cuda.Stream object where torch has the raw getter."""
    global _torch_raw_stream
    if _torch_raw_stream is None:
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _torch_raw_stream = raw if raw is not None else (
            lambda d: torch.cuda.current_stream(d).cuda_stream)
    return int(_torch_raw_stream(device))


def _torch_out_ok(torch: Any, out: Any, dtypes: Tuple[Any, ...], shape: Tuple[int, ...],
                  device: int, pointer: int) -> bool:
    return (type(out) is torch.Tensor and out.is_cuda and out.get_device() == device
            and out.dtype in dtypes and out.is_contiguous() and pointer % ALIGNMENT == 0
            and tuple(out.shape) == shape)


def _search_torch(store: Store, handle: int, q: Any, k: Any, out_ids: Any,
                  out_scores: Any, nprobe: int = 0) -> Optional[Tuple[Any, Any]]:
    """Store.search for a torch CUDA tensor with the default options (and
    any nprobe, checked by the caller): a
    float32, C-contiguous, 16-byte aligned query [nq, dim] or [dim] on the
    GPU of a CUDA runtime. Reads torch's pointer, shape, dtype and current
    stream directly (no __cuda_array_interface__ dict), allocates results
    with q.new_empty (or takes out_ids and out_scores, whose checks are
    skipped while the same tensors come back with the same pointers), and
    queues mnemo_store_search_device on torch's current stream. Returns
    None, having called nothing, for anything else: Store._search then
    converts, copies or refuses as documented."""
    torch = sys.modules["torch"]
    if not q.is_cuda or q.dtype is not torch.float32 or type(k) is not int or not 0 <= k < 2**64:
        return None
    device = q.get_device()
    if store._runtime.active_backend() != (Backend.CUDA, device):
        return None
    ndim = q.dim()
    if ndim == 1:
        nq, shape = 1, (k,)
    elif ndim == 2:
        nq = q.size(0)
        shape = (nq, k)
    else:
        return None
    qp = q.data_ptr()
    if nq == 0 or q.size(-1) != store._dim or qp % ALIGNMENT or not q.is_contiguous():
        return None
    if out_ids is None and out_scores is None:
        ids = q.new_empty(shape, dtype=torch.int64)
        scores = q.new_empty(shape)
        ip, sp = ids.data_ptr(), scores.data_ptr()
    elif out_ids is None or out_scores is None:
        return None
    else:
        ids, scores = out_ids, out_scores
        ip, sp = ids.data_ptr(), scores.data_ptr()
        seen = store._torch_outs
        if seen is None or seen[0] is not ids or seen[1] is not scores or seen[2] != (ip, sp, shape):
            id_types = (torch.int64, getattr(torch, "uint64", torch.int64))
            if not (_torch_out_ok(torch, ids, id_types, shape, device, ip)
                    and _torch_out_ok(torch, scores, (torch.float32,), shape, device, sp)):
                return None
            store._torch_outs = (ids, scores, (ip, sp, shape))
    status = store._torch_status
    if status is None or status.get_device() != device:
        status = store._torch_status = torch.zeros(4, dtype=torch.int32, device=q.device)
    try:
        _ext.search_device(handle, qp, nq, k, None, ip, sp, _torch_stream(torch, device),
                           status.data_ptr(), nprobe)
    except MnemoError as exc:
        # An AUTO runtime may hold a small store in host memory.
        if exc.status == Status.E_BACKEND_UNAVAILABLE:
            return None
        raise
    return ids, scores
