"""GPU tensors of other frameworks (PyTorch, CuPy, anything exposing
__cuda_array_interface__) passed to the `_device` entry points without a
copy.

The inputs' device pointers go to the library as they are; the work is
queued on the producer's current stream (torch.cuda.current_stream() for a
torch tensor, cupy.cuda.get_current_stream() for CuPy, the default stream
otherwise), and outputs are allocated by the producer's own framework on the
same device, so results come back as that framework's tensors, ready in
stream order like the framework's own kernels. Nothing waits on the host.
Result ids are int64 tensors for torch (its index type; NO_ID reads as -1)
and uint64 arrays for CuPy.
"""

from __future__ import annotations

import sys
from typing import Any, Optional, Sequence, Tuple

from .enums import DType, Status
from .errors import MnemoTypeError, MnemoValueError

# __cuda_array_interface__ typestr -> mnemo dtype (bf16 has no typestr).
_TYPESTR = {"<f4": DType.F32, "<f2": DType.F16, "<u8": DType.U64, "<u4": DType.U32}
_ITEMSIZE = {DType.F32: 4, DType.F16: 2, DType.U64: 8, DType.U32: 4}


def _framework(obj: Any) -> str:
    mod = type(obj).__module__.split(".")[0]
    return mod if mod in ("torch", "cupy") else "other"


def is_device_tensor(obj: Any) -> bool:
    """True for an object living in GPU memory (CUDA array interface, or a
    torch tensor on a CUDA device)."""
    if _framework(obj) == "torch":
        return bool(getattr(obj, "is_cuda", False))
    return hasattr(obj, "__cuda_array_interface__")


class DeviceArray:
    """What the library needs of one device tensor: pointer, shape, dtype."""

    def __init__(self, obj: Any, name: str) -> None:
        self.obj = obj
        self.framework = _framework(obj)
        if self.framework == "torch":
            self._from_torch(obj, name)
            return
        try:
            cai = obj.__cuda_array_interface__
        except AttributeError:
            raise MnemoTypeError(Status.E_DTYPE, f"{name} exposes no __cuda_array_interface__")
        self.shape: Tuple[int, ...] = tuple(int(s) for s in cai["shape"])
        typestr = cai["typestr"]
        if typestr in _TYPESTR:
            self.dtype = _TYPESTR[typestr]
        else:
            raise MnemoTypeError(Status.E_DTYPE, f"{name} has device dtype {typestr}")
        itemsize = 2 if self.dtype == DType.BF16 else _ITEMSIZE[self.dtype]
        strides = cai.get("strides")
        if strides is not None:
            want, acc = [], itemsize
            for s in reversed(self.shape):
                want.append(acc)
                acc *= s
            if any(d > 1 and st != w for d, st, w in zip(self.shape, strides, reversed(want))):
                raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                                      f"{name} is not C-contiguous on the device "
                                      "(call .contiguous() first: a device copy)")
        self.ptr: int = int(cai["data"][0])

    def _from_torch(self, t: Any, name: str) -> None:
        # The tensor's own attributes: its array interface knows neither
        # bfloat16 nor uint64, and refuses tensors that require grad.
        torch = sys.modules["torch"]
        dtypes = {torch.float32: DType.F32, torch.float16: DType.F16,
                  torch.bfloat16: DType.BF16, torch.int64: DType.U64}
        if t.dtype not in dtypes:
            raise MnemoTypeError(Status.E_DTYPE, f"{name} has device dtype {t.dtype}")
        self.dtype = dtypes[t.dtype]
        self.shape = tuple(int(s) for s in t.shape)
        if not t.is_contiguous():
            raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                                  f"{name} is not C-contiguous on the device "
                                  "(call .contiguous() first: a device copy)")
        self.ptr = int(t.data_ptr())


def stream_of(t: DeviceArray) -> Optional[int]:
    """The producer's current stream as a cudaStream_t value (None: default)."""
    if t.framework == "torch":
        torch = sys.modules["torch"]
        return int(torch.cuda.current_stream(t.obj.device).cuda_stream) or None
    if t.framework == "cupy":
        cupy = sys.modules["cupy"]
        return int(cupy.cuda.get_current_stream().ptr) or None
    return None


def empty_like_framework(t: DeviceArray, shape: Sequence[int], dtype: DType) -> Any:
    """An uninitialised output of the producer's framework on its device."""
    if t.framework == "torch":
        torch = sys.modules["torch"]
        # ids as int64, torch's index type (NO_ID reads as -1).
        tdt = {DType.F32: torch.float32, DType.U64: torch.int64}[dtype]
        return torch.empty(tuple(shape), dtype=tdt, device=t.obj.device)
    if t.framework == "cupy":
        cupy = sys.modules["cupy"]
        ndt = {DType.F32: "float32", DType.U64: "uint64"}[dtype]
        with t.obj.device:
            return cupy.empty(tuple(shape), dtype=ndt)
    raise MnemoTypeError(Status.E_DTYPE,
                         f"outputs for {type(t.obj).__name__} tensors cannot be allocated; "
                         "pass torch or CuPy arrays")
