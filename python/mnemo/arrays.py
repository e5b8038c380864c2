"""16-byte aligned numpy arrays and the checks made before each call.

mnemo refuses data pointers that are not MNEMO_ALIGNMENT (16) byte aligned.
numpy usually returns such memory, but views and slices often are not, so
every array is checked here and outputs are allocated with aligned_empty().
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from .enums import DType, Status
from .errors import MnemoTypeError, MnemoValueError

#: MNEMO_ALIGNMENT: required alignment in bytes of every data pointer.
ALIGNMENT = 16

Shape = Union[int, Sequence[int]]
DTypeLike = Any

# numpy dtype -> mnemo dtype. bf16 has no numpy dtype: uint16 holds its bits.
_NUMPY_TO_MNEMO = {
    np.dtype(np.float32): DType.F32,
    np.dtype(np.float16): DType.F16,
    np.dtype(np.uint16): DType.BF16,
    np.dtype(np.float64): DType.F64,
    np.dtype(np.uint32): DType.U32,
    np.dtype(np.uint64): DType.U64,
}

#: numpy dtype of each mnemo dtype, for allocating outputs.
NUMPY_DTYPE = {v: k for k, v in _NUMPY_TO_MNEMO.items()}

# A 16-byte aligned pointer for empty arrays, whose own data pointer may be
# anything: the library may check pointers even when there is nothing to read.
_EMPTY = None


def aligned_empty(shape: Shape, dtype: DTypeLike = np.float32) -> np.ndarray:
    """Like numpy.empty, but the data starts on a 16-byte boundary.

    The array is a view into a slightly larger byte buffer, which it keeps
    alive through its .base.
    """
    dt = np.dtype(dtype)
    shape_t = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    count = int(np.prod(shape_t, dtype=np.int64)) if shape_t else 1
    nbytes = count * dt.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGNMENT
    return raw[start:start + nbytes].view(dt).reshape(shape_t)


def aligned_zeros(shape: Shape, dtype: DTypeLike = np.float32) -> np.ndarray:
    """Like numpy.zeros, 16-byte aligned."""
    out = aligned_empty(shape, dtype)
    out[...] = 0
    return out


def is_aligned(a: np.ndarray) -> bool:
    """True if the data of `a` starts on a 16-byte boundary."""
    return a.ctypes.data % ALIGNMENT == 0


def aligned_array(a: Any, dtype: Optional[DTypeLike] = None,
                  copy: bool = False) -> np.ndarray:
    """Returns `a` as a C-contiguous, 16-byte aligned array of `dtype`.

    `a` itself is returned when it already qualifies (and copy is False);
    otherwise an aligned copy, converted with numpy's usual casting, is made.
    """
    src = np.asarray(a, dtype=dtype)
    if not copy and src.flags.c_contiguous and is_aligned(src):
        return src
    out = aligned_empty(src.shape, src.dtype)
    out[...] = src
    return out


def mnemo_dtype(a: np.ndarray) -> DType:
    """The mnemo dtype of an array (uint16 means bf16 bits)."""
    try:
        return _NUMPY_TO_MNEMO[a.dtype]
    except KeyError:
        raise MnemoTypeError(Status.E_DTYPE, f"no mnemo dtype for numpy {a.dtype}") from None


def _names(dtypes: Iterable[DTypeLike]) -> str:
    return ", ".join(str(np.dtype(d)) for d in dtypes)


def check_array(a: Any, name: str, dtypes: Sequence[DTypeLike],
                ndim: Optional[Union[int, Tuple[int, ...]]] = None,
                writable: bool = False) -> np.ndarray:
    """Checks an array argument and returns it (never a copy).

    Raises MnemoTypeError (a TypeError) for a non-array or a dtype not in
    `dtypes`, and MnemoValueError (a ValueError) for a wrong number of
    dimensions, non-C-contiguous, misaligned or read-only (when `writable`)
    data.
    """
    if not isinstance(a, np.ndarray):
        raise MnemoTypeError(Status.E_DTYPE,
                             f"{name} must be a numpy.ndarray, not {type(a).__name__}")
    if a.dtype not in [np.dtype(d) for d in dtypes]:
        raise MnemoTypeError(Status.E_DTYPE,
                             f"{name} has dtype {a.dtype}; expected {_names(dtypes)}"
                             " (convert with mnemo.aligned_array(a, dtype))")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if a.ndim not in allowed:
            raise MnemoValueError(Status.E_SHAPE,
                                  f"{name} has {a.ndim} dimensions; expected "
                                  + " or ".join(map(str, allowed)))
    if not a.flags.c_contiguous:
        raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                              f"{name} is not C-contiguous (use mnemo.aligned_array)")
    if a.size and not is_aligned(a):
        raise MnemoValueError(Status.E_MISALIGNED,
                              f"{name} data at {a.ctypes.data:#x} is not {ALIGNMENT}-byte "
                              "aligned (use mnemo.aligned_array or mnemo.aligned_empty)")
    if writable and not a.flags.writeable:
        raise MnemoValueError(Status.E_INVALID_ARGUMENT, f"{name} is read-only")
    return a


def as_input(a: Any, name: str, dtypes: Sequence[DTypeLike],
             ndim: Optional[Union[int, Tuple[int, ...]]] = None) -> np.ndarray:
    """check_array for arrays; other values (lists, scalars) are converted to
    an aligned array of the first of `dtypes`, since they carry no dtype."""
    if not isinstance(a, np.ndarray):
        a = _convert(a, name, np.dtype(dtypes[0]))
    return check_array(a, name, dtypes, ndim)


def _convert(value: Any, name: str, target: np.dtype) -> np.ndarray:
    """Converts a list or scalar without losing anything: no float to int
    truncation, no wrapping of negative or too large ints."""
    if target.kind == "u":
        # Element by element: numpy would turn [8, 2**64 - 1] into float64.
        items = np.asarray(value, dtype=object)
        flat = items.ravel().tolist()
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                   for v in flat):
            raise MnemoTypeError(Status.E_DTYPE, f"{name} must hold integers")
        if any(not 0 <= int(v) <= np.iinfo(target).max for v in flat):
            raise MnemoValueError(Status.E_OUT_OF_RANGE, f"{name} has values outside {target}")
        return aligned_array(np.array([int(v) for v in flat], dtype=target).reshape(items.shape))
    try:
        src = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise MnemoTypeError(Status.E_DTYPE, f"{name}: {exc}") from None
    if src.size and src.dtype.kind not in "uif":
        raise MnemoTypeError(Status.E_DTYPE,
                             f"{name} holds {src.dtype} values; expected numbers")
    return aligned_array(src, target)


def check_shape(a: np.ndarray, name: str, shape: Tuple[int, ...]) -> None:
    """Raises MnemoValueError(SHAPE) unless a.shape == shape."""
    if a.shape != tuple(shape):
        raise MnemoValueError(Status.E_SHAPE,
                              f"{name} has shape {a.shape}; expected {tuple(shape)}")


def output(out: Optional[np.ndarray], name: str, shape: Tuple[int, ...],
           dtype: DTypeLike) -> np.ndarray:
    """An output array: `out` after checking it, or a new aligned one."""
    if out is None:
        return aligned_empty(shape, dtype)
    check_array(out, name, [dtype], writable=True)
    check_shape(out, name, shape)
    return out


def ptr(a: Optional[np.ndarray]) -> Optional[int]:
    """The data pointer to pass for `a` (None -> NULL); empty arrays get a
    fixed aligned pointer, as nothing is read or written through it."""
    global _EMPTY
    if a is None:
        return None
    if a.size == 0:
        if _EMPTY is None:
            _EMPTY = aligned_zeros(ALIGNMENT, np.uint8)
        return _EMPTY.ctypes.data
    return a.ctypes.data


def check_u64(value: Any, name: str) -> int:
    """A Python int in [0, 2**64), as C uint64_t arguments need (ctypes would
    silently wrap anything else)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise MnemoTypeError(Status.E_DTYPE, f"{name} must be an int, not {type(value).__name__}")
    v = int(value)
    if not 0 <= v < 2**64:
        raise MnemoValueError(Status.E_OUT_OF_RANGE, f"{name} = {v} is not a uint64")
    return v


