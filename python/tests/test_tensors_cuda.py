"""PyTorch and CuPy CUDA tensors on a CUDA runtime: the _device entry points
get the tensors' own pointers and the producer's stream, results come back
as that framework's tensors on the same device and equal the host path.
Runs with MNEMO_TEST_CUDA=1 where torch / CuPy see a GPU; skips otherwise."""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np
import pytest

import mnemo
import mnemo.ops
import mnemo.store
import reference as ref
from conftest import CUDA_ON

pytestmark = pytest.mark.skipif(not CUDA_ON, reason="CUDA tensor cases run only with MNEMO_TEST_CUDA=1")


class Recorder:
    def __init__(self, lib: Any, calls: "Dict[str, List[tuple]] | None" = None) -> None:
        self._lib = lib
        self.calls: Dict[str, List[tuple]] = {} if calls is None else calls

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._lib, name)
        # The extension's search_device takes the arguments of the C call.
        key = {"search_device": "mnemo_store_search_device"}.get(name, name)

        def call(*args: Any) -> Any:
            self.calls.setdefault(key, []).append(args)
            return fn(*args)
        return call


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    rec = Recorder(mnemo.ops.lib)
    monkeypatch.setattr(mnemo.ops, "lib", rec)
    monkeypatch.setattr(mnemo.store, "lib", rec)
    # The search calls go through the compiled extension.
    monkeypatch.setattr(mnemo.store, "_ext", Recorder(mnemo.store._ext, rec.calls))
    return rec


@pytest.fixture(scope="module")
def cuda_rt() -> Any:
    with mnemo.Runtime(backend="cuda") as runtime:
        yield runtime


class Torch:
    name = "torch"

    def __init__(self) -> None:
        self.t = pytest.importorskip("torch")
        if not self.t.cuda.is_available():
            pytest.skip("torch sees no GPU")

    def dev(self, a: np.ndarray) -> Any:
        if a.dtype == np.uint16:
            return self.t.from_numpy(a.view(np.int16)).cuda().view(self.t.bfloat16)
        return self.t.from_numpy(np.ascontiguousarray(a)).cuda()

    def host(self, x: Any) -> np.ndarray:
        if x.dtype == self.t.bfloat16:
            return x.view(self.t.int16).cpu().numpy().view(np.uint16)
        return x.cpu().numpy()

    def ptr(self, x: Any) -> int:
        return int(x.data_ptr())

    def is_mine(self, x: Any) -> bool:
        return isinstance(x, self.t.Tensor) and x.is_cuda

    def stream(self) -> Any:
        s = self.t.cuda.Stream()
        return self.t.cuda.stream(s), int(s.cuda_stream)

    def sync(self) -> None:
        self.t.cuda.synchronize()


class CuPy:
    name = "cupy"

    def __init__(self) -> None:
        self.cp = pytest.importorskip("cupy")
        try:
            self.cp.cuda.runtime.getDeviceCount()
        except Exception:
            pytest.skip("CuPy sees no GPU")

    def dev(self, a: np.ndarray) -> Any:
        return self.cp.asarray(a)

    def host(self, x: Any) -> np.ndarray:
        return self.cp.asnumpy(x)

    def ptr(self, x: Any) -> int:
        return int(x.data.ptr)

    def is_mine(self, x: Any) -> bool:
        return isinstance(x, self.cp.ndarray)

    def stream(self) -> Any:
        s = self.cp.cuda.Stream(non_blocking=True)
        return s, int(s.ptr)

    def sync(self) -> None:
        self.cp.cuda.runtime.deviceSynchronize()


@pytest.fixture(params=[Torch, CuPy], ids=["torch", "cupy"])
def fw(request: pytest.FixtureRequest) -> Any:
    return request.param()


