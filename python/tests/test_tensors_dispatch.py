"""The CUDA-tensor path on a machine without a GPU: a stand-in "cupy" whose
arrays live in host memory but say they are on CUDA device 0, a runtime that
reports the CUDA backend, and a library whose `_device` functions run the
host ones and record the stream. Checks where each call goes, with which
pointers and stream, the conversions in the producer's framework, copy=False
and the results (against the plain host path)."""

from __future__ import annotations

import sys
import types
import weakref
from typing import Any, Dict, List

import numpy as np
import pytest

import mnemo
import mnemo.ops
import mnemo.store
import reference as ref
from mnemo import Backend, Status

STREAM = 0x5F00


class FakeArray:
    """A "cupy" array: host memory described as CUDA memory of device 0."""

    __module__ = "cupy"

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        a = self.a
        return {"shape": a.shape, "typestr": a.dtype.str, "version": 3, "stream": STREAM,
                "data": (a.ctypes.data, False),
                "strides": None if a.flags.c_contiguous else a.strides}

    def __dlpack_device__(self) -> tuple:
        return (2, 0)

    def __getitem__(self, key: Any) -> "FakeArray":
        return FakeArray(self.a[key])

    @property
    def shape(self) -> tuple:
        return self.a.shape


class _Device:
    def __init__(self, i: int) -> None:
        assert i == 0

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def fake_cupy() -> types.ModuleType:
    m = types.ModuleType("cupy")
    m.empty = lambda shape, dtype: FakeArray(mnemo.aligned_empty(shape, dtype))  # type: ignore
    m.array = lambda x, dtype, order, copy: FakeArray(  # type: ignore
        mnemo.aligned_array(x.a, dtype, copy=True))
    m.asnumpy = lambda x: x.a.copy()  # type: ignore
    m.asarray = lambda a: FakeArray(mnemo.aligned_array(a, copy=True))  # type: ignore
    cuda = types.SimpleNamespace(Device=_Device,
                                 get_current_stream=lambda: types.SimpleNamespace(ptr=STREAM))
    m.cuda = cuda  # type: ignore
    return m


