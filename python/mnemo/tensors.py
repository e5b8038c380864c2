"""Tensors of other frameworks (PyTorch, CuPy, JAX, anything with
__cuda_array_interface__ or DLPack): where a call runs, on which stream, and
what it returns.

Rules (docs/python.md, "Arrays and tensors" and "Streams"):
- A CUDA tensor on a runtime whose active backend is CUDA (same device) goes
  to the `_device` entry point with its own pointer; the call is queued on
  the producer's stream: torch.cuda.current_stream() for PyTorch, the
  "stream" of __cuda_array_interface__ (v3) otherwise, else CuPy's current
  stream, else the default stream. Outputs are allocated by the producer's
  framework (torch.empty / cupy.empty) on that device and stream.
- A CUDA tensor on a CPU runtime is copied to the host, and the results
  copied back to the producer's device (copy=False refuses that).
- Host tensors (torch CPU, anything with a CPU __dlpack__) are read through
  numpy.from_dlpack without a copy; the results are numpy arrays handed to
  the producer's from_numpy / from_dlpack, so they share memory.
- Ids come back as uint64 where the framework has that dtype in full
  (numpy, CuPy) and as int64 for PyTorch, where MNEMO_NO_ID reads -1.
- JAX arrays are read through __cuda_array_interface__ once ready; their
  results are allocated by CuPy (else PyTorch), the call's stream is waited
  for, and they are handed to JAX with jax.dlpack.from_dlpack (64-bit ids
  need jax_enable_x64).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from .arrays import (ALIGNMENT, INDICES, VALUES, aligned_empty, check_array, check_shape,
                     host_input)
from .arrays import ptr as host_ptr
from .enums import Backend, Status
from .errors import MnemoTypeError, MnemoValueError

# DLPack device types.
_DL_CPU, _DL_CUDA, _DL_CUDA_MANAGED = 1, 2, 13

# torch dtype names -> the numpy dtype mnemo sees (uint16 holds bf16 bits).
_TORCH_TO_NUMPY = {
    "float32": np.float32, "float16": np.float16, "bfloat16": np.uint16,
    "float64": np.float64, "int64": np.int64, "int32": np.int32,
    "uint64": np.uint64, "uint32": np.uint32, "int16": np.int16, "uint8": np.uint8,
    "int8": np.int8,
}
# numpy dtype -> torch dtype name, for outputs and conversions.
_NUMPY_TO_TORCH = {
    np.dtype(np.float32): "float32", np.dtype(np.float16): "float16",
    np.dtype(np.uint16): "bfloat16", np.dtype(np.float64): "float64",
    np.dtype(np.uint64): "int64", np.dtype(np.int64): "int64",
    np.dtype(np.uint32): "int32", np.dtype(np.int32): "int32",
}


def framework_of(x: Any) -> str:
    """"torch", "cupy", "jax", "numpy", ...: the top-level module of x's type."""
    return type(x).__module__.split(".")[0] or "builtins"


def _module(name: str) -> Any:
    return importlib.import_module("jax.numpy" if name in ("jax", "jaxlib") else name)


def _cai(x: Any) -> Optional[dict]:
    try:
        return getattr(x, "__cuda_array_interface__", None)
    except Exception:  # torch: CPU tensors and tensors that require grad
        return None


def cuda_device(x: Any) -> Optional[int]:
    """The CUDA device ordinal of a GPU tensor; None for host data."""
    if x is None or isinstance(x, (np.ndarray, list, tuple, int, float)):
        return None
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None:
        try:
            kind, index = dev()
        except Exception:
            kind = None
        else:
            if int(kind) in (_DL_CUDA, _DL_CUDA_MANAGED):
                return int(index)
            if int(kind) == _DL_CPU:
                return None
    if framework_of(x) == "torch" and getattr(x, "is_cuda", False):
        return int(x.device.index or 0)
    if _cai(x) is not None:
        device = getattr(x, "device", None)
        return int(getattr(device, "id", 0) or 0)
    return None


@dataclass
class DeviceTensor:
    """A GPU tensor as the library sees it."""

    obj: Any  # the framework object; keeps the memory alive
    ptr: int
    shape: Tuple[int, ...]
    dtype: np.dtype  # uint16: bf16 bits
    contiguous: bool
    device: int
    lib: str
    cai_stream: Optional[int] = None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def ndim(self) -> int:
        return len(self.shape)


