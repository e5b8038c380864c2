"""normalize_rows() and layer_norm() against float64 numpy."""

from __future__ import annotations

import numpy as np
import pytest

import mnemo
import reference as ref
from mnemo import Status


def assert_close(got: np.ndarray, want: np.ndarray, atol: float) -> None:
    """Within `atol` plus the rounding of the output dtype."""
    err = np.abs(ref.as_f64(got) - want)
    limit = atol + ref.ROUNDING[got.dtype] * np.abs(want)
    worst = np.unravel_index(np.argmax(err - limit), err.shape)
    assert np.all(err <= limit), f"at {worst}: got {ref.as_f64(got)[worst]}, want {want[worst]}"


@pytest.mark.parametrize("storage", list(ref.STORAGE))
@pytest.mark.parametrize("rows,dim", [(1, 1), (7, 3), (65, 384), (10, 1537)])
def test_normalize_rows(rt, rng, rows, dim, storage) -> None:
    x = ref.randn(rng, (rows, dim), ref.STORAGE[storage], scale=3.0)
    got = mnemo.normalize_rows(rt, x)
    assert got.shape == x.shape and got.dtype == x.dtype and mnemo.is_aligned(got)
    x64 = ref.as_f64(x)
    assert_close(got, x64 / np.linalg.norm(x64, axis=1, keepdims=True), 1e-6)


def test_normalize_zero_row_and_in_place(rt, rng) -> None:
    x = ref.randn(rng, (4, 9))
    x[2] = 0
    want = ref.as_f64(x)
    norms = np.linalg.norm(want, axis=1, keepdims=True)
    want = np.divide(want, norms, out=np.zeros_like(want), where=norms > 0)
    got = rt.normalize_rows(x, out=x)
    assert got is x
    assert np.all(x[2] == 0)
    assert_close(x, want, 1e-6)


def layer_norm_reference(x: np.ndarray, gamma, beta, eps: float) -> np.ndarray:
    x64 = ref.as_f64(x)
    mean = x64.mean(axis=1, keepdims=True)
    var = x64.var(axis=1, keepdims=True)
    g = np.ones(x.shape[1]) if gamma is None else gamma.astype(np.float64)
    b = np.zeros(x.shape[1]) if beta is None else beta.astype(np.float64)
    denom = np.sqrt(var + eps)
    xhat = np.divide(x64 - mean, denom, out=np.zeros_like(x64), where=denom > 0)
    return xhat * g + b


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("storage", list(ref.STORAGE))
@pytest.mark.parametrize("rows,dim", [(1, 2), (9, 5), (33, 768), (4, 4099)])
def test_layer_norm(rt, rng, rows, dim, storage, affine) -> None:
    # An offset mean checks that the statistics do not cancel badly.
    x = ref.randn(rng, (rows, dim), ref.STORAGE[storage], scale=2.0, offset=3.0)
    gamma = ref.randn(rng, (dim,)) if affine else None
    beta = ref.randn(rng, (dim,)) if affine else None
    got = mnemo.layer_norm(rt, x, gamma, beta, eps=1e-5)
    assert got.shape == x.shape and got.dtype == x.dtype and mnemo.is_aligned(got)
    want = layer_norm_reference(x, gamma, beta, 1e-5)
    g = 1.0 if gamma is None else float(np.max(np.abs(gamma)))
    assert_close(got, want, 1e-5 * g)


def test_layer_norm_constant_rows(rt, rng) -> None:
    x = mnemo.aligned_array(np.full((3, 6), 2.5), np.float32)
    beta = ref.randn(rng, (6,))
    gamma = ref.randn(rng, (6,))
    for eps in (0.0, 1e-5):
        got = mnemo.layer_norm(rt, x, gamma, beta, eps=eps)
        assert np.array_equal(got, np.broadcast_to(beta, got.shape)), eps


def test_layer_norm_in_place(rt, rng) -> None:
    x = ref.randn(rng, (5, 40))
    want = layer_norm_reference(x, None, None, 1e-3)
    assert rt.layer_norm(x, eps=1e-3, out=x) is x
    assert_close(x, want, 1e-5)


@pytest.mark.parametrize("eps", [-1.0, float("nan"), float("inf")])
def test_layer_norm_bad_eps(rt, rng, eps) -> None:
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.layer_norm(rt, ref.randn(rng, (2, 4)), eps=eps)
    assert exc.value.status == Status.E_INVALID_ARGUMENT


def test_partial_overlap_is_invalid(rt, rng) -> None:
    buf = ref.randn(rng, (10, 8))
    # Rows 0..7 in, rows 2..9 out: overlapping but not the same buffer. Row
    # offsets of 2 * 8 floats keep both views aligned.
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.normalize_rows(rt, buf[:8], out=buf[2:])
    assert exc.value.status == Status.E_INVALID_ARGUMENT
