"""Arrays as users have them: what is converted (one copy), what passes
untouched (the data pointer reaches the C call), what is refused (naming the
argument, nothing written), and copy=False."""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np
import pytest

import mnemo
import mnemo.ops
import mnemo.store
import reference as ref
from mnemo import Status


class Recorder:
    """Stands in for the loaded library in one module: records the
    arguments of each call, then makes it."""

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


def misaligned(shape, dtype=np.float32) -> np.ndarray:
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    base = mnemo.aligned_zeros(n + 16, np.uint8)
    return base[4:4 + n].view(dtype).reshape(shape)


def test_right_arrays_pass_without_copy(cpu_rt, spy, rng) -> None:
    q = ref.randn(rng, (3, 16))
    t = ref.randn(rng, (5, 16))
    mnemo.similarity(cpu_rt, q, t)
    args = spy.calls["mnemo_similarity"][-1]
    assert args[2] == q.ctypes.data and args[4] == t.ctypes.data
    store = mnemo.Store(cpu_rt, 16)
    ids = mnemo.aligned_array(np.arange(5) + 7, np.uint64)
    store.add(ids, t)
    args = spy.calls["mnemo_store_add"][-1]
    assert args[1] == ids.ctypes.data and args[2] == t.ctypes.data
    store.search(q, 2)
    assert spy.calls["search_host"][-1][1] is q
    tab16 = ref.randn(rng, (6, 8), np.float16)
    src = mnemo.aligned_array([0, 1, 5], np.uint32)
    tgt = mnemo.aligned_array([2, 2, 3], np.uint32)
    mnemo.score_pairs(cpu_rt, tab16, src, tgt)
    args = spy.calls["mnemo_score_pairs"][-1]
    assert (args[2], args[6], args[7]) == (tab16.ctypes.data, src.ctypes.data, tgt.ctypes.data)
    x = ref.randn(rng, (4, 9), np.uint16)
    mnemo.normalize_rows(cpu_rt, x)
    assert spy.calls["mnemo_normalize_rows"][-1][1] == x.ctypes.data
    mnemo.layer_norm(cpu_rt, x)
    assert spy.calls["mnemo_layer_norm"][-1][1] == x.ctypes.data


def test_signed_ids_are_viewed_not_copied(cpu_rt, spy, rng) -> None:
    store = mnemo.Store(cpu_rt, 4)
    ids = mnemo.aligned_array([3, 9, 4], np.int64)
    store.add(ids, ref.randn(rng, (3, 4)), copy=False)
    assert spy.calls["mnemo_store_add"][-1][1] == ids.ctypes.data
    assert sorted(store.search(ref.randn(rng, (4,)), 3)[0].tolist()) == [3, 4, 9]
    tab = ref.randn(rng, (6, 8))
    src = mnemo.aligned_array([0, 5], np.int32)
    mnemo.score_pairs(cpu_rt, tab, src, src, copy=False)
    assert spy.calls["mnemo_score_pairs"][-1][6] == src.ctypes.data


def test_one_copy_conversions_match_float64(cpu_rt, spy, rng) -> None:
    n, dim = 37, 13
    base64 = rng.standard_normal((n, dim))
    want = ref.similarity(base64[:2].astype(np.float32).astype(np.float64),
                          base64.astype(np.float32).astype(np.float64), "dot")
    inputs = {
        "float64": base64,
        "list": base64.tolist(),
        "fortran": np.asfortranarray(base64.astype(np.float32)),
        "strided": np.repeat(base64.astype(np.float32), 2, axis=1)[:, ::2],
        "misaligned": None,
    }
    mis = misaligned((n, dim))
    mis[...] = base64
    inputs["misaligned"] = mis
    for label, t in inputs.items():
        got = mnemo.similarity(cpu_rt, base64[:2].tolist(), t, "dot")
        assert got.shape == (2, n), label
        assert np.allclose(got, want, rtol=1e-5, atol=1e-5), label
        args = spy.calls["mnemo_similarity"][-1]
        assert args[4] % 16 == 0, label
        if isinstance(t, np.ndarray):
            assert args[4] != t.ctypes.data, label


def test_float16_store_and_lists(cpu_rt, rng) -> None:
    store = mnemo.Store(cpu_rt, 8, "f16", "dot")
    v = rng.standard_normal((4, 8)).astype(np.float16)
    store.add(np.arange(4, dtype=np.int32), v)
    ids, scores = store.search(v[1].astype(np.float64), 1)
    assert ids.shape == (1,) and ids[0] == np.argmax(v.astype(np.float64) @ v[1].astype(np.float64))
    assert np.array_equal(store.get(2), v[2].astype(np.float32))


def test_float16_vectors_into_other_stores(cpu_rt, rng) -> None:
    v = rng.standard_normal((3, 8)).astype(np.float16)
    for storage in ("f32", "bf16"):
        store = mnemo.Store(cpu_rt, 8, storage)
        store.add([1, 2, 3], v)
        want = ref.to_storage(v.astype(np.float32), ref.STORAGE[storage])
        assert np.array_equal(store.get(3), ref.as_f64(want)[2].astype(np.float32))


def test_one_dimensional_query_is_one_query(cpu_rt, rng) -> None:
    store = mnemo.Store(cpu_rt, 6)
    store.add(list(range(10)), rng.standard_normal((10, 6)))
    q = rng.standard_normal(6)
    ids1, sc1 = store.search(q, 3)
    ids2, sc2 = store.search(q[None, :], 3)
    assert ids1.shape == (3,) and ids2.shape == (1, 3)
    assert np.array_equal(ids1, ids2[0]) and np.array_equal(sc1, sc2[0])
    t = rng.standard_normal((4, 6))
    assert mnemo.similarity(cpu_rt, q, t).shape == (4,)


