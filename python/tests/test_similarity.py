"""similarity() against float64 numpy."""

from __future__ import annotations

import numpy as np
import pytest

import mnemo
import reference as ref

DIMS = [1, 3, 17, 384, 771]
METRICS = ["cosine", "dot", "l2sq"]


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("storage", list(ref.STORAGE))
@pytest.mark.parametrize("dim", DIMS)
def test_similarity_matches_float64(rt, rng, dim: int, storage: str, metric: str) -> None:
    q = ref.randn(rng, (5, dim))
    t = ref.randn(rng, (37, dim), ref.STORAGE[storage])
    got = mnemo.similarity(rt, q, t, metric)
    assert got.shape == (5, 37) and got.dtype == np.float32 and mnemo.is_aligned(got)
    ref.assert_scores(got, q, t, metric)


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_unit_vectors(rt, rng, metric: str) -> None:
    q = mnemo.normalize_rows(rt, ref.randn(rng, (4, 768)))
    t = mnemo.normalize_rows(rt, ref.randn(rng, (1000, 768)))
    got = rt.similarity(q, t, metric)
    err = np.abs(got - ref.similarity(q, t, metric))
    assert err.max() <= 1e-5


def test_batch_of_many_queries(rt, rng) -> None:
    q = ref.randn(rng, (130, 64))
    t = ref.randn(rng, (515, 64))
    for metric in METRICS:
        ref.assert_scores(mnemo.similarity(rt, q, t, metric), q, t, metric)


def test_identical_vectors(rt, rng) -> None:
    t = ref.randn(rng, (20, 129))
    got = mnemo.similarity(rt, t, t, "l2sq")
    # The diagonal is exactly 0 in float64; allow 1e-5 of the squared norms.
    sq = np.sum(ref.as_f64(t) ** 2, axis=1)
    assert np.all(np.abs(np.diag(got)) <= 1e-5 * 2 * sq)
    cos = mnemo.similarity(rt, t, t, "cosine")
    assert np.all(np.abs(np.diag(cos) - 1) <= 1e-5)


def test_zero_norm_cosine_is_zero(rt, rng) -> None:
    q = ref.randn(rng, (3, 16))
    q[1] = 0
    t = ref.randn(rng, (4, 16))
    t[2] = 0
    got = mnemo.similarity(rt, q, t, "cosine")
    assert np.all(got[1] == 0) and np.all(got[:, 2] == 0)
    ref.assert_scores(got, q, t, "cosine")


def test_one_query_and_out(rt, rng) -> None:
    q = ref.randn(rng, (33,))
    t = ref.randn(rng, (9, 33), np.float16)
    out = mnemo.aligned_empty(9, np.float32)
    got = mnemo.similarity(rt, q, t, "dot", out=out)
    assert got is out
    ref.assert_scores(got[None, :], q[None, :], t, "dot")


def test_empty_inputs(rt, rng) -> None:
    t = ref.randn(rng, (9, 8))
    assert mnemo.similarity(rt, mnemo.aligned_empty((0, 8)), t).shape == (0, 9)
    assert mnemo.similarity(rt, ref.randn(rng, (2, 8)), mnemo.aligned_empty((0, 8))).shape == (2, 0)