def _from_host_dlpack(a: Any, name: str) -> Any:
    """A numpy view of a CPU object exposing __dlpack__ (torch CPU tensors,
    numpy itself); other objects are returned unchanged."""
    if isinstance(a, np.ndarray) or not hasattr(a, "__dlpack__"):
        return a
    try:
        return np.from_dlpack(a)
    except (TypeError, ValueError, RuntimeError, BufferError) as exc:
        raise MnemoTypeError(Status.E_DTYPE,
                             f"{name}: cannot read it as a host array ({exc})") from None


def _to_numpy(a: Any, name: str) -> np.ndarray:
    """np.asarray with the argument's name in its errors (ragged lists)."""
    a = _from_host_dlpack(a, name)
    if isinstance(a, np.ndarray):
        return a
    try:
        return np.asarray(a)
    except (TypeError, ValueError) as exc:
        raise MnemoValueError(Status.E_SHAPE,
                              f"{name} is not a rectangular array of numbers: {exc}") from None


def _ndim_ok(a: np.ndarray, name: str, ndim: Union[int, Tuple[int, ...]]) -> None:
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if a.ndim not in allowed:
        raise MnemoValueError(Status.E_SHAPE,
                              f"{name} has {a.ndim} dimensions; expected "
                              + " or ".join(map(str, allowed)))