def describe(x: Any, name: str) -> DeviceTensor:
    """Pointer, shape, dtype and layout of a CUDA tensor."""
    lib = framework_of(x)
    device = cuda_device(x)
    assert device is not None
    if lib == "torch":
        t = x.detach()
        key = str(t.dtype).replace("torch.", "")
        if key not in _TORCH_TO_NUMPY:
            raise MnemoTypeError(Status.E_DTYPE, f"{name} has dtype {t.dtype}, which mnemo does not take")
        return DeviceTensor(t, int(t.data_ptr()), tuple(int(s) for s in t.shape),
                            np.dtype(_TORCH_TO_NUMPY[key]), bool(t.is_contiguous()), device, lib)
    if _is_jax(lib):
        # JAX computes asynchronously on its own streams: the buffer must be
        # ready before another stream reads it.
        x.block_until_ready()
    cai = _cai(x)
    if cai is None:
        raise MnemoTypeError(Status.E_DTYPE,
                             f"{name}: a {lib} CUDA array without __cuda_array_interface__ "
                             "(pass a torch or CuPy tensor)")
    shape = tuple(int(s) for s in cai["shape"])
    try:
        dtype = np.dtype(cai["typestr"])
    except TypeError:
        raise MnemoTypeError(Status.E_DTYPE, f"{name} has typestr {cai['typestr']!r}") from None
    strides = cai.get("strides")
    contiguous = strides is None or _c_strides(shape, dtype.itemsize) == tuple(strides) \
        or int(np.prod(shape, dtype=np.int64)) <= 1
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    return DeviceTensor(x, int(cai["data"][0] or 0), shape, dtype, contiguous, device, lib,
                        None if stream is None else int(stream))


def _is_jax(lib: str) -> bool:
    return lib in ("jax", "jaxlib")


def _allocator() -> str:
    """The framework that allocates device results for producers that
    cannot (JAX arrays are immutable): CuPy, else PyTorch."""
    for name in ("cupy", "torch"):
        try:
            importlib.import_module(name)
            return name
        except ImportError:
            continue
    raise MnemoTypeError(Status.E_DTYPE, "device results for JAX arrays need CuPy or PyTorch "
                         "installed to allocate them")


def _c_strides(shape: Tuple[int, ...], itemsize: int) -> Tuple[int, ...]:
    out, step = [], itemsize
    for s in reversed(shape):
        out.append(step)
        step *= max(s, 1)
    return tuple(reversed(out))


def _torch_dtype(dtype: np.dtype) -> Any:
    import torch
    return getattr(torch, _NUMPY_TO_TORCH[np.dtype(dtype)])


def producer_stream(t: DeviceTensor) -> int:
    """The cudaStream_t the producer's work is ordered on (0: the default)."""
    if t.lib == "torch":
        import torch
        return int(torch.cuda.current_stream(t.device).cuda_stream)
    if t.cai_stream is not None:
        # 1 is the legacy default stream (NULL); 2 (per-thread) is itself a handle.
        return 0 if t.cai_stream == 1 else t.cai_stream
    if t.lib == "cupy":
        import cupy
        with cupy.cuda.Device(t.device):
            return int(cupy.cuda.get_current_stream().ptr)
    return 0


def device_empty(like: DeviceTensor, shape: Tuple[int, ...], dtype: Any) -> DeviceTensor:
    """A new C-contiguous tensor of like's framework on like's device (CuPy
    or PyTorch for JAX, whose arrays are immutable)."""
    lib = _allocator() if _is_jax(like.lib) else like.lib
    if lib == "torch":
        import torch
        t = torch.empty(shape, dtype=_torch_dtype(dtype), device=torch.device("cuda", like.device))
    elif lib == "cupy":
        import cupy
        with cupy.cuda.Device(like.device):
            t = cupy.empty(shape, dtype=dtype)
    else:
        raise MnemoTypeError(Status.E_DTYPE,
                             f"mnemo allocates device results with torch or CuPy, not {like.lib}; "
                             "pass the inputs as torch or CuPy tensors")
    return describe(t, "output")


def device_convert(t: DeviceTensor, name: str, dtype: np.dtype) -> DeviceTensor:
    """One copy on the device, in t's framework: C-contiguous, aligned, dtype."""
    if t.lib == "torch":
        import torch
        out = t.obj.to(dtype=_torch_dtype(dtype), memory_format=torch.contiguous_format, copy=True)
    elif t.lib == "cupy":
        import cupy
        with cupy.cuda.Device(t.device):
            out = cupy.array(t.obj, dtype=dtype, order="C", copy=True)
    elif _is_jax(t.lib) and dtype != np.uint16:
        out = t.obj.astype(dtype)  # a new (contiguous, aligned) XLA buffer
    else:
        raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                              f"{name}: {t.lib} arrays must already be C-contiguous, "
                              f"{ALIGNMENT}-byte aligned and of an accepted dtype")
    return describe(out, name)


