"""Python bindings of mnemo, a cognitive-memory runtime, over its C ABI.

The shared library is found, in order, at MNEMO_LIBRARY (a file path), in
MNEMO_LIB_DIR, in this package's directory, then where the system keeps
libraries; its ABI version is checked on import (LibraryLoadError, an
ImportError, otherwise).

Arrays go in and come out as numpy arrays. Every input must be C-contiguous,
16-byte aligned and of the documented dtype; nothing is converted silently
(use aligned_array() to convert). bf16 data travels as uint16 bit patterns
(see f32_to_bf16 / bf16_to_f32).

    >>> import numpy as np, mnemo
    >>> with mnemo.Runtime(backend="cpu") as rt:
    ...     store = mnemo.Store(rt, dim=4)
    ...     store.add([1, 2], mnemo.aligned_array(np.eye(2, 4), np.float32))
    ...     ids, scores = store.search(mnemo.aligned_array([1, 0, 0, 0], np.float32), k=1)
"""

from __future__ import annotations

from ._lib import ABI_VERSION, LIBRARY_PATH, lib
from .arrays import ALIGNMENT, aligned_array, aligned_empty, aligned_zeros, is_aligned
from .bf16 import bf16_to_f32, f32_to_bf16
from .enums import Backend, DType, FilterKind, Metric, Precision, Status
from .errors import LibraryLoadError, MnemoError, MnemoTypeError, MnemoValueError
from .merge import topk_merge
from .ops import layer_norm, normalize_rows, resample, score_pairs, similarity
from .runtime import Runtime, RuntimeInfo
from .store import NO_ID, Store, StoreShape, bitmap_from_mask

__version__ = "0.1.0"


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
    "Runtime", "RuntimeInfo", "Store", "StoreShape",
    "aligned_array", "aligned_empty", "aligned_zeros", "is_aligned",
    "bf16_to_f32", "f32_to_bf16", "bitmap_from_mask", "topk_merge",
    "similarity", "score_pairs", "resample", "normalize_rows", "layer_norm",
    "version", "abi_version", "build_info", "library_path",
]