@pytest.mark.parametrize("bad,error,status", [
    ([-1, 2], ValueError, Status.E_OUT_OF_RANGE),
    (np.array([4, -3]), ValueError, Status.E_OUT_OF_RANGE),
    (np.array([4, -3], np.int32), ValueError, Status.E_OUT_OF_RANGE),
    ([1.5, 2], TypeError, Status.E_DTYPE),
    (np.array([1.0, 2.0]), TypeError, Status.E_DTYPE),
    ([2**64, 1], ValueError, Status.E_OUT_OF_RANGE),
    ([[1, 2], [3]], ValueError, Status.E_SHAPE),
    (np.array([[1, 2]]), ValueError, Status.E_SHAPE),
    (["a", "b"], TypeError, Status.E_DTYPE),
    ([True, False], TypeError, Status.E_DTYPE),
])
def test_bad_ids_are_refused_before_writing(cpu_rt, spy, rng, bad, error, status) -> None:
    store = mnemo.Store(cpu_rt, 3)
    store.add([100], rng.standard_normal((1, 3)))
    with pytest.raises(error) as exc:
        store.add(bad, rng.standard_normal((2, 3)))
    assert exc.value.status == status and "ids" in exc.value.message
    assert len(spy.calls["mnemo_store_add"]) == 1 and store.count() == 1


@pytest.mark.parametrize("bad,error,status", [
    ([[1.0, 2.0, 3.0], [1.0, 2.0]], ValueError, Status.E_SHAPE),
    (np.ones((2, 4)), ValueError, Status.E_SHAPE),
    (np.ones((2, 3, 1)), ValueError, Status.E_SHAPE),
    (np.array([["a", "b", "c"]] * 2), TypeError, Status.E_DTYPE),
    (np.ones((2, 3), bool), TypeError, Status.E_DTYPE),
    (np.ones((2, 3), complex), TypeError, Status.E_DTYPE),
])
def test_bad_vectors_are_refused_before_writing(cpu_rt, spy, bad, error, status) -> None:
    store = mnemo.Store(cpu_rt, 3)
    with pytest.raises(error) as exc:
        store.add([1, 2], bad)
    assert exc.value.status == status and "vectors" in exc.value.message
    assert "mnemo_store_add" not in spy.calls and store.count() == 0


def test_pairs_indices_named(cpu_rt, rng) -> None:
    tab = rng.standard_normal((5, 4))
    with pytest.raises(ValueError, match="tgt"):
        mnemo.score_pairs(cpu_rt, tab, [0, 1], [2, -1])
    with pytest.raises(TypeError, match="src"):
        mnemo.score_pairs(cpu_rt, tab, [0.5], [1])
    with pytest.raises(ValueError, match="src_lengths"):
        mnemo.resample(cpu_rt, rng.standard_normal((1, 3, 2)), [[0.0, 1, 2]], [[0.5]],
                       src_lengths=[-1])


@pytest.mark.parametrize("make,status", [
    (lambda x: x.astype(np.float64), Status.E_DTYPE),
    (lambda x: np.asfortranarray(x), Status.E_INVALID_ARGUMENT),
    (lambda x: x.tolist(), Status.E_INVALID_ARGUMENT),
    (lambda x: misaligned_copy(x), Status.E_MISALIGNED),
])
def test_copy_false_raises_instead_of_copying(cpu_rt, spy, rng, make, status) -> None:
    x = ref.randn(rng, (3, 5))
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.normalize_rows(cpu_rt, make(x), copy=False)
    assert exc.value.status == status and "copy=False" in exc.value.message
    assert "x" in exc.value.message and "mnemo_normalize_rows" not in spy.calls
    assert np.allclose(mnemo.normalize_rows(cpu_rt, make(x)),
                       x / np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True),
                       rtol=1e-6, atol=1e-6)


def misaligned_copy(x: np.ndarray) -> np.ndarray:
    out = misaligned(x.shape, x.dtype)
    out[...] = x
    return out


def test_numpy_dlpack_host_path_without_copy(cpu_rt, spy, rng) -> None:
    class Producer:
        """A host tensor known only through DLPack."""

        def __init__(self, a: np.ndarray) -> None:
            self.a = a

        def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
            return self.a.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self) -> Any:
            return self.a.__dlpack_device__()

    x = ref.randn(rng, (4, 10))
    got = mnemo.normalize_rows(cpu_rt, Producer(x), copy=False)
    assert spy.calls["mnemo_normalize_rows"][-1][1] == x.ctypes.data
    assert np.allclose(got, x / np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True),
                       rtol=1e-6, atol=1e-6)


def test_torch_cpu_tensors_without_copy(cpu_rt, spy, rng) -> None:
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(ref.randn(rng, (6, 12)))
    store = mnemo.Store(cpu_rt, 12)
    store.add(torch.arange(6), x, copy=False)
    assert spy.calls["mnemo_store_add"][-1][2] == x.data_ptr()
    ids, scores = store.search(x[:2], 3, copy=False)
    assert isinstance(ids, torch.Tensor) and ids.dtype == torch.int64
    assert ids[:, 0].tolist() == [0, 1]
    n = mnemo.normalize_rows(cpu_rt, x)
    assert isinstance(n, torch.Tensor) and spy.calls["mnemo_normalize_rows"][-1][1] == x.data_ptr()