def to_host(t: DeviceTensor) -> np.ndarray:
    """A host copy of a device tensor (numpy; bf16 as uint16 bits)."""
    if t.lib == "torch":
        import torch
        x = t.obj
        if x.dtype == torch.bfloat16:
            x = x.view(torch.int16)
        host = x.cpu().numpy()
        return host.view(np.uint16) if t.dtype == np.uint16 else host
    if t.lib == "cupy":
        import cupy
        return cupy.asnumpy(t.obj)
    return np.asarray(t.obj)  # JAX and other producers that numpy can read


def to_device(a: np.ndarray, like: DeviceTensor) -> Any:
    """A copy of a host array as like's framework tensor on like's device."""
    if like.lib == "torch":
        import torch
        dev = torch.device("cuda", like.device)
        if a.dtype == np.uint16:
            return torch.from_numpy(a.view(np.int16)).to(dev).view(torch.bfloat16)
        if a.dtype == np.uint64:
            a = a.view(np.int64)
        elif a.dtype == np.uint32:
            a = a.view(np.int32)
        return torch.from_numpy(a).to(dev)
    if _is_jax(like.lib):
        import jax
        return jax.device_put(a, jax.devices("gpu")[like.device])
    import cupy
    with cupy.cuda.Device(like.device):
        return cupy.asarray(a)


def from_host(a: np.ndarray, lib: str) -> Any:
    """Host results as the producer's CPU tensors, sharing memory."""
    if lib not in ("torch", "jax", "jaxlib"):
        return a
    if lib == "torch":
        import torch
        if a.dtype == np.uint16:
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        if a.dtype == np.uint64:
            a = a.view(np.int64)
        return torch.from_numpy(a)
    return _module(lib).asarray(a)  # JAX on the CPU: its own copy


