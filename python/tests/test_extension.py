"""The compiled extension mnemo._mnemo_ext: loaded next to the library under
test and linked with it, its surface checked against mnemo.h and the ctypes
mirrors, and its argument checks: a refused argument raises MnemoTypeError /
MnemoValueError (or the library's MnemoError) with the status, and nothing is
written to the outputs (poisoned before each call)."""

from __future__ import annotations

import ctypes
import os
import re
import threading
from pathlib import Path
from typing import Any, Tuple

import numpy as np
import pytest

import mnemo
import mnemo.store
import reference as ref
from conftest import CUDA_ON
from mnemo import Status, _cdefs, _lib, _native

HEADER = Path(__file__).resolve().parents[2] / "cabi" / "include" / "mnemo.h"
POISON_ID = 0xDEAD_BEEF_0BAD_F00D
POISON_SCORE = -7.25

ext = _native.ext


def test_extension_is_loaded_with_the_library_under_test() -> None:
    assert _native.AVAILABLE, _native.MISSING
    # Next to the library (a build tree) or in the package (a wheel).
    here = os.path.dirname(ext.__file__)
    assert here in (os.path.dirname(os.path.abspath(os.environ["MNEMO_LIBRARY"])),
                    os.path.dirname(mnemo.__file__))
    assert ext.library_address() == ctypes.cast(_lib.lib.mnemo_abi_version, ctypes.c_void_p).value
    assert ext.ABI_VERSION == mnemo.ABI_VERSION and ext.ALIGNMENT == mnemo.ALIGNMENT


def test_extension_surface() -> None:
    """What Python sees of the extension: these functions, these parameters."""
    want = {
        "configure": "make_error, numpy, aligned_empty",
        "search_host": "store, queries, k, opts, dim, out_ids, out_scores, strict, nprobe",
        "search_host_ptr": "store, queries, nq, k, opts, ids, scores",
        "search_device": "store, queries, nq, k, opts, ids, scores, stream, status, nprobe",
        "time_search_host": "store, queries, nq, k, ids, scores, reps",
        "search_options_layout": "",
        "pack_fields": "count, keys, namespaces, tags, attributes, payloads",
        "pack_keys": "keys",
        "project_plain": "metas, skip",
        "float32_rows": "rows, dim",
        "read_rows": "store, ids, scores, row_type, fields",
        "search_rows": "store, query, k, where, dim, fields, row_type",
        "search_rows_time": "",
        "read_memories": "store, ids, memory_type",
        "library_address": "",
    }
    constants = {"ABI_VERSION", "ALIGNMENT", "SEARCH_OPTIONS_SIZE", "C_FUNCTIONS"}
    public = {n for n in dir(ext) if not n.startswith("_")}
    assert public == set(want) | constants
    for name, params in want.items():
        doc = getattr(ext, name).__doc__ or ""
        got = re.match(rf"{name}\((.*?)\)\s*->", doc)
        assert got, f"{name}: {doc!r}"
        names = [p.split(":")[0].strip() for p in got.group(1).split(",") if p.strip()]
        assert ", ".join(names) == params, name


def test_extension_calls_are_functions_of_the_header() -> None:
    """The C functions the extension calls (compiled against mnemo.h, so the
    compiler checked them) exist in the header and in the ctypes prototypes."""
    if not HEADER.is_file():
        pytest.skip(f"{HEADER} is not here (tests run away from the source tree)")
    text = re.sub(r"/\*.*?\*/", " ", HEADER.read_text(), flags=re.S)
    declared = set(re.findall(r"MNEMO_API\s+[\w\s\*]+?\s*\b(mnemo_\w+)\s*\(", text))
    assert set(ext.C_FUNCTIONS) <= declared
    assert set(ext.C_FUNCTIONS) <= set(_cdefs.PROTOTYPES)


