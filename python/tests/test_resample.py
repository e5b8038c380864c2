"""resample() against numpy.interp (clamped at both ends), per row and dim."""

from __future__ import annotations

import numpy as np
import pytest

import mnemo
import reference as ref
from mnemo import Status


def increasing_times(rng, batch: int, n: int, dtype, start: float = 0.0) -> np.ndarray:
    steps = rng.uniform(0.05, 1.0, (batch, n))
    return mnemo.aligned_array(start + np.cumsum(steps, axis=1), dtype)


def targets_around(rng, src_times: np.ndarray, n_tgt: int) -> np.ndarray:
    """Targets in any order, some before the first and past the last time,
    some exactly on source times."""
    lo, hi = src_times[:, :1].astype(np.float64), src_times[:, -1:].astype(np.float64)
    span = hi - lo + 1.0
    t = lo - 0.2 * span + rng.random((src_times.shape[0], n_tgt)) * 1.4 * span
    t[:, 0] = src_times[:, src_times.shape[1] // 2]
    return mnemo.aligned_array(t, src_times.dtype)


def bound(data64: np.ndarray) -> float:
    """Error allowed for one row (its used samples): times are exact inputs,
    so the weight w = (t - t_i) / (t_{i+1} - t_i) carries a few f32 roundings
    whatever the time dtype; with |b - a| <= 2 max|x| and the fma's own
    rounding that stays under 8 ulps of the row's largest sample."""
    return 8 * ref.EPS32 * float(np.max(np.abs(data64)))


def check_against_interp(got, data, src_times, tgt_times, src_lengths=None, tgt_lengths=None):
    x = ref.as_f64(data)
    st, tt = src_times.astype(np.float64), tgt_times.astype(np.float64)
    batch, n_src, dim = x.shape
    rounding = ref.ROUNDING[got.dtype]
    got64 = ref.as_f64(got)
    for b in range(batch):
        s = n_src if src_lengths is None else int(src_lengths[b])
        n = tt.shape[1] if tgt_lengths is None else int(tgt_lengths[b])
        tol = bound(x[b, :s])
        for d in range(dim):
            want = np.interp(tt[b, :n], st[b, :s], x[b, :s, d])
            err = np.abs(got64[b, :n, d] - want)
            limit = tol + rounding * np.abs(want)
            assert np.all(err <= limit), (b, d, got64[b, :n, d], want)
        assert np.all(got64[b, n:] == 0), f"row {b} past tgt_length is not zero"


@pytest.mark.parametrize("time_dtype", [np.float64, np.float32])
@pytest.mark.parametrize("storage", list(ref.STORAGE))
@pytest.mark.parametrize("batch,n_src,dim,n_tgt", [(1, 1, 1, 4), (3, 2, 5, 7), (4, 37, 3, 50),
                                                  (2, 300, 64, 129)])
def test_resample_matches_interp(rt, rng, batch, n_src, dim, n_tgt, storage, time_dtype):
    data = ref.randn(rng, (batch, n_src, dim), ref.STORAGE[storage])
    src_times = increasing_times(rng, batch, n_src, time_dtype)
    tgt_times = targets_around(rng, src_times, n_tgt)
    got = mnemo.resample(rt, data, src_times, tgt_times)
    assert got.shape == (batch, n_tgt, dim) and got.dtype == data.dtype and mnemo.is_aligned(got)
    check_against_interp(got, data, src_times, tgt_times)


@pytest.mark.parametrize("time_dtype", [np.float64, np.float32])
def test_lengths(rt, rng, time_dtype) -> None:
    batch, n_src, dim, n_tgt = 5, 20, 6, 15
    data = ref.randn(rng, (batch, n_src, dim))
    src_times = increasing_times(rng, batch, n_src, time_dtype)
    # Past a row's length the times are garbage: they must not be read.
    src_lengths = mnemo.aligned_array([1, 20, 7, 2, 13], np.uint64)
    tgt = np.empty((batch, n_tgt))
    for b, s in enumerate(src_lengths.tolist()):
        lo, hi = float(src_times[b, 0]), float(src_times[b, s - 1])
        tgt[b] = rng.uniform(lo - 1.0, hi + 1.0, n_tgt)
        src_times[b, s:] = -1e6
    tgt_times = mnemo.aligned_array(tgt, time_dtype)
    tgt_lengths = mnemo.aligned_array([15, 0, 4, 15, 9], np.uint64)
    out = mnemo.aligned_empty((batch, n_tgt, dim), np.float32)
    out[...] = 99.0
    got = mnemo.resample(rt, data, src_times, tgt_times, src_lengths, tgt_lengths, out=out)
    assert got is out
    check_against_interp(got, data, src_times, tgt_times, src_lengths, tgt_lengths)


def test_clamps_instead_of_extrapolating(rt) -> None:
    data = mnemo.aligned_array([[[0.0], [10.0]]], np.float32)
    times = mnemo.aligned_array([[1.0, 2.0]], np.float64)
    tgt = mnemo.aligned_array([[-5.0, 1.0, 1.25, 2.0, 7.0]], np.float64)
    got = mnemo.resample(rt, data, times, tgt)
    assert got[0, :, 0].tolist() == [0.0, 0.0, 2.5, 10.0, 10.0]


def test_equal_neighbouring_times(rt, rng) -> None:
    # Times 0, 1, 1, 2: the header's rule (largest i with t_i <= t) picks
    # sample 2 at t = 1 and interpolates samples 2 -> 3 after it.
    data = ref.randn(rng, (1, 4, 3))
    times = mnemo.aligned_array([[0.0, 1.0, 1.0, 2.0]], np.float64)
    tgt = mnemo.aligned_array([[0.5, 1.0, 1.5, 0.999]], np.float64)
    got = mnemo.resample(rt, data, times, tgt)
    want = ref.resample(data, times, tgt, [4], [4])
    assert np.all(np.abs(got - want) <= 1e-6)


def test_epoch_times_in_float64(rt, rng) -> None:
    # Unix-epoch times 10 ms apart: only float64 arithmetic on times resolves them.
    batch, n_src, dim = 2, 50, 4
    data = ref.randn(rng, (batch, n_src, dim))
    src = mnemo.aligned_array(1.7e9 + np.arange(n_src) * 0.01 + np.zeros((batch, 1)), np.float64)
    tgt = mnemo.aligned_array(1.7e9 + rng.uniform(-0.05, 0.55, (batch, 40)), np.float64)
    got = mnemo.resample(rt, data, src, tgt)
    check_against_interp(got, data, src, tgt)


def test_decreasing_times_not_sorted(rt, rng) -> None:
    data = ref.randn(rng, (3, 5, 2))
    times = increasing_times(rng, 3, 5, np.float64)
    times[2, 3] = times[2, 1]
    out = mnemo.aligned_zeros((3, 4, 2), np.float32)
    out[...] = 5.0
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.resample(rt, data, times, increasing_times(rng, 3, 4, np.float64), out=out)
    assert exc.value.status == Status.E_NOT_SORTED
    assert "2" in exc.value.message and "3" in exc.value.message, exc.value.message
    assert np.all(out == 5.0)


@pytest.mark.parametrize("where", ["data", "src_times", "tgt_times"])
def test_non_finite_inputs(rt, rng, where) -> None:
    args = {"data": ref.randn(rng, (2, 4, 3)),
            "src_times": increasing_times(rng, 2, 4, np.float64),
            "tgt_times": increasing_times(rng, 2, 6, np.float64)}
    # The last time of row 1 for src_times, so that the row stays sorted.
    args[where].reshape(-1)[7] = np.nan if where == "data" else np.inf
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.resample(rt, **args)
    assert exc.value.status == Status.E_NON_FINITE


@pytest.mark.parametrize("src_lengths,tgt_lengths", [([0, 4], None), ([5, 4], None),
                                                     (None, [7, 1])])
def test_lengths_out_of_range(rt, rng, src_lengths, tgt_lengths) -> None:
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.resample(rt, ref.randn(rng, (2, 4, 3)), increasing_times(rng, 2, 4, np.float64),
                       increasing_times(rng, 2, 6, np.float64), src_lengths, tgt_lengths)
    assert exc.value.status == Status.E_INVALID_ARGUMENT