class Placement:
    """Where one call runs and what its results are.

    Built from the call's tensor arguments: the first CUDA tensor decides the
    device, framework and stream; with none, the call runs on the host and
    returns numpy arrays (or the primary input's CPU framework tensors).
    """

    def __init__(self, runtime: Any, primary: Any, others: Sequence[Any] = (),
                 copy: Optional[bool] = None, host: bool = False) -> None:
        """host=True: the entry point takes host memory only (store writes)."""
        self.copy = copy
        self.like: Optional[DeviceTensor] = None
        self.lib = framework_of(primary)
        for value in (primary, *others):
            dev = cuda_device(value)
            if dev is not None:
                self.like = describe(value, "input")
                self.lib = self.like.lib
                break
        self.on_device = False
        self.stream = 0
        if self.like is not None:
            self.on_device = not host and _runtime_on_cuda(runtime, self.like.device)
            if self.on_device:
                self.stream = producer_stream(self.like)
            elif copy is False:
                where = "takes host memory" if host else \
                    f"runs on a runtime without the CUDA backend of device {self.like.device}"
                raise MnemoValueError(Status.E_BACKEND_UNAVAILABLE,
                                      f"this call {where}: the CUDA tensor would be copied to "
                                      "the host; copy=False forbids it")

    def host_fallback(self) -> None:
        """Runs the call on the host after all (the store is held in host
        memory): inputs and results travel, unless copy=False."""
        if self.copy is False:
            raise MnemoValueError(Status.E_BACKEND_UNAVAILABLE,
                                  "the store is not held by a GPU; copy=False forbids "
                                  "copying the CUDA tensor to the host")
        self.on_device = False

    def input(self, value: Any, name: str, dtypes: Sequence[Any],
              ndim: Union[int, Tuple[int, ...], None] = None, kind: str = VALUES
              ) -> Union[np.ndarray, DeviceTensor]:
        """An input where the call runs: an aligned numpy array or a device
        tensor (signed device indices are passed as their unsigned twin)."""
        dev = cuda_device(value)
        if not self.on_device:
            if dev is not None:
                if self.copy is False:
                    raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                                          f"{name} is a CUDA tensor and the call runs on the "
                                          "host; copy=False forbids the copy")
                value = to_host(describe(value, name))
            return host_input(value, name, dtypes, ndim, kind=kind, copy=self.copy)
        if dev is None:
            host = host_input(value, name, dtypes, ndim, kind=kind, copy=self.copy)
            if self.copy is False:
                raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                                      f"{name} is in host memory and the call runs on the GPU; "
                                      "copy=False forbids the copy")
            moved = describe(to_device(host, self.like), name)
            moved.dtype = host.dtype  # torch holds uint64 as int64: same bits
            return moved
        assert self.like is not None
        t = describe(value, name)
        if dev != self.like.device:
            raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                                  f"{name} is on CUDA device {dev}, the call on device {self.like.device}")
        if ndim is not None:
            allowed = (ndim,) if isinstance(ndim, int) else ndim
            if t.ndim not in allowed:
                raise MnemoValueError(Status.E_SHAPE, f"{name} has {t.ndim} dimensions (shape "
                                      f"{t.shape}); expected " + " or ".join(map(str, allowed)))
        accepted = [np.dtype(d) for d in dtypes]
        target = t.dtype
        if kind == INDICES:
            if t.dtype.kind not in "iu":
                raise MnemoTypeError(Status.E_DTYPE, f"{name} has dtype {t.dtype}; expected integers")
            # Same bits: a negative value reads as one >= 2**63 (2**31), which
            # the library refuses as out of range.
            twin = {8: np.dtype(np.uint64), 4: np.dtype(np.uint32)}.get(t.dtype.itemsize)
            target = twin if twin in accepted else accepted[0]
            if twin == target:
                t.dtype = target
        elif t.dtype not in accepted:
            if t.dtype.kind not in "fiu":
                raise MnemoTypeError(Status.E_DTYPE, f"{name} has dtype {t.dtype}; expected numbers")
            target = accepted[0]
        problem = None
        if target != t.dtype:
            problem = f"has dtype {t.dtype}, not {', '.join(map(str, accepted))}"
        elif not t.contiguous:
            problem = "is not C-contiguous"
        elif t.size and t.ptr % ALIGNMENT:
            problem = f"data at {t.ptr:#x} is not {ALIGNMENT}-byte aligned"
        if problem is None:
            return t
        if self.copy is False:
            cls = MnemoTypeError if target != t.dtype else MnemoValueError
            raise cls(Status.E_DTYPE if target != t.dtype else Status.E_INVALID_ARGUMENT,
                      f"{name} {problem}; copy=False forbids the conversion")
        converted = device_convert(t, name, target)
        converted.dtype = target  # torch holds uint64 indices as int64: same bits
        return converted

    def output(self, out: Any, name: str, shape: Tuple[int, ...], dtype: Any
               ) -> Union[np.ndarray, DeviceTensor]:
        """A result buffer: `out` after checking it, or a new one."""
        if not self.on_device:
            if out is None:
                return aligned_empty(shape, dtype)
            a = check_array(out, name, [dtype], writable=True)
            check_shape(a, name, shape)
            return a
        assert self.like is not None
        if out is None:
            return device_empty(self.like, shape, dtype)
        t = describe(out, name) if cuda_device(out) is not None else None
        if t is None or t.device != self.like.device:
            raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                                  f"{name} must be a CUDA tensor on device {self.like.device}")
        want = np.dtype(dtype)
        same = t.dtype == want or (want.kind == "u" and t.dtype.kind == "i"
                                   and t.dtype.itemsize == want.itemsize)
        if not same or not t.contiguous or t.ptr % ALIGNMENT or t.shape != tuple(shape):
            raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                                  f"{name} must be a C-contiguous, {ALIGNMENT}-byte aligned "
                                  f"{want} tensor of shape {tuple(shape)}")
        return t

    def result(self, value: Union[np.ndarray, DeviceTensor]) -> Any:
        """What the caller gets back."""
        if isinstance(value, DeviceTensor):
            if self.like is not None and _is_jax(self.like.lib):
                return _to_jax(value, self.stream)
            return value.obj
        if self.like is not None:  # a device tensor computed on the host
            return to_device(value, self.like)
        return from_host(value, self.lib)


def _to_jax(t: DeviceTensor, stream: int) -> Any:
    """A result allocated by CuPy or PyTorch handed to JAX through DLPack,
    once the call's stream has finished (JAX does not order work on it)."""
    import jax
    import jax.dlpack
    x64 = jax.dtypes.canonicalize_dtype(np.int64) == np.dtype(np.int64)
    if t.dtype.itemsize == 8 and t.dtype.kind in "iu" and not x64:
        raise MnemoTypeError(Status.E_DTYPE, "the ids are 64-bit: enable jax_enable_x64 to "
                             "receive them as JAX arrays, or pass torch or CuPy tensors")
    if t.lib == "cupy":
        import cupy
        cupy.cuda.ExternalStream(stream).synchronize()
    else:
        import torch
        if stream:
            torch.cuda.ExternalStream(stream).synchronize()
        else:
            torch.cuda.synchronize(t.device)
    return jax.dlpack.from_dlpack(t.obj)


def _runtime_on_cuda(runtime: Any, device: int) -> bool:
    backend, dev = runtime.active_backend()
    return backend == Backend.CUDA and dev == device


def ptr(value: Any) -> Optional[int]:
    """The pointer to pass for a host array or a device tensor."""
    if isinstance(value, DeviceTensor):
        return value.ptr
    return host_ptr(value)