def test_search_options_layout_matches_the_ctypes_mirror() -> None:
    """The extension reads the ctypes mnemo_search_options the package fills:
    same size, and every field at the same offset with the same size."""
    layout = ext.search_options_layout()
    assert ext.SEARCH_OPTIONS_SIZE == ctypes.sizeof(_cdefs.SearchOptions)
    mirror = {name: (getattr(_cdefs.SearchOptions, name).offset,
                     getattr(_cdefs.SearchOptions, name).size)
              for name, _ in _cdefs.SearchOptions._fields_}
    assert layout == mirror


# Host argument checks.

def _store(rt: Any, rng: np.random.Generator, dim: int = 12) -> mnemo.Store:
    store = mnemo.Store(rt, dim, "f32", "dot")
    store.add(np.arange(20), ref.randn(rng, (20, dim)))
    return store


def _poisoned(shape: Tuple[int, ...]) -> Tuple[np.ndarray, np.ndarray]:
    ids = mnemo.aligned_empty(shape, np.uint64)
    scores = mnemo.aligned_empty(shape, np.float32)
    ids[...] = POISON_ID
    scores[...] = POISON_SCORE
    return ids, scores


def _untouched(ids: np.ndarray, scores: np.ndarray) -> None:
    assert np.all(ids == POISON_ID) and np.all(scores == POISON_SCORE)


def _misaligned(shape: Tuple[int, ...], dtype: Any) -> np.ndarray:
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    base = mnemo.aligned_zeros(n + 16, np.uint8)
    return base[4:4 + n].view(dtype).reshape(shape)


def _bad_queries(rng: np.random.Generator) -> list:
    q = ref.randn(rng, (2, 12))
    return [
        ("wrong dtype", q.astype(np.float64), TypeError, Status.E_DTYPE, "dtype float64"),
        ("wrong dimension", ref.randn(rng, (2, 11)), ValueError, Status.E_SHAPE,
         "dimension 11; the store has 12"),
        ("three dimensions", ref.randn(rng, (1, 2, 12)), ValueError, Status.E_SHAPE,
         "3 dimensions"),
        ("misaligned", _misaligned((2, 12), np.float32), ValueError, Status.E_MISALIGNED,
         "16-byte aligned"),
        ("strided", ref.randn(rng, (2, 24))[:, ::2], ValueError, Status.E_INVALID_ARGUMENT,
         "C-contiguous"),
        ("not an array", [[0.0] * 12] * 2, TypeError, Status.E_DTYPE, "numpy.ndarray"),
    ]


def test_refused_queries_write_nothing(cpu_rt, rng) -> None:
    store = _store(cpu_rt, rng)
    for what, bad, error, status, text in _bad_queries(rng):
        ids, scores = _poisoned((2, 3))
        # The fast path declines (None) without calling; strict mode raises.
        assert ext.search_host(store.handle, bad, 3, None, 12, ids, scores, False) is None, what
        with pytest.raises(error, match=text) as exc:
            ext.search_host(store.handle, bad, 3, None, 12, ids, scores, True)
        assert exc.value.status == status, what
        _untouched(ids, scores)


@pytest.mark.parametrize("which", ["out_ids", "out_scores"])
def test_refused_outputs_write_nothing(cpu_rt, rng, which) -> None:
    store = _store(cpu_rt, rng)
    q = ref.randn(rng, (2, 12))
    good_dtype = np.uint64 if which == "out_ids" else np.float32
    wrong_dtype = np.int64 if which == "out_ids" else np.float64
    read_only = mnemo.aligned_empty((2, 3), good_dtype)
    read_only.flags.writeable = False
    cases = [
        (mnemo.aligned_empty((2, 3), wrong_dtype), TypeError, Status.E_DTYPE, "dtype"),
        (mnemo.aligned_empty((2, 4), good_dtype), ValueError, Status.E_SHAPE, r"shape \(2, 4\)"),
        (mnemo.aligned_empty((6,), good_dtype), ValueError, Status.E_SHAPE, r"expected \(2, 3\)"),
        (_misaligned((2, 3), good_dtype), ValueError, Status.E_MISALIGNED, "aligned"),
        (read_only, ValueError, Status.E_INVALID_ARGUMENT, "read-only"),
    ]
    for bad, error, status, text in cases:
        ids, scores = _poisoned((2, 3))
        args = {"out_ids": ids, "out_scores": scores, which: bad}
        assert ext.search_host(store.handle, q, 3, None, 12, args["out_ids"],
                               args["out_scores"], False) is None
        with pytest.raises(error, match=f"{which} .*{text}") as exc:
            ext.search_host(store.handle, q, 3, None, 12, args["out_ids"], args["out_scores"],
                            True)
        assert exc.value.status == status
        _untouched(ids, scores)
        # Store.search raises the same kind of error, through either path.
        with pytest.raises(error) as exc:
            store.search(q, 3, **args)
        assert exc.value.status == status
        _untouched(ids, scores)


