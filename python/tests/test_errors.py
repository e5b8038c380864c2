"""Error paths: checks made by the bindings, and statuses from the library
itself (reached through the raw ctypes functions where the bindings would
refuse the call first)."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import mnemo
import reference as ref
from mnemo import DType, Metric, Status
from mnemo._lib import last_error, lib


def misaligned(shape, dtype=np.float32) -> np.ndarray:
    """An array whose data sits 4 bytes past a 16-byte boundary."""
    n = int(np.prod(shape))
    base = mnemo.aligned_zeros(n * np.dtype(dtype).itemsize + 16, np.uint8)
    return base[4:4 + n * np.dtype(dtype).itemsize].view(dtype).reshape(shape)


def expect(status: Status, fn, *args, **kwargs) -> mnemo.MnemoError:
    with pytest.raises(mnemo.MnemoError) as exc:
        fn(*args, **kwargs)
    assert exc.value.status == status, exc.value
    assert exc.value.status_name == status.c_name
    assert exc.value.message
    return exc.value


# Checks made before calling: MnemoError subclasses that are also the usual
# Python exceptions.

def test_misaligned_input_is_refused(rt, rng) -> None:
    q = misaligned((2, 8))
    q[...] = 1.0
    err = expect(Status.E_MISALIGNED, mnemo.similarity, rt, q, ref.randn(rng, (3, 8)),
                 copy=False)
    assert isinstance(err, ValueError) and "queries" in err.message


def test_misaligned_output_is_refused(rt, rng) -> None:
    x = ref.randn(rng, (2, 8))
    err = expect(Status.E_MISALIGNED, mnemo.normalize_rows, rt, x, out=misaligned((2, 8)))
    assert isinstance(err, ValueError) and "out" in err.message


def test_wrong_dtype_is_type_error(rt, rng) -> None:
    q64 = mnemo.aligned_array(rng.standard_normal((2, 8)))
    err = expect(Status.E_DTYPE, mnemo.similarity, rt, q64, ref.randn(rng, (3, 8)), copy=False)
    assert isinstance(err, TypeError) and "float64" in err.message
    store = mnemo.Store(rt, 8)
    err = expect(Status.E_DTYPE, store.add, mnemo.aligned_array([1], np.int32),
                 ref.randn(rng, (1, 8)), copy=False)
    assert isinstance(err, TypeError) and "ids" in err.message
    assert store.count() == 0


def test_not_contiguous_is_value_error(rt, rng) -> None:
    t = ref.randn(rng, (8, 6))
    err = expect(Status.E_INVALID_ARGUMENT, mnemo.similarity, rt, ref.randn(rng, (2, 8)), t.T,
                 copy=False)
    assert isinstance(err, ValueError) and "targets" in err.message


def test_shape_mismatch_is_value_error(rt, rng) -> None:
    store = mnemo.Store(rt, 8)
    err = expect(Status.E_SHAPE, store.add, [1, 2], ref.randn(rng, (3, 8)))
    assert isinstance(err, ValueError)
    expect(Status.E_SHAPE, store.search, ref.randn(rng, (7,)), 1)


# Statuses from the library.

def test_library_refuses_misaligned_pointer(rt, rng) -> None:
    t = ref.randn(rng, (3, 8))
    q = misaligned((2, 8))
    out = mnemo.aligned_zeros((2, 3))
    status = lib.mnemo_similarity(rt.handle, Metric.COSINE, q.ctypes.data, 2, t.ctypes.data,
                                  DType.F32, 3, 8, out.ctypes.data)
    assert status == Status.E_MISALIGNED and last_error()
    status = lib.mnemo_similarity(rt.handle, Metric.COSINE, t.ctypes.data, 2, t.ctypes.data,
                                  DType.F32, 3, 8, misaligned((2, 3)).ctypes.data)
    assert status == Status.E_MISALIGNED


def test_library_refuses_wrong_dtype(rt, rng) -> None:
    t = ref.randn(rng, (3, 8))
    out = mnemo.aligned_zeros((1, 3))
    status = lib.mnemo_similarity(rt.handle, Metric.DOT, t.ctypes.data, 1, t.ctypes.data,
                                  DType.F64, 3, 8, out.ctypes.data)
    assert status == Status.E_DTYPE and last_error()
    # f16 vectors into a bf16 store: the bindings would convert them to f32.
    store = mnemo.Store(rt, 8, "bf16")
    ids = mnemo.aligned_array([1], np.uint64)
    status = lib.mnemo_store_add(store.handle, ids.ctypes.data,
                                 ref.randn(rng, (1, 8), np.float16).ctypes.data, DType.F16, 1)
    assert status == Status.E_DTYPE and store.count() == 0
    expect(Status.E_DTYPE, store.add, ids, ref.randn(rng, (1, 8), np.float16), copy=False)
    assert store.count() == 0


def test_library_refuses_null_pointers(rt) -> None:
    out = mnemo.aligned_zeros((1, 1))
    assert lib.mnemo_similarity(rt.handle, Metric.DOT, None, 1, out.ctypes.data, DType.F32,
                                1, 1, out.ctypes.data) == Status.E_NULL_POINTER
    assert lib.mnemo_store_count(None, ctypes.byref(ctypes.c_uint64())) == Status.E_NULL_POINTER
    assert lib.mnemo_runtime_create(None, None) == Status.E_NULL_POINTER


def test_library_refuses_short_bitmap(rt, rng) -> None:
    store = mnemo.Store(rt, 4)
    store.add(mnemo.aligned_array(np.arange(70), np.uint64), ref.randn(rng, (70, 4)))
    words = mnemo.aligned_zeros(2, np.uint64)
    opts = lib.mnemo_search_options_default()
    opts.filter_kind = mnemo.FilterKind.SLOT_BITMAP
    opts.filter_bitmap = words.ctypes.data
    opts.filter_count = 69
    q = ref.randn(rng, (4,))
    ids, scores = mnemo.aligned_zeros(1, np.uint64), mnemo.aligned_zeros(1)
    status = lib.mnemo_store_search(store.handle, q.ctypes.data, 1, 1, ctypes.byref(opts),
                                    ids.ctypes.data, scores.ctypes.data)
    assert status == Status.E_SHAPE


def test_non_finite_inputs(rt, rng) -> None:
    q = ref.randn(rng, (2, 8))
    t = ref.randn(rng, (3, 8))
    t[1, 4] = np.nan
    out = mnemo.aligned_empty((2, 3))
    out[...] = 3.0
    expect(Status.E_NON_FINITE, mnemo.similarity, rt, q, t, out=out)
    assert np.all(out == 3.0)
    q[0, 0] = np.inf
    expect(Status.E_NON_FINITE, mnemo.similarity, rt, q, ref.randn(rng, (3, 8)))
    expect(Status.E_NON_FINITE, mnemo.score_pairs, rt, t, [0], [2])
    expect(Status.E_NON_FINITE, mnemo.normalize_rows, rt, t)
    expect(Status.E_NON_FINITE, mnemo.layer_norm, rt, t)
    store = mnemo.Store(rt, 8)
    store.add([1, 2], ref.randn(rng, (2, 8)))
    expect(Status.E_NON_FINITE, store.add, [3, 4, 5], t)
    assert store.count() == 2
    expect(Status.E_NON_FINITE, store.search, q, 1)
    expect(Status.E_NON_FINITE, store.set_bias, [1], [np.nan])


def test_store_argument_errors(rt, rng) -> None:
    expect(Status.E_INVALID_ARGUMENT, mnemo.Store, rt, 0)
    expect(Status.E_INVALID_ARGUMENT, mnemo.Store, rt, 65537)
    expect(Status.E_DTYPE, mnemo.Store, rt, 4, DType.F64)
    expect(Status.E_INVALID_ARGUMENT, mnemo.Store, rt, 4, "f32", 9)
    store = mnemo.Store(rt, 4)
    store.add([7], ref.randn(rng, (1, 4)))
    err = expect(Status.E_OUT_OF_RANGE, store.add, [8, mnemo.NO_ID], ref.randn(rng, (2, 4)))
    assert "1" in err.message
    assert store.count() == 1
    expect(Status.E_INVALID_ARGUMENT, store.search, ref.randn(rng, (4,)), 0)
    expect(Status.E_NOT_FOUND, store.get, 8)
    expect(Status.E_INVALID_ARGUMENT, mnemo.similarity, rt, ref.randn(rng, (1, 4)),
           ref.randn(rng, (2, 4)), 0)


def test_last_error_is_per_thread_and_kept(rt, rng) -> None:
    expect(Status.E_INVALID_ARGUMENT, mnemo.Store, rt, 0)
    mine = last_error()
    assert mine
    mnemo.similarity(rt, ref.randn(rng, (1, 4)), ref.randn(rng, (2, 4)))
    assert last_error() == mine  # success does not clear it
    seen = {}

    def other() -> None:
        seen["before"] = last_error()
        try:
            mnemo.Store(rt, 4, "f32", 42)
        except mnemo.MnemoError as exc:
            seen["message"] = exc.message
        seen["after"] = last_error()

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert seen["before"] == ""
    assert seen["message"] and seen["after"] == seen["message"]
    assert last_error() == mine


def test_lists_convert_without_loss(rt, rng) -> None:
    store = mnemo.Store(rt, 4)
    vec = ref.randn(rng, (1, 4))
    expect(Status.E_DTYPE, store.add, [1.5], vec)  # no truncation to 1
    err = expect(Status.E_OUT_OF_RANGE, store.add, [-2], vec)  # no wrap to 2**64 - 2
    assert isinstance(err, ValueError)
    expect(Status.E_OUT_OF_RANGE, store.add, [2**64], vec)
    assert store.count() == 0
    store.add([2**64 - 2], vec)
    assert store.slot_of(2**64 - 2) == 0
