"""Python bindings of mnemo, a cognitive-memory runtime, over its C ABI.

The shared library is found, in order, at MNEMO_LIBRARY (a file path), in
MNEMO_LIB_DIR, in this package's directory, then where the system keeps
libraries; its ABI version is checked on import (LibraryLoadError, an
ImportError, otherwise).

Inputs may be lists, numpy arrays of any real dtype and layout, or tensors of
other frameworks (PyTorch, CuPy, JAX). Arrays that are already float32 (or the
store's dtype), C-contiguous and 16-byte aligned, and uint64 ids, are passed
without a copy; anything else is converted with one copy, and copy=False
refuses instead. CUDA tensors on a CUDA runtime go to the `_device` entry
points on the producer's stream and come back as that framework's tensors
(docs/python.md). bf16 data travels as uint16 bit patterns in numpy (see
f32_to_bf16 / bf16_to_f32) and as torch.bfloat16 in PyTorch.

    >>> import numpy as np, mnemo
    >>> with mnemo.Runtime(backend="cpu") as rt:
    ...     store = mnemo.Store(rt, dim=4)
    ...     store.add([1, 2], np.eye(2, 4))
    ...     ids, scores = store.search([1, 0, 0, 0], k=1)
"""

from __future__ import annotations

import os

from ._lib import ABI_VERSION, LIBRARY_PATH, lib
from .arrays import ALIGNMENT, aligned_array, aligned_empty, aligned_zeros, is_aligned
from .bf16 import bf16_to_f32, f32_to_bf16
from .enums import Backend, DType, FilterKind, Metric, Precision, Status
from .errors import LibraryLoadError, MnemoError, MnemoTypeError, MnemoValueError
from .fields import Memory
from .filters import Filter
from .merge import topk_merge
from .ops import layer_norm, normalize_rows, resample, score_pairs, similarity
from .runtime import Runtime, RuntimeInfo
from .store import (NO_ID, Activation, IndexInfo, MemoryMeta, Store, StoreShape, StoreStats,
                    bitmap_from_mask)

__version__ = "0.3.0"


def open_durable(runtime: Runtime, path: "str | os.PathLike[str]", dim: int = 0,
                 dtype: object = "f32", metric: object = "cosine", **kwargs: object) -> Store:
    """Opens or creates a durable store: see Store.open_durable."""
    return Store.open_durable(runtime, path, dim, dtype, metric, **kwargs)  # type: ignore[arg-type]


def version() -> str:
    """mnemo_version(): "MAJOR.MINOR.PATCH" of the loaded library."""
    return lib.mnemo_version().decode()


def abi_version() -> int:
    """mnemo_abi_version() of the loaded library (checked on import)."""
    return int(lib.mnemo_abi_version())


def build_info() -> str:
    """mnemo_build_info(): version, compiler, backends, SIMD level, CUDA archs."""
    return lib.mnemo_build_info().decode(errors="replace")


def library_path() -> str:
    """Path (or soname) libmnemo was loaded from."""
    return LIBRARY_PATH


__all__ = [
    "ABI_VERSION", "ALIGNMENT", "NO_ID",
    "Backend", "DType", "FilterKind", "Metric", "Precision", "Status",
    "LibraryLoadError", "MnemoError", "MnemoTypeError", "MnemoValueError",
    "Runtime", "RuntimeInfo", "Store", "StoreShape", "StoreStats", "open_durable",
    "Activation", "IndexInfo", "MemoryMeta", "Memory", "Filter",
    "aligned_array", "aligned_empty", "aligned_zeros", "is_aligned",
    "bf16_to_f32", "f32_to_bf16", "bitmap_from_mask", "topk_merge",
    "similarity", "score_pairs", "resample", "normalize_rows", "layer_norm",
    "version", "abi_version", "build_info", "library_path",
]
