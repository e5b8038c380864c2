"""16-byte aligned numpy arrays and the conversion of inputs.

mnemo refuses data pointers that are not MNEMO_ALIGNMENT (16) byte aligned.
numpy usually returns such memory, but views and slices often are not.
host_input() passes arrays that are already right untouched and converts
anything else (lists, other dtypes, strided, Fortran-ordered or misaligned
data) with one copy; outputs are allocated with aligned_empty().
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from .enums import DType, Status
from .errors import MnemoError, MnemoTypeError, MnemoValueError

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
    """host_input with the conversions allowed (kept for callers of the
    earlier strict API)."""
    return host_input(a, name, dtypes, ndim)


# Kinds of argument, which decide how a value of another dtype is converted.
VALUES = "values"    # floats: any real number array is cast to dtypes[0]
INDICES = "indices"  # non-negative integers: signed ones checked, never floats


def _refuse_copy(name: str, why: str, status: Status = Status.E_INVALID_ARGUMENT) -> MnemoError:
    cls = MnemoTypeError if status == Status.E_DTYPE else MnemoValueError
    return cls(status, f"{name} {why}; copy=False forbids the conversion")


def host_input(a: Any, name: str, dtypes: Sequence[DTypeLike],
               ndim: Optional[Union[int, Tuple[int, ...]]] = None, *,
               kind: str = VALUES, copy: Optional[bool] = None) -> np.ndarray:
    """An input as a C-contiguous, 16-byte aligned numpy array of one of
    `dtypes`, converted with at most one copy.

    An array that already qualifies is returned as is (same data pointer);
    so is a host DLPack tensor (torch CPU, ...) through numpy.from_dlpack. A
    signed integer array of indices whose width matches an unsigned dtype in
    `dtypes` is checked for negative values and viewed, not copied. Anything
    else (lists, another dtype, strided, Fortran-ordered or misaligned data)
    is copied once into a new aligned array of dtypes[0] (or its own dtype
    when that is allowed). With copy=False a needed copy raises instead.

    Raises MnemoTypeError (TypeError) for values of the wrong kind (strings,
    booleans, floats as indices) and MnemoValueError (ValueError) for ragged
    lists, a wrong number of dimensions, negative or too large indices.
    """
    allowed = [np.dtype(d) for d in dtypes]
    if isinstance(a, np.ndarray):
        src = a
    elif _host_dlpack(a):
        src = _from_dlpack(a, name)
    elif hasattr(a, "__array_interface__") or hasattr(a, "__array__"):
        src = np.asarray(a)  # shares memory where the producer allows it
    else:
        if copy is False:
            raise _refuse_copy(name, f"is a {type(a).__name__}, not an array")
        return _convert_sequence(a, name, allowed, ndim, kind)
    _check_ndim(src, name, ndim)
    target = _target_dtype(src, name, allowed, kind)
    if target != src.dtype and kind == INDICES and src.dtype.kind == "i" \
            and target.itemsize == src.dtype.itemsize:
        _check_indices(src, name, target)
        src = src.view(target)  # same bits: no copy
    needs = []
    if target != src.dtype:
        if kind == INDICES:
            _check_indices(src, name, target)
        needs.append((f"has dtype {src.dtype}, not {_names(allowed)}", Status.E_DTYPE))
    if not src.flags.c_contiguous:
        needs.append(("is not C-contiguous", Status.E_INVALID_ARGUMENT))
    if src.size and not is_aligned(src):
        needs.append((f"data at {src.ctypes.data:#x} is not {ALIGNMENT}-byte aligned",
                      Status.E_MISALIGNED))
    if not needs:
        return src
    if copy is False:
        raise _refuse_copy(name, needs[0][0], needs[0][1])
    out = aligned_empty(src.shape, target)
    out[...] = src  # one copy, with the dtype conversion
    return out


def _host_dlpack(a: Any) -> bool:
    """True for a non-numpy object whose DLPack device is the CPU."""
    dev = getattr(a, "__dlpack_device__", None)
    if dev is None or not hasattr(a, "__dlpack__"):
        return False
    try:
        return int(dev()[0]) == 1  # kDLCPU
    except Exception:
        return False


def _from_dlpack(a: Any, name: str) -> np.ndarray:
    try:
        return np.from_dlpack(a)
    except (BufferError, TypeError, RuntimeError) as exc:
        detach = getattr(a, "detach", None)  # torch tensors that require grad
        if detach is not None:
            try:
                return np.from_dlpack(detach())
            except (BufferError, TypeError, RuntimeError):
                pass
        raise MnemoTypeError(Status.E_DTYPE, f"{name}: numpy cannot read it ({exc})") from None


def _check_ndim(a: np.ndarray, name: str, ndim: Optional[Union[int, Tuple[int, ...]]]) -> None:
    if ndim is None:
        return
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if a.ndim not in allowed:
        raise MnemoValueError(Status.E_SHAPE,
                              f"{name} has {a.ndim} dimensions (shape {a.shape}); expected "
                              + " or ".join(map(str, allowed)))


def _target_dtype(a: np.ndarray, name: str, allowed: Sequence[np.dtype], kind: str) -> np.dtype:
    """The dtype `a` is passed as: its own when allowed, else allowed[0]."""
    if a.dtype in allowed:
        return a.dtype
    k = a.dtype.kind
    if kind == INDICES:
        if k in "iu":
            # A signed array of the width of an allowed unsigned dtype is viewed.
            for d in allowed:
                if d.itemsize == a.dtype.itemsize:
                    return d
            return allowed[0]
        raise MnemoTypeError(Status.E_DTYPE,
                             f"{name} has dtype {a.dtype}; expected integers ({_names(allowed)})")
    if k in "fiu":
        return allowed[0]
    raise MnemoTypeError(Status.E_DTYPE,
                         f"{name} has dtype {a.dtype}; expected real numbers ({_names(allowed)})")


def _check_indices(a: np.ndarray, name: str, target: np.dtype) -> None:
    """Refuses values that do not fit `target` (negative, too large)."""
    if a.size == 0:
        return
    lo, hi = int(a.min()), int(a.max())
    if lo < 0:
        raise MnemoValueError(Status.E_OUT_OF_RANGE,
                              f"{name} holds a negative value ({lo} at position "
                              f"{int(np.argmin(a))}); ids and indices are non-negative")
    if hi > np.iinfo(target).max:
        raise MnemoValueError(Status.E_OUT_OF_RANGE, f"{name} holds {hi}, outside {target}")


def _convert_sequence(value: Any, name: str, allowed: Sequence[np.dtype],
                      ndim: Optional[Union[int, Tuple[int, ...]]], kind: str) -> np.ndarray:
    """A list, tuple or scalar converted without losing anything: no float
    to int truncation, no wrapping of negative or too large ints."""
    try:
        arr = np.asarray(value)
    except OverflowError:  # ints beyond every numpy dtype: decided one by one
        arr = np.asarray(value, dtype=object)
    except ValueError as exc:  # numpy refuses ragged nesting
        raise MnemoValueError(Status.E_SHAPE, f"{name} is a ragged list: {exc}") from None
    if kind == INDICES and arr.dtype.kind in "fO":
        # numpy turns [8, 2**64 - 1] into float64: decide element by element.
        arr = _exact_indices(value, name, allowed[0])
    if arr.dtype.kind not in ("iu" if kind == INDICES else "fiu"):
        what = "integers" if kind == INDICES else "real numbers"
        raise MnemoTypeError(Status.E_DTYPE, f"{name} holds {arr.dtype} values; expected {what}")
    _check_ndim(arr, name, ndim)
    target = allowed[0] if arr.dtype not in allowed else arr.dtype
    if kind == INDICES:
        _check_indices(arr, name, target)
    return aligned_array(arr, target)


def _exact_indices(value: Any, name: str, target: np.dtype) -> np.ndarray:
    items = np.asarray(value, dtype=object)
    flat = items.ravel().tolist()
    for pos, v in enumerate(flat):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise MnemoTypeError(Status.E_DTYPE, f"{name}[{pos}] is {type(v).__name__} "
                                 f"({v!r}); ids and indices must be integers")
        if not 0 <= int(v) <= np.iinfo(target).max:
            raise MnemoValueError(Status.E_OUT_OF_RANGE,
                                  f"{name}[{pos}] = {int(v)} is outside {target} "
                                  "(ids and indices are non-negative)")
    return np.array([int(v) for v in flat], dtype=target).reshape(items.shape)


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