def test_bad_k_and_options(cpu_rt, rng) -> None:
    store = _store(cpu_rt, rng)
    q = ref.randn(rng, (2, 12))
    ids, scores = _poisoned((2, 3))
    for k in (-1, 2**64, 3.0, True):
        assert ext.search_host(store.handle, q, k, None, 12, None, None, False) is None
    with pytest.raises(TypeError, match="search options"):
        ext.search_host(store.handle, q, 3, object(), 12, ids, scores, True)

    class Short(ctypes.Structure):
        _fields_ = [("struct_size", ctypes.c_uint32)]
    with pytest.raises(ValueError, match="search options hold 4 bytes") as exc:
        ext.search_host(store.handle, q, 3, Short(), 12, ids, scores, True)
    assert exc.value.status == Status.E_INVALID_ARGUMENT
    _untouched(ids, scores)
    # k = 0 reaches the library, which refuses it with its own message.
    empty_ids, empty_scores = _poisoned((2, 0))
    with pytest.raises(mnemo.MnemoError) as exc:
        store.search(q, 0, out_ids=empty_ids, out_scores=empty_scores)
    assert exc.value.status == Status.E_INVALID_ARGUMENT and exc.value.message


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_query_is_the_librarys_error_with_its_text(cpu_rt, rng, bad) -> None:
    store = _store(cpu_rt, rng)
    q = ref.randn(rng, (2, 12))
    q[1, 5] = bad
    ids, scores = _poisoned((2, 3))
    with pytest.raises(mnemo.MnemoError) as exc:
        store.search(q, 3, out_ids=ids, out_scores=scores)
    assert exc.value.status == Status.E_NON_FINITE
    assert exc.value.status_name == "MNEMO_E_NON_FINITE"
    assert "quer" in exc.value.message  # mnemo_last_error() names the argument
    assert type(exc.value) is mnemo.MnemoError
    _untouched(ids, scores)
    with pytest.raises(mnemo.MnemoError, match="NON_FINITE"):
        store.search(q[1], 3)  # new outputs: nothing returned


