"""float64 references and input generators for the tests."""

from __future__ import annotations

from typing import Dict, Sequence

import numpy as np

import mnemo

# Storage dtypes as the numpy dtypes the bindings take.
STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}

EPS32 = float(np.finfo(np.float32).eps)
# Half the spacing of values near 1, relative: the rounding of an output.
ROUNDING = {np.dtype(np.float32): 2.0**-24, np.dtype(np.float16): 2.0**-11,
            np.dtype(np.uint16): 2.0**-8}


def randn(rng: np.random.Generator, shape: Sequence[int], dtype: type = np.float32,
          scale: float = 1.0, offset: float = 0.0) -> np.ndarray:
    """Aligned random normal values, never zero, stored in `dtype`."""
    x = rng.standard_normal(shape) * scale + offset
    x[x == 0] = 0.5
    return to_storage(x, dtype)


def to_storage(x: np.ndarray, dtype: type) -> np.ndarray:
    """Rounds float values into a storage dtype (uint16 = bf16 bits)."""
    if np.dtype(dtype) == np.uint16:
        return mnemo.f32_to_bf16(np.asarray(x, dtype=np.float32))
    return mnemo.aligned_array(x, dtype)


def as_f64(a: np.ndarray) -> np.ndarray:
    """The stored values of an array as float64 (uint16 = bf16 bits)."""
    if a.dtype == np.uint16:
        return mnemo.bf16_to_f32(a).astype(np.float64)
    return a.astype(np.float64)


def similarity(q: np.ndarray, t: np.ndarray, metric: str) -> np.ndarray:
    """metric(q[i], t[j]) in float64 over the stored values."""
    q, t = as_f64(q), as_f64(t)
    if metric == "dot":
        return q @ t.T
    if metric == "cosine":
        nq = np.linalg.norm(q, axis=1)
        nt = np.linalg.norm(t, axis=1)
        denom = np.outer(nq, nt)
        with np.errstate(invalid="ignore", divide="ignore"):
            s = (q @ t.T) / denom
        return np.where(denom == 0, 0.0, s)
    diff = q[:, None, :] - t[None, :, :]
    return np.einsum("ijk,ijk->ij", diff, diff)


def tolerance(q: np.ndarray, t: np.ndarray, ref: np.ndarray, metric: str) -> np.ndarray:
    """The contract's bound per score: 1e-5 absolute for cosine, 1e-5 times
    the norms for dot (the unit-vector bound, scaled), 1e-5 relative for l2sq."""
    if metric == "cosine":
        return np.full(ref.shape, 1e-5)
    if metric == "dot":
        nq = np.linalg.norm(as_f64(q), axis=1)
        nt = np.linalg.norm(as_f64(t), axis=1)
        return 1e-5 * np.outer(nq, nt)
    return 1e-5 * np.abs(ref)


def assert_scores(got: np.ndarray, q: np.ndarray, t: np.ndarray, metric: str) -> None:
    ref = similarity(q, t, metric)
    tol = tolerance(q, t, ref, metric)
    err = np.abs(got.astype(np.float64) - ref)
    bad = np.argwhere(err > tol)
    assert bad.size == 0, (f"{len(bad)} scores off, first at {tuple(bad[0])}: "
                           f"got {got[tuple(bad[0])]}, want {ref[tuple(bad[0])]}")


def assert_topk(ids: np.ndarray, scores: np.ndarray, ref: Dict[int, float],
                tol: Dict[int, float], k: int, higher_better: bool) -> None:
    """Checks one query's top-k against reference scores by id: the right
    count, NO_ID/NaN padding, scores matching the reference, best first with
    ties by smaller id, and nothing better left out (up to the tolerance)."""
    n = min(k, len(ref))
    assert ids.shape == (k,) and scores.shape == (k,)
    assert np.all(ids[n:] == mnemo.NO_ID), ids
    assert np.all(np.isnan(scores[n:])), scores
    top = [int(i) for i in ids[:n]]
    assert len(set(top)) == n, f"repeated ids {top}"
    assert set(top) <= set(ref), f"unknown ids {set(top) - set(ref)}"
    for i, s in zip(top, scores[:n]):
        assert abs(float(s) - ref[i]) <= tol[i], f"id {i}: got {s}, want {ref[i]}"
    sign = -1.0 if higher_better else 1.0
    keys = [(sign * float(s), i) for i, s in zip(top, scores[:n])]
    assert keys == sorted(keys), f"not best first with ties by id: {keys}"
    if n:
        worst = max(sign * ref[i] - tol[i] for i in top)
        for i, r in ref.items():
            if i not in top:
                assert sign * r + tol[i] >= worst, f"id {i} ({r}) better than a returned one"


def resample(data: np.ndarray, src_times: np.ndarray, tgt_times: np.ndarray,
             src_lengths: np.ndarray, tgt_lengths: np.ndarray) -> np.ndarray:
    """The header's definition in float64: i is the largest index with
    t_i <= t, w = (t - t_i) / (t_{i+1} - t_i) clamped to [0, 1]; before the
    first time the first sample, past the last time the last sample."""
    x, st, tt = as_f64(data), src_times.astype(np.float64), tgt_times.astype(np.float64)
    batch, _, dim = x.shape
    out = np.zeros((batch, tt.shape[1], dim))
    for b in range(batch):
        s = int(src_lengths[b])
        for j in range(int(tgt_lengths[b])):
            t = tt[b, j]
            i = int(np.searchsorted(st[b, :s], t, side="right")) - 1
            if i < 0:
                out[b, j] = x[b, 0]
            elif i >= s - 1:
                out[b, j] = x[b, s - 1]
            else:
                w = (t - st[b, i]) / (st[b, i + 1] - st[b, i])
                w = min(max(w, 0.0), 1.0)
                out[b, j] = x[b, i] + w * (x[b, i + 1] - x[b, i])
    return out
