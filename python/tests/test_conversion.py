"""Arrays as users have them: what is converted with one copy, what passes
with no copy (checked by data pointer), what is refused (naming the argument,
writing nothing), and copy=False."""

from __future__ import annotations

import numpy as np
import pytest

import mnemo
import reference as ref
from mnemo.arrays import as_data, as_ids

DIM = 37


def misaligned(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `a` whose data starts 4 bytes past a 16-byte boundary."""
    raw = mnemo.aligned_empty(a.nbytes + 16, np.uint8)
    out = raw[4:4 + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    assert out.ctypes.data % 16 == 4
    return out


def ready_f32(rng: np.random.Generator, shape) -> np.ndarray:
    return mnemo.aligned_array(ref.randn(rng, shape), np.float32)


def test_ready_arrays_pass_without_copy(rng: np.random.Generator) -> None:
    x = ready_f32(rng, (9, DIM))
    assert as_data(x, "v", [np.float32], 2).ctypes.data == x.ctypes.data
    assert as_data(x, "v", [np.float32], 2, copy=False).ctypes.data == x.ctypes.data
    ids = mnemo.aligned_array(np.arange(5, 14), np.uint64)
    assert as_ids(ids, "ids").ctypes.data == ids.ctypes.data
    h = mnemo.aligned_array(x, np.float16)
    assert as_data(h, "v", [np.float32, np.float16], 2).ctypes.data == h.ctypes.data


def test_numpy_dlpack_host_path_without_copy(rng: np.random.Generator) -> None:
    x = ready_f32(rng, (4, DIM))

    class Producer:
        """Exposes only the DLPack protocol, as a CPU tensor of another framework does."""

        def __dlpack__(self, **kw):
            return x.__dlpack__(**kw)

        def __dlpack_device__(self):
            return x.__dlpack_device__()

    got = as_data(Producer(), "queries", [np.float32], (1, 2), copy=False)
    assert got.ctypes.data == x.ctypes.data


@pytest.mark.parametrize("kind", ["list", "float64", "fortran", "strided", "misaligned"])
def test_vectors_converted_once(cpu_rt, rng: np.random.Generator, kind: str) -> None:
    n = 23
    v64 = ref.randn(rng, (n, DIM)).astype(np.float64)
    src = {
        "list": lambda: v64.tolist(),
        "float64": lambda: v64,
        "fortran": lambda: np.asfortranarray(v64.astype(np.float32)),
        "strided": lambda: np.repeat(v64.astype(np.float32), 2, axis=0)[::2],
        "misaligned": lambda: misaligned(v64.astype(np.float32)),
    }[kind]()
    ids = np.arange(100, 100 + n, dtype=np.int64)
    store = mnemo.Store(cpu_rt, DIM, "f32", "dot")
    strict_ids = mnemo.aligned_array(ids, np.uint64)
    with pytest.raises((TypeError, ValueError), match="vectors"):
        store.add(strict_ids, src if kind != "list" else v64, copy=False)
    assert len(store) == 0
    store.add(ids, src)
    assert len(store) == n
    q = v64[3]  # a 1-D float64 query is one query
    got_ids, got_scores = store.search(q, 5)
    assert got_ids.shape == (5,)
    want = ref.as_f64(v64.astype(np.float32)) @ q.astype(np.float32).astype(np.float64)
    order = np.argsort(-want, kind="stable")[:5]
    np.testing.assert_array_equal(got_ids, ids[order].astype(np.uint64))
    np.testing.assert_allclose(got_scores, want[order], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint32, np.float64])
def test_ids_of_other_dtypes(cpu_rt, rng: np.random.Generator, dtype) -> None:
    store = mnemo.Store(cpu_rt, DIM, "f32", "cosine")
    ids = np.array([7, 2**31 - 1, 0, 12], dtype=dtype)
    store.add(ids, ready_f32(rng, (4, DIM)))
    assert sorted(int(i) for i in store.search(ready_f32(rng, (DIM,)), 4)[0]) == [
        0, 7, 12, 2**31 - 1]


@pytest.mark.parametrize("bad, exc", [
    (np.array([1, -2, 3], dtype=np.int64), ValueError),
    (np.array([1.0, 2.5, 3.0]), ValueError),
    (np.array([1.0, np.nan, 3.0]), ValueError),
    (np.array([1, 2, 3], dtype=np.int32).reshape(3, 1), ValueError),
    ([1, -2, 3], ValueError),
    ([1, 2**64, 3], ValueError),
    ([1, 2.5, 3], TypeError),
    (np.array(["a", "b", "c"]), TypeError),
])
def test_bad_ids_refused(cpu_rt, rng: np.random.Generator, bad, exc) -> None:
    store = mnemo.Store(cpu_rt, DIM, "f32", "cosine")
    with pytest.raises(exc, match="ids"):
        store.add(bad, ready_f32(rng, (3, DIM)))
    assert len(store) == 0


@pytest.mark.parametrize("bad, exc", [
    ([[1.0] * DIM, [2.0] * (DIM - 1), [3.0] * DIM], ValueError),  # ragged
    (np.ones((3, DIM + 1)), ValueError),                           # wrong width
    (np.ones((3, 1, DIM)), ValueError),                            # wrong rank
    (np.full((3, DIM), "x"), TypeError),
    (np.ones((3, DIM), dtype=bool), TypeError),
])
def test_bad_vectors_refused(cpu_rt, bad, exc) -> None:
    store = mnemo.Store(cpu_rt, DIM, "f32", "cosine")
    with pytest.raises(exc, match="vectors"):
        store.add([1, 2, 3], bad)
    assert len(store) == 0


def test_similarity_converts_and_strict(cpu_rt, rng: np.random.Generator) -> None:
    q = ref.randn(rng, (3, DIM)).astype(np.float64)
    t = ref.randn(rng, (11, DIM)).astype(np.float64)
    with pytest.raises(TypeError, match="queries"):
        mnemo.similarity(cpu_rt, q, t, "dot", copy=False)
    got = mnemo.similarity(cpu_rt, q, np.asfortranarray(t), "dot")
    want = q.astype(np.float32).astype(np.float64) @ t.astype(np.float32).astype(np.float64).T
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


class FakeDeviceArray:
    """Only the CUDA array interface, as a GPU array of another library."""

    def __init__(self, shape, typestr="<f4", strides=None) -> None:
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "version": 3,
                                         "data": (0x7000, False), "strides": strides}


def test_device_array_interface_parsed_and_checked() -> None:
    from mnemo.tensors import DeviceArray, is_device_tensor
    a = DeviceArray(FakeDeviceArray((3, 8)), "queries")
    assert is_device_tensor(FakeDeviceArray((3, 8))) and not is_device_tensor(np.zeros(3))
    assert (a.shape, a.dtype, a.ptr) == ((3, 8), mnemo.DType.F32, 0x7000)
    DeviceArray(FakeDeviceArray((3, 8), strides=(32, 4)), "queries")  # C order, explicit
    with pytest.raises(ValueError, match="queries"):
        DeviceArray(FakeDeviceArray((3, 8), strides=(4, 12)), "queries")
    with pytest.raises(TypeError, match="queries"):
        DeviceArray(FakeDeviceArray((3, 8), typestr="<f8"), "queries")


def test_host_and_device_mixed_refused(cpu_rt, rng: np.random.Generator) -> None:
    with pytest.raises(TypeError, match="targets"):
        mnemo.similarity(cpu_rt, FakeDeviceArray((1, 8)), ref.randn(rng, (3, 8)))