def test_error_text_is_read_on_the_calling_thread(cpu_rt, rng) -> None:
    """Each thread's failure carries its own message, though other threads
    fail differently at the same time (mnemo_last_error is thread-local)."""
    store = _store(cpu_rt, rng)
    nan_q = ref.randn(rng, (12,))
    nan_q[0] = np.nan
    good_q = ref.randn(rng, (12,))
    errors: dict = {"nan": [], "k0": []}

    def run(kind: str) -> None:
        for _ in range(300):
            try:
                if kind == "nan":
                    store.search(nan_q, 2)
                else:
                    store.search(good_q, 0)
            except mnemo.MnemoError as exc:
                errors[kind].append((exc.status, exc.message))

    threads = [threading.Thread(target=run, args=(k,)) for k in ("nan", "k0", "nan", "k0")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    nan_texts = {e for e in errors["nan"]}
    k0_texts = {e for e in errors["k0"]}
    assert len(errors["nan"]) == 600 and len(errors["k0"]) == 600
    assert {s for s, _ in nan_texts} == {Status.E_NON_FINITE} and len(nan_texts) == 1
    assert {s for s, _ in k0_texts} == {Status.E_INVALID_ARGUMENT} and len(k0_texts) == 1


def test_fast_path_results_equal_the_converting_path(cpu_rt, rng) -> None:
    store = _store(cpu_rt, rng)
    q = ref.randn(rng, (3, 12))
    fast = store.search(q, 4)
    slow = store.search(q.tolist(), 4)  # a list: converted, then the same call
    assert np.array_equal(fast[0], slow[0]) and np.array_equal(fast[1], slow[1])
    assert fast[0].dtype == np.uint64 and fast[1].dtype == np.float32
    assert fast[0].ctypes.data % 16 == 0 and fast[1].ctypes.data % 16 == 0
    one = store.search(q[1], 4)
    assert one[0].shape == (4,) and np.array_equal(one[0], fast[0][1])
    ids, scores = _poisoned((3, 4))
    got = store.search(q, 4, out_ids=ids, out_scores=scores)
    assert got[0] is ids and got[1] is scores and np.array_equal(ids, fast[0])
    # More results than vectors: padding as the library writes it.
    pad_ids, pad_scores = store.search(q[0], 25)
    assert np.all(pad_ids[20:] == mnemo.NO_ID) and np.all(np.isnan(pad_scores[20:]))


def test_closed_store_is_refused(cpu_rt, rng) -> None:
    store = _store(cpu_rt, rng)
    q = ref.randn(rng, (12,))
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.search(q, 2)


def test_missing_extension_raises_on_search_only(cpu_rt, rng, monkeypatch) -> None:
    store = _store(cpu_rt, rng)
    monkeypatch.setattr(mnemo.store, "_ext", _native._Missing("no extension here"))
    with pytest.raises(mnemo.LibraryLoadError, match="no extension here"):
        store.search(ref.randn(rng, (12,)), 2)
    assert store.count() == 20  # the ctypes calls still work


def test_bad_stream_is_refused_before_the_call(cpu_rt, rng) -> None:
    """search_device takes the stream as a cudaStream_t int: anything else is
    refused before the library is called (host memory here: never read)."""
    store = _store(cpu_rt, rng)
    q = ref.randn(rng, (12,))
    ids, scores = _poisoned((3,))
    for stream in (-1, "stream", None, 2**64):
        with pytest.raises(TypeError):
            ext.search_device(store.handle, q.ctypes.data, 1, 3, None, ids.ctypes.data,
                              scores.ctypes.data, stream)
    _untouched(ids, scores)


# Device argument checks (torch CUDA tensors on a CUDA runtime).

@pytest.fixture(scope="module")
def torch_cuda() -> Any:
    if not CUDA_ON:
        pytest.skip("CUDA cases run only with MNEMO_TEST_CUDA=1")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    return torch


@pytest.fixture(scope="module")
def cuda_store(torch_cuda: Any) -> Any:
    rt = mnemo.Runtime(backend="cuda")
    rng = np.random.default_rng(11)
    store = mnemo.Store(rt, 12, "f32", "dot")
    store.add(np.arange(50), ref.randn(rng, (50, 12)))
    yield store
    store.close()
    rt.close()


def _device_poisoned(torch: Any, shape: Tuple[int, ...]) -> Tuple[Any, Any]:
    return (torch.full(shape, -3, dtype=torch.int64, device="cuda"),
            torch.full(shape, POISON_SCORE, dtype=torch.float32, device="cuda"))


def _device_untouched(torch: Any, ids: Any, scores: Any) -> None:
    torch.cuda.synchronize()
    assert bool((ids == -3).all()) and bool((scores == POISON_SCORE).all())


def test_device_fast_path_matches_host(torch_cuda, cuda_store, monkeypatch) -> None:
    torch = torch_cuda
    rng = np.random.default_rng(3)
    q = ref.randn(rng, (4, 12))
    want_ids, want_scores = cuda_store.search(q, 5)
    calls = []
    real = mnemo.store._ext

    class Spy:
        def __getattr__(self, name: str) -> Any:
            fn = getattr(real, name)
            return lambda *a: (calls.append((name, a)), fn(*a))[1]
    monkeypatch.setattr(mnemo.store, "_ext", Spy())
    qd = torch.from_numpy(q).cuda()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        ids, scores = cuda_store.search(qd, 5)
    torch.cuda.synchronize()
    name, args = calls[-1]
    assert name == "search_device" and args[1] == qd.data_ptr() and args[7] == side.cuda_stream
    assert np.array_equal(ids.cpu().numpy().view(np.uint64), want_ids)
    assert np.allclose(scores.cpu().numpy(), want_scores, atol=2e-5)
    # Given outputs, twice (the second time their checks are cached).
    out_ids, out_scores = _device_poisoned(torch, (4, 5))
    for _ in range(2):
        got = cuda_store.search(qd, 5, out_ids=out_ids, out_scores=out_scores)
        assert got[0] is out_ids and got[1] is out_scores
    torch.cuda.synchronize()
    assert np.array_equal(out_ids.cpu().numpy().view(np.uint64), want_ids)


def test_device_refusals_write_nothing(torch_cuda, cuda_store) -> None:
    torch = torch_cuda
    rng = np.random.default_rng(4)
    q = torch.from_numpy(ref.randn(rng, (2, 12))).cuda()
    ids, scores = _device_poisoned(torch, (2, 3))
    cases = [
        # wrong dtype (copy=False: no conversion allowed)
        (dict(queries=q.double(), copy=False), TypeError, Status.E_DTYPE),
        # wrong device: outputs in host memory
        (dict(queries=q, out_ids=ids.cpu(), out_scores=scores), ValueError,
         Status.E_INVALID_ARGUMENT),
        # wrong shape: of the outputs, of the queries
        (dict(queries=q, out_ids=ids[:, :2], out_scores=scores[:, :2]), ValueError,
         Status.E_INVALID_ARGUMENT),
        (dict(queries=q[:, :11]), ValueError, Status.E_SHAPE),
        # misaligned (4 bytes into the buffer), copy=False
        (dict(queries=torch.zeros(25, device="cuda")[1:13], copy=False), ValueError,
         Status.E_INVALID_ARGUMENT),
        # wrong output dtype
        (dict(queries=q, out_ids=ids.float(), out_scores=scores), ValueError,
         Status.E_INVALID_ARGUMENT),
    ]
    for kwargs, error, status in cases:
        queries = kwargs.pop("queries")
        kwargs.setdefault("out_ids", ids)
        kwargs.setdefault("out_scores", scores)
        with pytest.raises(error) as exc:
            cuda_store.search(queries, 3, **kwargs)
        assert exc.value.status == status, kwargs
        _device_untouched(torch, ids, scores)


def test_device_nan_query(torch_cuda, cuda_store) -> None:
    """A NaN query never yields a silent answer. From a torch tensor with the
    default options the check runs inside the search: the bad query's row
    is padding (ids -1, scores NaN), the other rows are the host search's,
    and device_status() says E_NON_FINITE, then OK after a clean search.
    Through the general path (a conversion) it raises before the search,
    writing nothing."""
    torch = torch_cuda
    qh = ref.randn(np.random.default_rng(5), (3, 12))
    want_ids, want_scores = cuda_store.search(qh, 3)
    q = torch.from_numpy(qh).cuda()
    assert cuda_store.device_status() == Status.OK
    for bad in (float("nan"), float("inf")):
        q[1, 3] = bad
        ids, scores = _device_poisoned(torch, (3, 3))
        got = cuda_store.search(q, 3, out_ids=ids, out_scores=scores)
        assert got[0] is ids
        assert cuda_store.device_status() == Status.E_NON_FINITE
        host_ids = ids.cpu().numpy().view(np.uint64)
        assert (host_ids[1] == mnemo.NO_ID).all() and bool(scores[1].isnan().all())
        for row in (0, 2):
            assert np.array_equal(host_ids[row], want_ids[row])
            assert np.array_equal(scores[row].cpu().numpy(), want_scores[row])
        cuda_store.search(torch.from_numpy(qh).cuda(), 3)
        assert cuda_store.device_status() == Status.OK
    ids, scores = _device_poisoned(torch, (3, 3))
    with pytest.raises(mnemo.MnemoError) as exc:
        cuda_store.search(q.double(), 3, out_ids=ids, out_scores=scores)
        torch.cuda.synchronize()
    assert exc.value.status == Status.E_NON_FINITE
    _device_untouched(torch, ids, scores)


# The torch fast path's logic, without torch or a GPU: a stand-in "torch"
# whose tensors are host arrays that say they are on CUDA device 0, a runtime
# that reports the CUDA backend, and search_device running the host call.

class _FakeDtype:
    def __init__(self, name: str, np_dtype: Any) -> None:
        self.name, self.np = name, np.dtype(np_dtype)


class _FakeTorch:
    float32 = _FakeDtype("float32", np.float32)
    float64 = _FakeDtype("float64", np.float64)
    int64 = _FakeDtype("int64", np.int64)
    int32 = _FakeDtype("int32", np.int32)

    def __init__(self) -> None:
        torch = self

        class Tensor:
            def __init__(self, a: np.ndarray, dtype: _FakeDtype) -> None:
                self.a, self.dtype, self.is_cuda = a, dtype, True

            def get_device(self) -> int:
                return 0

            @property
            def device(self) -> str:
                return "cuda:0"

            def dim(self) -> int:
                return self.a.ndim

            def size(self, i: int) -> int:
                return self.a.shape[i]

            @property
            def shape(self) -> tuple:
                return self.a.shape

            def data_ptr(self) -> int:
                return self.a.ctypes.data

            def is_contiguous(self) -> bool:
                return self.a.flags.c_contiguous

            def new_empty(self, shape: tuple, dtype: Any = None) -> "Tensor":
                dt = dtype or self.dtype
                return Tensor(mnemo.aligned_empty(shape, dt.np), dt)

        Tensor.__module__ = "torch"
        self.Tensor = Tensor
        self.streams: list = []

        def raw_stream(device: int) -> int:
            torch.streams.append(device)
            return 0x5100 + device
        self._C = type("C", (), {"_cuda_getCurrentRawStream": staticmethod(raw_stream)})

    def zeros(self, n: int, dtype: _FakeDtype, device: Any) -> Any:
        return self.Tensor(mnemo.aligned_empty((n,), dtype.np), dtype)

    def tensor(self, a: np.ndarray) -> Any:
        dt = {np.dtype(np.float32): self.float32, np.dtype(np.float64): self.float64,
              np.dtype(np.int64): self.int64}[a.dtype]
        return self.Tensor(a, dt)


class _CudaRuntime:
    def __init__(self, rt: Any) -> None:
        self.handle = rt.handle
        import weakref
        self._stores: Any = weakref.WeakSet()

    def active_backend(self) -> tuple:
        return (int(mnemo.Backend.CUDA), 0)


class _DeviceExt:
    def __init__(self) -> None:
        self.calls: list = []

    def search_device(self, *args: Any) -> None:
        self.calls.append(args)
        store, queries, nq, k, opts, ids, scores = args[:7]
        nprobe = args[9] if len(args) > 9 else 0
        if nprobe:
            # What the extension does: the defaults (or a copy of opts) with nprobe.
            probed = _lib.lib.mnemo_search_options_default()
            if opts is not None:
                ctypes.memmove(ctypes.byref(probed), ctypes.byref(opts), ctypes.sizeof(probed))
            probed.nprobe = nprobe
            opts = probed
        ext.search_host_ptr(store, queries, nq, k, opts, ids, scores)

    def __getattr__(self, name: str) -> Any:
        return getattr(ext, name)


def test_torch_fast_path_logic(cpu_rt, rng, monkeypatch) -> None:
    import sys
    torch = _FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    dev_ext = _DeviceExt()
    monkeypatch.setattr(mnemo.store, "_ext", dev_ext)
    monkeypatch.setattr(mnemo.store, "_torch_raw_stream", None)
    store = mnemo.Store(_CudaRuntime(cpu_rt), 12, "f32", "dot")
    store.add(np.arange(20), ref.randn(rng, (20, 12)))
    q = ref.randn(rng, (3, 12))
    want_ids, want_scores = store.search(q, 4)
    fast = mnemo.store._fast_path_for(torch.Tensor)
    assert fast is mnemo.store._search_torch

    qt = torch.tensor(q)
    ids, scores = fast(store, store.handle, qt, 4, None, None)
    (h, qp, nq, k, opts, ip, sp, stream, status, nprobe), = dev_ext.calls
    assert (h, qp, nq, k, opts, stream, nprobe) == (store.handle, q.ctypes.data, 3, 4, None, 0x5100, 0)
    # The query check inside the search, its verdict in the store's status word.
    assert status == store._torch_status.data_ptr() and status % mnemo.ALIGNMENT == 0
    assert (ip, sp) == (ids.data_ptr(), scores.data_ptr())
    assert ids.dtype is torch.int64 and scores.dtype is torch.float32
    assert np.array_equal(ids.a.view(np.uint64), want_ids) and np.array_equal(scores.a, want_scores)
    one, _ = fast(store, store.handle, torch.tensor(q[1].copy()), 4, None, None)
    assert one.shape == (4,) and np.array_equal(one.a.view(np.uint64), want_ids[1])

    # Given outputs: checked once, then taken while the same ones come back.
    out_ids = torch.tensor(mnemo.aligned_zeros((3, 4), np.int64))
    out_scores = torch.tensor(mnemo.aligned_zeros((3, 4), np.float32))
    for _ in range(2):
        got = fast(store, store.handle, qt, 4, out_ids, out_scores)
        assert got[0] is out_ids and got[1] is out_scores
    assert store._torch_outs[0] is out_ids
    assert np.array_equal(out_ids.a.view(np.uint64), want_ids)

    # Declined, with nothing called: the general path decides.
    n = len(dev_ext.calls)
    declined = [
        (torch.tensor(q.astype(np.float64)), 4, None, None),          # dtype
        (torch.tensor(ref.randn(rng, (3, 11))), 4, None, None),       # dimension
        (torch.tensor(ref.randn(rng, (3, 24))[:, ::2]), 4, None, None),  # strided
        (qt, -1, None, None), (qt, True, None, None), (qt, 2**64, None, None),  # k
        (qt, 4, out_ids, None),                                         # one output only
        (qt, 4, torch.tensor(mnemo.aligned_zeros((3, 5), np.int64)), out_scores),  # shape
        (qt, 4, torch.tensor(mnemo.aligned_zeros((3, 4), np.float32)), out_scores),  # dtype
        (torch.tensor(mnemo.aligned_zeros((0, 12), np.float32)), 4, None, None),  # no query
    ]
    for args in declined:
        assert fast(store, store.handle, *args) is None
    assert len(dev_ext.calls) == n
    host = qt.a
    qt.is_cuda = False
    assert fast(store, store.handle, qt, 4, None, None) is None
    qt.a = host


def test_fast_path_table_ignores_other_types() -> None:
    class Other:
        pass
    assert mnemo.store._fast_path_for(Other) is None
    assert mnemo.store._FAST_PATHS[Other] is None


def test_torch_fast_path_passes_nprobe(cpu_rt, rng, monkeypatch) -> None:
    """Store.search(torch tensor, nprobe=n) takes the torch fast path and
    hands n to search_device (the library's answer then matches the host
    search at the same nprobe, not the exact one)."""
    import sys
    torch = _FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    dev_ext = _DeviceExt()
    monkeypatch.setattr(mnemo.store, "_ext", dev_ext)
    monkeypatch.setattr(mnemo.store, "_torch_raw_stream", None)
    monkeypatch.setattr(mnemo.store, "_FAST_PATHS", {})
    store = mnemo.Store(_CudaRuntime(cpu_rt), 12, "f32", "dot")
    store.add(np.arange(1500), ref.randn(rng, (1500, 12)))
    store.build_index(nlist=16, background=False)
    q = ref.randn(rng, (20, 12))
    exact = store.search(q, 10)
    host = store.search(q, 10, nprobe=1)
    assert not np.array_equal(host[0], exact[0])
    ids, scores = store.search(torch.tensor(q), 10, nprobe=1)
    assert dev_ext.calls[-1][9] == 1
    assert np.array_equal(ids.a.view(np.uint64), host[0])
    assert np.array_equal(scores.a, host[1])
