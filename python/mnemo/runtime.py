"""Runtime: the backend (CPU or CUDA) and options that every call runs on."""

from __future__ import annotations

import ctypes
import os
import weakref
from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

import numpy as np

from . import _cdefs, ops
from ._lib import check, lib
from ._owned import OwnedHandle
from .enums import Backend, DType, Metric, Precision, Status, parse_enum
from .errors import MnemoValueError
from .store import PathLike, Store


@dataclass(frozen=True)
class RuntimeInfo:
    """What a runtime is and why (struct mnemo_runtime_report)."""

    backend_requested: Union[Backend, int]
    backend_active: Union[Backend, int]
    precision: Union[Precision, int]
    device_id: int
    num_threads: int
    cuda_available: bool
    auto_gpu_min_bytes: int
    device_name: str
    reason: str


def _as_enum(kind: Any, value: int) -> Any:
    try:
        return kind(value)
    except ValueError:
        return value


def _uint(value: int, bits: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= int(value) < 2**bits:
        raise MnemoValueError(Status.E_OUT_OF_RANGE, f"{what} = {value} is not a uint{bits}")
    return int(value)


class Runtime(OwnedHandle):
    """A mnemo runtime (mnemo_runtime_create / mnemo_runtime_destroy).

    Args:
        backend: "auto" (GPU for large work when usable), "cpu" or "cuda"
            (an error without a usable GPU, never a silent fallback).
        precision: "exact" or "fast" (tensor cores allowed, scores re-scored).
        threads: CPU threads, 0 = one per available core.
        device: CUDA device ordinal.
        validate: refuse NaN/Inf inputs with MNEMO_E_NON_FINITE.
        workspace_bytes: GPU scratch bound, 0 = library default.

    Stores created on a runtime keep it alive; close() closes them first,
    because the library requires a runtime to outlive its stores. A runtime
    may be used from many threads, but close() must not race other calls.
    """

    def __init__(self, backend: Union[Backend, str, int] = "auto",
                 precision: Union[Precision, str, int] = "exact",
                 threads: int = 0, device: int = 0,
                 validate: Union[bool, int] = True,
                 workspace_bytes: int = 0) -> None:
        self._handle: Optional[int] = None
        self._stores: "weakref.WeakSet[Store]" = weakref.WeakSet()
        self._active: Optional[Tuple[int, int]] = None
        opts = lib.mnemo_runtime_options_default()
        opts.backend = parse_enum(backend, Backend, "backend")
        opts.precision = parse_enum(precision, Precision, "precision")
        if isinstance(device, bool) or not isinstance(device, (int, np.integer)) \
                or not -(2**31) <= int(device) < 2**31:
            raise MnemoValueError(Status.E_OUT_OF_RANGE, f"device {device!r} is not an int32")
        opts.device_id = int(device)
        opts.num_threads = _uint(threads, 32, "threads")
        opts.validate = _uint(int(validate) if isinstance(validate, bool) else validate,
                              32, "validate")
        opts.workspace_bytes = _uint(workspace_bytes, 64, "workspace_bytes")
        handle = ctypes.c_void_p()
        check(lib.mnemo_runtime_create(ctypes.byref(opts), ctypes.byref(handle)))
        self._handle = handle.value
        self._pid = os.getpid()

    @property
    def handle(self) -> int:
        """The mnemo_runtime* as an int; MnemoValueError if closed."""
        if self._handle is None:
            raise MnemoValueError(Status.E_NULL_POINTER, "the runtime is closed")
        return self._handle

    @property
    def closed(self) -> bool:
        return self._handle is None

    def info(self) -> RuntimeInfo:
        """mnemo_runtime_info: the backend chosen, and why."""
        report = _cdefs.RuntimeReport()
        report.struct_size = ctypes.sizeof(report)
        check(lib.mnemo_runtime_info(self.handle, ctypes.byref(report)))
        return RuntimeInfo(
            backend_requested=_as_enum(Backend, report.backend_requested),
            backend_active=_as_enum(Backend, report.backend_active),
            precision=_as_enum(Precision, report.precision),
            device_id=report.device_id,
            num_threads=report.num_threads,
            cuda_available=bool(report.cuda_available),
            auto_gpu_min_bytes=report.auto_gpu_min_bytes,
            device_name=report.device_name.decode(errors="replace"),
            reason=report.reason.decode(errors="replace"),
        )

    def active_backend(self) -> Tuple[int, int]:
        """(backend_active, device_id) of info(), read once: which entry
        points CUDA tensors go to."""
        if self._active is None:
            report = self.info()
            self._active = (int(report.backend_active), int(report.device_id))
        return self._active

    def close(self) -> None:
        """Destroys the runtime and, first, every store still open on it."""
        if self._handle is None:
            return
        for store in list(self._stores):
            store.close()
        handle, self._handle = self._handle, None
        lib.mnemo_runtime_destroy(handle)


    def __repr__(self) -> str:
        state = "closed" if self.closed else f"handle={self._handle:#x}"
        return f"<mnemo.Runtime {state}>"

    # Conveniences: the same operations as the module-level functions.

    def store(self, dim: int, dtype: Union[DType, str, Any] = "f32",
              metric: Union[Metric, str, int] = "cosine") -> Store:
        """A new empty Store on this runtime."""
        return Store(self, dim, dtype, metric)

    def open_durable(self, path: PathLike, dim: int = 0, dtype: Any = "f32",
                     metric: Union[Metric, str, int] = "cosine", **kwargs: Any) -> Store:
        """See mnemo.Store.open_durable."""
        return Store.open_durable(self, path, dim, dtype, metric, **kwargs)

    def similarity(self, queries: Any, targets: Any,
                   metric: Union[Metric, str, int] = "cosine",
                   out: Any = None, copy: Optional[bool] = None) -> Any:
        """See mnemo.similarity."""
        return ops.similarity(self, queries, targets, metric, out=out, copy=copy)

    def score_pairs(self, table: Any, src: Any, tgt: Any,
                    metric: Union[Metric, str, int] = "cosine",
                    out: Any = None, copy: Optional[bool] = None) -> Any:
        """See mnemo.score_pairs."""
        return ops.score_pairs(self, table, src, tgt, metric, out=out, copy=copy)

    def resample(self, data: Any, src_times: Any, tgt_times: Any,
                 src_lengths: Any = None, tgt_lengths: Any = None,
                 out: Any = None, copy: Optional[bool] = None) -> Any:
        """See mnemo.resample."""
        return ops.resample(self, data, src_times, tgt_times, src_lengths, tgt_lengths,
                            out=out, copy=copy)

    def normalize_rows(self, x: Any, out: Any = None, copy: Optional[bool] = None) -> Any:
        """See mnemo.normalize_rows."""
        return ops.normalize_rows(self, x, out=out, copy=copy)

    def layer_norm(self, x: Any, gamma: Any = None, beta: Any = None, eps: float = 1e-5,
                   out: Any = None, copy: Optional[bool] = None) -> Any:
        """See mnemo.layer_norm."""
        return ops.layer_norm(self, x, gamma, beta, eps, out=out, copy=copy)