def host_equal(fw: Any, got: Any, want: np.ndarray, exact: bool = False, tol: float = 2e-5) -> None:
    assert fw.is_mine(got)
    g = fw.host(got)
    assert g.shape == want.shape
    if exact:
        assert np.array_equal(g, want)
    else:
        assert np.allclose(g.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("storage", ["f32", "f16", "bf16"])
def test_search_on_device(cuda_rt, fw, spy, rng, storage) -> None:
    n, dim, k = 3000, 100, 10
    store = mnemo.Store(cuda_rt, dim, storage, "cosine")
    vectors = ref.randn(rng, (n, dim))
    store.add(np.arange(n) * 3, vectors)
    q = ref.randn(rng, (5, dim))
    want_ids, want_scores = store.search(q, k)
    qd = fw.dev(q)
    ctx, stream = fw.stream()
    with ctx:
        ids, scores = store.search(qd, k)
    fw.sync()
    args = spy.calls["mnemo_store_search_device"][-1]
    assert args[1] == fw.ptr(qd) and args[7] == stream
    host_equal(fw, ids, want_ids.view(np.int64) if fw.name == "torch" else want_ids, exact=True)
    host_equal(fw, scores, want_scores)
    one_ids, _ = store.search(fw.dev(q[2]), k)
    fw.sync()
    assert fw.host(one_ids).shape == (k,)
    assert np.array_equal(fw.host(one_ids).view(np.uint64), want_ids[2])


@pytest.mark.parametrize("normalize", [False, True])
def test_activation_search_on_device(cuda_rt, fw, spy, rng, normalize) -> None:
    n, dim, k = 2000, 64, 9
    store = mnemo.Store(cuda_rt, dim, "f16", "dot")
    store.add(np.arange(n) * 5, ref.randn(rng, (n, dim)), times=1e9 - rng.uniform(0, 1e6, n),
              importance=rng.uniform(0, 3, n))
    act = mnemo.Activation(w_recency=1.5, w_importance=0.1, half_life=3e5, normalize=normalize)
    q = ref.randn(rng, (4, dim))
    want_ids, want_scores = store.search(q, k, activation=act, now=1e9)
    ids, scores = store.search(fw.dev(q), k, activation=act, now=1e9, touch=True)
    fw.sync()
    assert spy.calls["mnemo_store_search_device"][-1][4].activation == 1
    host_equal(fw, ids, want_ids.view(np.int64) if fw.name == "torch" else want_ids, exact=True)
    host_equal(fw, scores, want_scores)
    assert np.all(store.get_meta(np.unique(want_ids)).times == 1e9)


@pytest.mark.parametrize("storage", ["f32", "f16", "bf16"])
def test_similarity_on_device(cuda_rt, fw, spy, rng, storage) -> None:
    q = ref.randn(rng, (3, 37))
    t = ref.randn(rng, (129, 37), ref.STORAGE[storage])
    want = mnemo.similarity(cuda_rt, q, t, "dot")
    qd, td = fw.dev(q), fw.dev(t)
    got = mnemo.similarity(cuda_rt, qd, td, "dot")
    fw.sync()
    args = spy.calls["mnemo_similarity_device"][-1]
    assert args[2] == fw.ptr(qd) and args[4] == fw.ptr(td)
    host_equal(fw, got, want)


def test_pairs_resample_normalize_layer_norm_on_device(cuda_rt, fw, spy, rng) -> None:
    tab = ref.randn(rng, (50, 24))
    src = rng.integers(0, 50, 77).astype(np.int64)
    tgt = rng.integers(0, 50, 77).astype(np.int64)
    want = mnemo.score_pairs(cuda_rt, tab, src, tgt)
    got = mnemo.score_pairs(cuda_rt, fw.dev(tab), fw.dev(src), fw.dev(tgt))
    fw.sync()
    host_equal(fw, got, want)
    assert "mnemo_score_pairs_device" in spy.calls
    mixed = mnemo.score_pairs(cuda_rt, fw.dev(tab), src.tolist(), tgt)  # host indices: copied over
    fw.sync()
    host_equal(fw, mixed, want)
    bad = tgt.copy()
    bad[5] = -1  # a negative index reads as 2**64 - 1: out of range
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.score_pairs(cuda_rt, fw.dev(tab), fw.dev(src), fw.dev(bad))
    assert exc.value.status == mnemo.Status.E_OUT_OF_RANGE

    data = ref.randn(rng, (3, 9, 5))
    st = np.sort(rng.standard_normal((3, 9)), axis=1)
    tt = rng.standard_normal((3, 11))
    want = mnemo.resample(cuda_rt, data, st, tt)
    got = mnemo.resample(cuda_rt, fw.dev(data), fw.dev(st), fw.dev(tt))
    fw.sync()
    host_equal(fw, got, want)
    assert "mnemo_resample_device" in spy.calls

    x = ref.randn(rng, (33, 70))
    xd = fw.dev(x)
    got = mnemo.normalize_rows(cuda_rt, xd)
    fw.sync()
    host_equal(fw, got, mnemo.normalize_rows(cuda_rt, x))
    assert spy.calls["mnemo_normalize_rows_device"][-1][1] == fw.ptr(xd)
    gamma, beta = ref.randn(rng, (70,)), ref.randn(rng, (70,))
    got = mnemo.layer_norm(cuda_rt, xd, fw.dev(gamma), fw.dev(beta))
    fw.sync()
    host_equal(fw, got, mnemo.layer_norm(cuda_rt, x, gamma, beta), tol=1e-4)
    assert spy.calls["mnemo_layer_norm_device"][-1][1] == fw.ptr(xd)


def test_device_conversions_and_copy_false(cuda_rt, fw, spy, rng) -> None:
    x = rng.standard_normal((20, 16))  # float64: converted on the device
    got = mnemo.normalize_rows(cuda_rt, fw.dev(x))
    fw.sync()
    host_equal(fw, got, x / np.linalg.norm(x, axis=1, keepdims=True), tol=1e-5)
    with pytest.raises(TypeError, match="copy=False"):
        mnemo.normalize_rows(cuda_rt, fw.dev(x), copy=False)
    strided = fw.dev(ref.randn(rng, (20, 32)))[:, ::2]
    with pytest.raises(ValueError, match="copy=False"):
        mnemo.normalize_rows(cuda_rt, strided, copy=False)
    got = mnemo.normalize_rows(cuda_rt, strided)
    fw.sync()
    h = fw.host(strided).astype(np.float64)
    host_equal(fw, got, h / np.linalg.norm(h, axis=1, keepdims=True), tol=1e-5)


def test_cpu_runtime_copies_and_returns_device_tensors(cpu_rt, fw, rng) -> None:
    x = ref.randn(rng, (4, 8))
    got = mnemo.normalize_rows(cpu_rt, fw.dev(x))
    host_equal(fw, got, mnemo.normalize_rows(cpu_rt, x))
    with pytest.raises(ValueError, match="copy=False"):
        mnemo.normalize_rows(cpu_rt, fw.dev(x), copy=False)


def test_store_add_from_device_tensors(cuda_rt, fw, rng) -> None:
    store = mnemo.Store(cuda_rt, 8)
    v = ref.randn(rng, (6, 8))
    store.add(fw.dev(np.arange(6, dtype=np.int64)), fw.dev(v))
    assert store.count() == 6 and np.array_equal(store.get(4), v[4])
    with pytest.raises(ValueError, match="copy=False"):
        store.add(fw.dev(np.arange(6, dtype=np.int64)), fw.dev(v), copy=False)


def test_jax_arrays(cuda_rt, rng) -> None:
    import os
    # JAX would otherwise take most of the GPU memory for itself.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax")
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX sees no GPU")
    q, t = ref.randn(rng, (2, 33)), ref.randn(rng, (90, 33))
    got = mnemo.similarity(cuda_rt, jax.device_put(q, gpu), jax.device_put(t, gpu), "dot")
    assert isinstance(got, jax.Array)
    assert np.allclose(np.asarray(got), mnemo.similarity(cuda_rt, q, t, "dot"), rtol=2e-5, atol=2e-5)
    x = ref.randn(rng, (7, 40))
    got = mnemo.normalize_rows(cuda_rt, jax.device_put(x, gpu))
    assert np.allclose(np.asarray(got), mnemo.normalize_rows(cuda_rt, x), rtol=2e-5, atol=2e-5)
    store = mnemo.Store(cuda_rt, 33)
    store.add(np.arange(90), t)
    with pytest.raises(TypeError, match="jax_enable_x64"):
        store.search(jax.device_put(q, gpu), 4)
    jax.config.update("jax_enable_x64", True)
    try:
        ids, scores = store.search(jax.device_put(q, gpu), 4)
    finally:
        jax.config.update("jax_enable_x64", False)
    want_ids, want_scores = store.search(q, 4)
    assert np.array_equal(np.asarray(ids).view(np.uint64), want_ids)
    assert np.allclose(np.asarray(scores), want_scores, rtol=2e-5, atol=2e-5)
