"""score_pairs() against float64 numpy."""

from __future__ import annotations

import numpy as np
import pytest

import mnemo
import reference as ref
from mnemo import Status


def pair_reference(table: np.ndarray, src: np.ndarray, tgt: np.ndarray, metric: str):
    t = ref.as_f64(table)
    a, b = t[src.astype(np.int64)], t[tgt.astype(np.int64)]
    if metric == "dot":
        s = np.sum(a * b, axis=1)
        tol = 1e-5 * np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    elif metric == "cosine":
        denom = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            s = np.where(denom == 0, 0.0, np.sum(a * b, axis=1) / denom)
        tol = np.full(s.shape, 1e-5)
    else:
        s = np.sum((a - b) ** 2, axis=1)
        tol = 1e-5 * s
    return s, tol


@pytest.mark.parametrize("metric", ["cosine", "dot", "l2sq"])
@pytest.mark.parametrize("storage", list(ref.STORAGE))
@pytest.mark.parametrize("index_dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("n_items,dim,n_pairs", [(1, 5, 3), (29, 31, 500), (400, 256, 3000)])
def test_pairs_match_float64(rt, rng, n_items, dim, n_pairs, index_dtype, storage, metric):
    table = ref.randn(rng, (n_items, dim), ref.STORAGE[storage])
    src = mnemo.aligned_array(rng.integers(0, n_items, n_pairs), index_dtype)
    tgt = mnemo.aligned_array(rng.integers(0, n_items, n_pairs), index_dtype)
    tgt[: n_pairs // 4] = src[: n_pairs // 4]  # src = tgt pairs
    got = mnemo.score_pairs(rt, table, src, tgt, metric)
    assert got.shape == (n_pairs,) and got.dtype == np.float32 and mnemo.is_aligned(got)
    want, tol = pair_reference(table, src, tgt, metric)
    err = np.abs(got - want)
    assert np.all(err <= tol), f"worst pair {np.argmax(err - tol)}"


def test_repeated_pairs_and_input_order(rt, rng) -> None:
    table = ref.randn(rng, (10, 16))
    src = mnemo.aligned_array([3, 9, 3, 0, 3], np.uint64)
    tgt = mnemo.aligned_array([4, 1, 4, 0, 4], np.uint64)
    got = rt.score_pairs(table, src, tgt, "dot")
    assert got[0] == got[2] == got[4]
    want, tol = pair_reference(table, src, tgt, "dot")
    assert np.all(np.abs(got - want) <= tol)


def test_lists_are_converted(rt, rng) -> None:
    table = ref.randn(rng, (4, 8))
    got = mnemo.score_pairs(rt, table, [0, 1], [2, 3], "cosine")
    want, _ = pair_reference(table, np.array([0, 1]), np.array([2, 3]), "cosine")
    assert np.all(np.abs(got - want) <= 1e-5)


def test_no_pairs(rt, rng) -> None:
    table = ref.randn(rng, (4, 8))
    empty = mnemo.aligned_empty(0, np.uint64)
    assert mnemo.score_pairs(rt, table, empty, empty).shape == (0,)


@pytest.mark.parametrize("index_dtype", [np.uint32, np.uint64])
def test_out_of_range_index_writes_nothing(rt, rng, index_dtype) -> None:
    table = ref.randn(rng, (50, 8))
    src = mnemo.aligned_array(rng.integers(0, 50, 20), index_dtype)
    tgt = mnemo.aligned_array(rng.integers(0, 50, 20), index_dtype)
    tgt[13] = 50
    out = mnemo.aligned_empty(20, np.float32)
    out[:] = -7.0
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.score_pairs(rt, table, src, tgt, out=out)
    assert exc.value.status == Status.E_OUT_OF_RANGE
    assert exc.value.status_name == "MNEMO_E_OUT_OF_RANGE"
    assert "13" in exc.value.message, exc.value.message
    assert np.all(out == -7.0)


def test_mixed_index_dtypes_are_refused(rt, rng) -> None:
    table = ref.randn(rng, (4, 8))
    with pytest.raises(TypeError):
        mnemo.score_pairs(rt, table, mnemo.aligned_array([0], np.uint32),
                          mnemo.aligned_array([1], np.uint64))
