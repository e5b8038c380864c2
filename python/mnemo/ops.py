"""The stateless operations: similarity, pair scoring, resampling and row
normalisation. Each takes the runtime to run on as its first argument (any
object with .handle and .active_backend(), i.e. a mnemo.Runtime; this module
does not import runtime.py, which imports it).

Inputs may be numpy arrays, lists, or tensors of other frameworks; see
mnemo.tensors for where a call runs and what it returns, and
mnemo.arrays.host_input for the conversions (copy=False refuses them).
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Union

import numpy as np

from ._lib import check, lib
from .arrays import INDICES, mnemo_dtype
from .enums import Metric, Status, parse_enum
from .errors import MnemoTypeError, MnemoValueError
from .tensors import Placement, ptr

# Element types accepted for vector data: f32, f16 and bf16 bits.
DATA_DTYPES = (np.float32, np.float16, np.uint16)
TIME_DTYPES = (np.float64, np.float32)
INDEX_DTYPES = (np.uint64, np.uint32)

MetricLike = Union[Metric, str, int]
RuntimeLike = Any


def _shape_of(a: Any) -> tuple:
    return tuple(a.shape)


def _check_shape(a: Any, name: str, shape: tuple) -> None:
    if _shape_of(a) != tuple(shape):
        raise MnemoValueError(Status.E_SHAPE,
                              f"{name} has shape {_shape_of(a)}; expected {tuple(shape)}")


def similarity(runtime: RuntimeLike, queries: Any, targets: Any,
               metric: MetricLike = "cosine", *, out: Any = None,
               copy: Optional[bool] = None) -> Any:
    """The raw score matrix (mnemo_similarity, or mnemo_similarity_device for
    CUDA tensors on a CUDA runtime).

    Args:
        queries: float32 [nq, dim], or [dim] for one query (other real
            dtypes are converted).
        targets: [n, dim] of float32, float16 or uint16 (bf16 bits; torch
            bfloat16 on the GPU).
        metric: "cosine", "dot" or "l2sq" (squared L2 distance).
        out: optional float32 output of the result's shape.
        copy: False refuses inputs that would need a conversion or transfer.

    Returns:
        float32 [nq, n] (or [n] for a 1-D query), scores[i, j] =
        metric(queries[i], targets[j]).
    """
    m = parse_enum(metric, Metric, "metric")
    where = Placement(runtime, queries, (targets,), copy)
    q = where.input(queries, "queries", [np.float32], ndim=(1, 2))
    t = where.input(targets, "targets", DATA_DTYPES, ndim=2)
    one = len(q.shape) == 1
    nq, qdim = (1, q.shape[0]) if one else q.shape
    n, dim = t.shape
    if qdim != dim:
        raise MnemoValueError(Status.E_SHAPE, f"queries have dimension {qdim}, targets {dim}")
    res = where.output(out, "out", (n,) if one else (nq, n), np.float32)
    if where.on_device:
        if nq and n:
            check(lib.mnemo_similarity_device(runtime.handle, m, ptr(q), nq, ptr(t),
                                              mnemo_dtype(t), n, dim, ptr(res), where.stream))
    else:
        check(lib.mnemo_similarity(runtime.handle, m, ptr(q), nq, ptr(t),
                                   mnemo_dtype(t), n, dim, ptr(res)))
    return where.result(res)


def score_pairs(runtime: RuntimeLike, table: Any, src: Any, tgt: Any,
                metric: MetricLike = "cosine", *, out: Any = None,
                copy: Optional[bool] = None) -> Any:
    """One score per (src, tgt) pair, in input order (mnemo_score_pairs, or
    its _device twin for CUDA tensors).

    Args:
        table: [n_items, dim] of float32, float16 or uint16 (bf16 bits).
        src, tgt: [n_pairs] non-negative row indices into table: uint64 or
            uint32 (int64 / int32 are checked and viewed; lists converted).
        metric: "cosine", "dot" or "l2sq".
        out: optional float32 [n_pairs] output.
        copy: False refuses inputs that would need a conversion or transfer.

    Returns:
        float32 [n_pairs]: scores[p] = metric(table[src[p]], table[tgt[p]]).
        An index >= n_items raises MnemoError(MNEMO_E_OUT_OF_RANGE).
    """
    m = parse_enum(metric, Metric, "metric")
    where = Placement(runtime, table, (src, tgt), copy)
    tab = where.input(table, "table", DATA_DTYPES, ndim=2)
    s = where.input(src, "src", INDEX_DTYPES, ndim=1, kind=INDICES)
    d = where.input(tgt, "tgt", INDEX_DTYPES, ndim=1, kind=INDICES)
    if s.dtype != d.dtype:
        raise MnemoTypeError(Status.E_DTYPE, f"src is {s.dtype} but tgt is {d.dtype}")
    _check_shape(d, "tgt", s.shape)
    n_items, dim = tab.shape
    res = where.output(out, "out", s.shape, np.float32)
    if where.on_device:
        if s.shape[0]:
            check(lib.mnemo_score_pairs_device(runtime.handle, m, ptr(tab), mnemo_dtype(tab),
                                               n_items, dim, ptr(s), ptr(d), mnemo_dtype(s),
                                               s.shape[0], ptr(res), where.stream))
    else:
        check(lib.mnemo_score_pairs(runtime.handle, m, ptr(tab), mnemo_dtype(tab),
                                    n_items, dim, ptr(s), ptr(d), mnemo_dtype(s),
                                    s.shape[0], ptr(res)))
    return where.result(res)


def resample(runtime: RuntimeLike, data: Any, src_times: Any, tgt_times: Any,
             src_lengths: Any = None, tgt_lengths: Any = None, *,
             out: Any = None, copy: Optional[bool] = None) -> Any:
    """Linear interpolation of trajectories at new times (mnemo_resample, or
    its _device twin for CUDA tensors).

    Args:
        data: [batch, n_src, dim] of float32, float16 or uint16 (bf16 bits).
        src_times: [batch, n_src], non-decreasing per row, float64 or float32.
        tgt_times: [batch, n_tgt], any order; converted to src_times' dtype.
        src_lengths: optional non-negative ints [batch], each in [1, n_src]:
            only the first src_lengths[b] samples of row b are used.
        tgt_lengths: optional non-negative ints [batch], each in [0, n_tgt]:
            targets past it are not read and their output rows are zero.
        out: optional output [batch, n_tgt, dim] of data's dtype; it must not
            overlap the inputs.
        copy: False refuses inputs that would need a conversion or transfer.

    Returns:
        [batch, n_tgt, dim] of data's dtype. Targets outside a row's time
        range take the end sample (clamped, never extrapolated).
    """
    where = Placement(runtime, data, (src_times, tgt_times, src_lengths, tgt_lengths), copy)
    x = where.input(data, "data", DATA_DTYPES, ndim=3)
    st = where.input(src_times, "src_times", TIME_DTYPES, ndim=2)
    tt = where.input(tgt_times, "tgt_times", [st.dtype], ndim=2)
    batch, n_src, dim = x.shape
    _check_shape(st, "src_times", (batch, n_src))
    if tt.shape[0] != batch:
        raise MnemoValueError(Status.E_SHAPE,
                              f"tgt_times has {tt.shape[0]} rows; data has {batch}")
    n_tgt = tt.shape[1]
    opts = lib.mnemo_resample_options_default()
    lengths = {}
    for name, value in (("src_lengths", src_lengths), ("tgt_lengths", tgt_lengths)):
        if value is not None:
            arr = where.input(value, name, [np.uint64], ndim=1, kind=INDICES)
            _check_shape(arr, name, (batch,))
            lengths[name] = arr  # kept alive until the call returns
            setattr(opts, name, ptr(arr))
    res = where.output(out, "out", (batch, n_tgt, dim), x.dtype)
    if where.on_device:
        if batch and n_tgt:
            check(lib.mnemo_resample_device(runtime.handle, ptr(x), mnemo_dtype(x), batch,
                                            n_src, dim, ptr(st), ptr(tt), mnemo_dtype(st),
                                            n_tgt, ctypes.byref(opts), ptr(res), where.stream))
    else:
        check(lib.mnemo_resample(runtime.handle, ptr(x), mnemo_dtype(x), batch, n_src,
                                 dim, ptr(st), ptr(tt), mnemo_dtype(st), n_tgt,
                                 ctypes.byref(opts), ptr(res)))
    return where.result(res)


def normalize_rows(runtime: RuntimeLike, x: Any, *, out: Any = None,
                   copy: Optional[bool] = None) -> Any:
    """Each row divided by its L2 norm; a zero row stays zero
    (mnemo_normalize_rows, or its _device twin for CUDA tensors).

    Args:
        x: [rows, dim] of float32, float16 or uint16 (bf16 bits).
        out: optional output of x's shape and dtype; out=x works in place.
        copy: False refuses inputs that would need a conversion or transfer.
    """
    where = Placement(runtime, x, (), copy)
    a = where.input(x, "x", DATA_DTYPES, ndim=2)
    res = where.output(out, "out", a.shape, a.dtype)
    if where.on_device:
        if a.shape[0]:
            check(lib.mnemo_normalize_rows_device(runtime.handle, ptr(a), ptr(res),
                                                  mnemo_dtype(a), a.shape[0], a.shape[1],
                                                  where.stream))
    else:
        check(lib.mnemo_normalize_rows(runtime.handle, ptr(a), ptr(res), mnemo_dtype(a),
                                       a.shape[0], a.shape[1]))
    return where.result(res)


def layer_norm(runtime: RuntimeLike, x: Any, gamma: Any = None,
               beta: Any = None, eps: float = 1e-5, *,
               out: Any = None, copy: Optional[bool] = None) -> Any:
    """LayerNorm over each row: (x - mean) / sqrt(var + eps) * gamma + beta,
    with the biased variance (mnemo_layer_norm, or its _device twin).

    Args:
        x: [rows, dim] of float32, float16 or uint16 (bf16 bits).
        gamma, beta: optional float32 [dim] (default ones / zeros).
        eps: finite and >= 0.
        out: optional output of x's shape and dtype; out=x works in place.
        copy: False refuses inputs that would need a conversion or transfer.
    """
    where = Placement(runtime, x, (gamma, beta), copy)
    a = where.input(x, "x", DATA_DTYPES, ndim=2)
    dim = a.shape[1]
    g = b = None
    if gamma is not None:
        g = where.input(gamma, "gamma", [np.float32], ndim=1)
        _check_shape(g, "gamma", (dim,))
    if beta is not None:
        b = where.input(beta, "beta", [np.float32], ndim=1)
        _check_shape(b, "beta", (dim,))
    res = where.output(out, "out", a.shape, a.dtype)
    if where.on_device:
        if a.shape[0]:
            check(lib.mnemo_layer_norm_device(runtime.handle, ptr(a), ptr(res), mnemo_dtype(a),
                                              a.shape[0], dim, ptr(g), ptr(b), float(eps),
                                              where.stream))
    else:
        check(lib.mnemo_layer_norm(runtime.handle, ptr(a), ptr(res), mnemo_dtype(a),
                                   a.shape[0], dim, ptr(g), ptr(b), float(eps)))
    return where.result(res)