class DeviceLib:
    """The library, with each `_device` function running the host one."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self.calls: Dict[str, List[tuple]] = {}

    def __getattr__(self, name: str) -> Any:
        if name.endswith("_device"):
            host = getattr(self._lib, name[:-len("_device")])

            def device(*args: Any) -> Any:
                self.calls.setdefault(name, []).append(args)
                return host(*args[:-1])
            return device
        fn = getattr(self._lib, name)

        def call(*args: Any) -> Any:
            self.calls.setdefault(name, []).append(args)
            return fn(*args)
        return call


class DeviceExt:
    """The compiled extension, with search_device running the host call on
    the same pointers (recorded under the C function's name)."""

    def __init__(self, ext: Any, calls: Dict[str, List[tuple]]) -> None:
        self._ext = ext
        self.calls = calls

    def __getattr__(self, name: str) -> Any:
        if name == "search_device":
            def device(*args: Any) -> Any:
                self.calls.setdefault("mnemo_store_search_device", []).append(args)
                return self._ext.search_host_ptr(*args[:-1])
            return device
        return getattr(self._ext, name)


class CudaRuntime:
    """A CPU runtime that says it is CUDA device 0."""

    def __init__(self, rt: mnemo.Runtime) -> None:
        self.handle = rt.handle
        self._stores: "weakref.WeakSet[Any]" = weakref.WeakSet()

    def active_backend(self) -> tuple:
        return (int(Backend.CUDA), 0)


@pytest.fixture
def dev(monkeypatch: pytest.MonkeyPatch, cpu_rt) -> Any:
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    lib = DeviceLib(mnemo.ops.lib)
    monkeypatch.setattr(mnemo.ops, "lib", lib)
    monkeypatch.setattr(mnemo.store, "lib", lib)
    monkeypatch.setattr(mnemo.store, "_ext", DeviceExt(mnemo.store._ext, lib.calls))
    return types.SimpleNamespace(lib=lib, rt=CudaRuntime(cpu_rt))


def test_ops_go_to_device_entry_points(dev, cpu_rt, rng) -> None:
    q, t = ref.randn(rng, (3, 20)), ref.randn(rng, (41, 20), np.float16)
    qd, td = FakeArray(q), FakeArray(t)
    got = mnemo.similarity(dev.rt, qd, td, "dot", copy=False)
    args = dev.lib.calls["mnemo_similarity_device"][-1]
    assert (args[2], args[4], args[-1]) == (q.ctypes.data, t.ctypes.data, STREAM)
    assert isinstance(got, FakeArray)
    assert np.array_equal(got.a, mnemo.similarity(cpu_rt, q, t, "dot"))

    src = rng.integers(0, 41, 9)  # int64: viewed as uint64 on the device too
    tgt = rng.integers(0, 41, 9)
    got = mnemo.score_pairs(dev.rt, td, FakeArray(src), FakeArray(tgt), copy=False)
    args = dev.lib.calls["mnemo_score_pairs_device"][-1]
    assert args[6] == src.ctypes.data and args[8] == mnemo.DType.U64
    assert np.array_equal(got.a, mnemo.score_pairs(cpu_rt, t, src, tgt))
    mixed = mnemo.score_pairs(dev.rt, td, src.tolist(), tgt)  # host indices: moved over
    assert np.array_equal(mixed.a, got.a)

    data = ref.randn(rng, (2, 5, 3))
    st = np.sort(rng.standard_normal((2, 5)), axis=1)
    tt = rng.standard_normal((2, 7))
    got = mnemo.resample(dev.rt, FakeArray(data), FakeArray(st), FakeArray(tt),
                         src_lengths=FakeArray(np.array([5, 3], np.uint64)))
    assert "mnemo_resample_device" in dev.lib.calls
    assert np.array_equal(got.a, mnemo.resample(cpu_rt, data, st, tt, src_lengths=[5, 3]))

    x = ref.randn(rng, (6, 10))
    got = mnemo.normalize_rows(dev.rt, FakeArray(x))
    assert dev.lib.calls["mnemo_normalize_rows_device"][-1][1] == x.ctypes.data
    assert np.array_equal(got.a, mnemo.normalize_rows(cpu_rt, x))
    gamma = ref.randn(rng, (10,))
    got = mnemo.layer_norm(dev.rt, FakeArray(x), gamma)  # host gamma: copied to the device
    assert np.array_equal(got.a, mnemo.layer_norm(cpu_rt, x, gamma))
    with pytest.raises(ValueError, match="gamma.*copy=False"):
        mnemo.layer_norm(dev.rt, FakeArray(x), gamma, copy=False)


def test_search_on_device_and_one_query(dev, cpu_rt, rng) -> None:
    store = mnemo.Store(dev.rt, 12)
    v = ref.randn(rng, (30, 12))
    store.add(np.arange(30), v)
    q = ref.randn(rng, (4, 12))
    want_ids, want_scores = store.search(q, 5)
    ids, scores = store.search(FakeArray(q), 5)
    args = dev.lib.calls["mnemo_store_search_device"][-1]
    assert args[1] == q.ctypes.data and args[-1] == STREAM
    assert np.array_equal(ids.a, want_ids) and np.array_equal(scores.a, want_scores)
    one, _ = store.search(FakeArray(q[1]), 5)
    assert one.a.shape == (5,) and np.array_equal(one.a, want_ids[1])
    # Writes take host memory: device tensors are copied, or refused with copy=False.
    store.add(FakeArray(np.array([100], np.int64)), FakeArray(v[:1]))
    assert store.count() == 31
    with pytest.raises(ValueError, match="copy=False"):
        store.add(FakeArray(np.array([101], np.int64)), FakeArray(v[:1]), copy=False)
    assert store.count() == 31


def test_activation_options_reach_the_device_search(dev, cpu_rt, rng) -> None:
    store = mnemo.Store(dev.rt, 6)
    store.add(np.arange(40), ref.randn(rng, (40, 6)), times=rng.uniform(0, 1e4, 40),
              importance=rng.uniform(0, 1, 40))
    q = ref.randn(rng, (3, 6))
    act = mnemo.Activation(w_relevance=0.5, w_recency=2.0, w_importance=0.25, half_life=900.0,
                           normalize=True)
    want_ids, want_scores = store.search(q, 7, activation=act, now=1e4)
    ids, scores = store.search(FakeArray(q), 7, activation=act, now=1e4, touch=True)
    opts = dev.lib.calls["mnemo_store_search_device"][-1][4]
    assert (opts.activation, opts.normalize, opts.touch) == (1, 1, 1)
    assert (opts.w_relevance, opts.w_recency, opts.w_importance) == (0.5, 2.0, 0.25)
    assert (opts.half_life, opts.now) == (900.0, 1e4)
    assert np.array_equal(ids.a, want_ids) and np.array_equal(scores.a, want_scores)
    assert np.all(store.get_meta(np.unique(want_ids)).times == 1e4)  # touched


def test_nprobe_reaches_the_device_search(dev, cpu_rt, rng) -> None:
    store = mnemo.Store(dev.rt, 8, "f32", "dot")
    store.add(np.arange(1200), ref.randn(rng, (1200, 8)))
    store.build_index(nlist=12, background=False)
    q = ref.randn(rng, (10, 8))
    exact = store.search(q, 6)
    want_ids, want_scores = store.search(q, 6, nprobe=1)
    assert not np.array_equal(want_ids, exact[0])  # one list of twelve misses some
    ids, scores = store.search(FakeArray(q), 6, nprobe=1)
    opts = dev.lib.calls["mnemo_store_search_device"][-1][4]
    assert opts.nprobe == 1
    assert np.array_equal(ids.a, want_ids) and np.array_equal(scores.a, want_scores)
    ids, _ = store.search(FakeArray(q), 6, nprobe=12)
    assert dev.lib.calls["mnemo_store_search_device"][-1][4].nprobe == 12
    assert np.array_equal(ids.a, exact[0])


def test_device_conversions_in_the_framework(dev, cpu_rt, rng) -> None:
    x64 = rng.standard_normal((5, 9))
    with pytest.raises(TypeError, match="x has dtype float64.*copy=False"):
        mnemo.normalize_rows(dev.rt, FakeArray(x64), copy=False)
    got = mnemo.normalize_rows(dev.rt, FakeArray(x64))
    arg = dev.lib.calls["mnemo_normalize_rows_device"][-1][1]
    assert arg != x64.ctypes.data and arg % 16 == 0
    assert np.allclose(got.a, x64 / np.linalg.norm(x64, axis=1, keepdims=True), rtol=1e-6)
    wide = ref.randn(rng, (5, 18))
    strided = FakeArray(wide)[:, ::2]
    with pytest.raises(ValueError, match="C-contiguous.*copy=False"):
        mnemo.normalize_rows(dev.rt, strided, copy=False)
    got = mnemo.normalize_rows(dev.rt, strided)
    assert np.array_equal(got.a, mnemo.normalize_rows(cpu_rt, np.ascontiguousarray(wide[:, ::2])))
    with pytest.raises(TypeError, match="src"):
        mnemo.score_pairs(dev.rt, FakeArray(wide), FakeArray(np.array([0.5])),
                          FakeArray(np.array([1.0])))


def test_cpu_runtime_moves_device_tensors(monkeypatch, cpu_rt, rng) -> None:
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    x = ref.randn(rng, (4, 6))
    got = mnemo.normalize_rows(cpu_rt, FakeArray(x))
    assert isinstance(got, FakeArray)
    assert np.array_equal(got.a, mnemo.normalize_rows(cpu_rt, x))
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.normalize_rows(cpu_rt, FakeArray(x), copy=False)
    assert exc.value.status == Status.E_BACKEND_UNAVAILABLE and "copy=False" in exc.value.message