def _is_ready(a: np.ndarray, dtypes: Sequence[DTypeLike]) -> bool:
    return (a.dtype in [np.dtype(d) for d in dtypes] and a.flags.c_contiguous
            and (a.size == 0 or is_aligned(a)))


def as_data(a: Any, name: str, dtypes: Sequence[DTypeLike],
            ndim: Union[int, Tuple[int, ...]], copy: bool = True) -> np.ndarray:
    """A floating-point input as mnemo reads it.

    An array of one of `dtypes` that is C-contiguous and 16-byte aligned is
    returned as it is (no copy). Anything else holding real numbers (lists,
    float64, ints, strided, Fortran-ordered or misaligned arrays, CPU objects
    with __dlpack__) is converted with one copy to the first of `dtypes`, or
    kept in its own dtype when that is accepted. With copy=False a needed
    copy raises instead, as check_array does (MnemoTypeError for the dtype,
    MnemoValueError for layout or alignment).
    """
    src = _to_numpy(a, name)
    _ndim_ok(src, name, ndim)
    if _is_ready(src, dtypes):
        return src
    if src.size and (src.dtype.kind not in "uif" or src.dtype == np.bool_):
        raise MnemoTypeError(Status.E_DTYPE,
                             f"{name} holds {src.dtype} values; expected real numbers")
    target = src.dtype if src.dtype in [np.dtype(d) for d in dtypes] else np.dtype(dtypes[0])
    if not copy:
        # The strict path: check_array names what is wrong with a dtype
        # TypeError or a ValueError (layout, alignment).
        check_array(src, name, dtypes)
    return aligned_array(src, target, copy=True)


def as_ids(a: Any, name: str, dtypes: Sequence[DTypeLike] = (np.uint64,),
           copy: bool = True) -> np.ndarray:
    """A 1-D array of ids or indices (unsigned), converted with one copy from
    any integer dtype (negative values refused), from floats holding whole
    numbers, or from lists; already right arrays pass unchanged. Raises
    MnemoTypeError for non-numbers, MnemoValueError for negative,
    non-integral or out-of-range values, and for copy=False when a copy is
    needed."""
    if isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)):
        a = [a]
    if not isinstance(a, np.ndarray) and not hasattr(a, "__dlpack__"):
        return check_array(_convert(a, name, np.dtype(dtypes[0])), name, dtypes, 1)
    src = _to_numpy(a, name)
    _ndim_ok(src, name, 1)
    if _is_ready(src, dtypes):
        return src
    allowed = [np.dtype(d) for d in dtypes]
    target = src.dtype if src.dtype in allowed else allowed[0]
    limit = int(np.iinfo(target).max)
    if src.size == 0:
        pass
    elif src.dtype.kind in "iu":
        lo, hi = int(src.min()), int(src.max())
        if lo < 0:
            raise MnemoValueError(Status.E_OUT_OF_RANGE, f"{name} has a negative value ({lo})")
        if hi > limit:
            raise MnemoValueError(Status.E_OUT_OF_RANGE, f"{name} has {hi}, above {target} range")
    elif src.dtype.kind == "f":
        if not np.all(np.isfinite(src)) or np.any(src != np.floor(src)):
            raise MnemoValueError(Status.E_OUT_OF_RANGE,
                                  f"{name} has non-integral or non-finite values")
        lo, hi = float(src.min()), float(src.max())
        # Beyond 2**53 a float no longer names one integer.
        if lo < 0 or hi > min(limit, 2**53):
            raise MnemoValueError(Status.E_OUT_OF_RANGE,
                                  f"{name} has values outside [0, {min(limit, 2**53)}]")
    else:
        raise MnemoTypeError(Status.E_DTYPE, f"{name} holds {src.dtype} values; expected integers")
    if not copy:
        # The strict path: check_array names what is wrong with a dtype
        # TypeError or a ValueError (layout, alignment).
        check_array(src, name, dtypes)
    return aligned_array(src, target, copy=True)
