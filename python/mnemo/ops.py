"""The stateless operations: similarity, pair scoring, resampling and row
normalisation. Each takes the Runtime to run on as its first argument."""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np

from ._lib import check, lib
from .arrays import (as_data, as_ids, as_input, check_array, check_shape,
                     mnemo_dtype, output, ptr)
from .enums import DType, Metric, Status, parse_enum
from .errors import MnemoTypeError, MnemoValueError
from .tensors import DeviceArray, empty_like_framework, is_device_tensor, stream_of

if TYPE_CHECKING:
    from .runtime import Runtime

# Element types accepted for vector data: f32, f16 and bf16 bits.
DATA_DTYPES = (np.float32, np.float16, np.uint16)
TIME_DTYPES = (np.float64, np.float32)
INDEX_DTYPES = (np.uint64, np.uint32)

MetricLike = Union[Metric, str, int]


def similarity(runtime: "Runtime", queries: Any, targets: Any,
               metric: MetricLike = "cosine", *,
               out: Optional[np.ndarray] = None, copy: bool = True) -> np.ndarray:
    """The raw score matrix (mnemo_similarity).

    Args:
        queries: float32 [nq, dim], or [dim] for one query.
        targets: [n, dim] of float32, float16 or uint16 (bf16 bits).
        metric: "cosine", "dot" or "l2sq" (squared L2 distance).
        out: optional float32 output of the result's shape.
        copy: inputs that are not aligned C-contiguous arrays of an accepted
            dtype are converted with one copy; False raises instead.

    GPU tensors (torch, CuPy: both arguments) are scored on the device on
    the producer's stream (mnemo_similarity_device); the result is a float32
    tensor of the same framework and device.

    Returns:
        float32 [nq, n] (or [n] for a 1-D query), scores[i, j] =
        metric(queries[i], targets[j]).
    """
    m = parse_enum(metric, Metric, "metric")
    if is_device_tensor(queries) or is_device_tensor(targets):
        return _similarity_device(runtime, m, queries, targets)
    q = as_data(queries, "queries", [np.float32], (1, 2), copy)
    t = as_data(targets, "targets", DATA_DTYPES, 2, copy)
    q2 = q.reshape(1, -1) if q.ndim == 1 else q
    n, dim = t.shape
    if q2.shape[1] != dim:
        raise MnemoValueError(Status.E_SHAPE,
                              f"queries have dimension {q2.shape[1]}, targets {dim}")
    nq = q2.shape[0]
    res = output(out, "out", (n,) if q.ndim == 1 else (nq, n), np.float32)
    check(lib.mnemo_similarity(runtime.handle, m, ptr(q2), nq, ptr(t),
                               mnemo_dtype(t), n, dim, ptr(res)))
    return res


def _similarity_device(runtime: "Runtime", m: int, queries: Any, targets: Any) -> Any:
    """similarity() for GPU tensors: mnemo_similarity_device on the
    producer's stream; the scores are a tensor of the queries' framework."""
    for name, value in (("queries", queries), ("targets", targets)):
        if not is_device_tensor(value):
            raise MnemoTypeError(Status.E_DTYPE, f"{name} is in host memory while the other "
                                 "argument is a GPU tensor; give both on the device")
    q = DeviceArray(queries, "queries")
    t = DeviceArray(targets, "targets")
    if q.dtype != DType.F32 or len(q.shape) not in (1, 2):
        raise MnemoTypeError(Status.E_DTYPE, "queries must be a float32 [nq, dim] or [dim] tensor")
    if len(t.shape) != 2 or t.dtype not in (DType.F32, DType.F16, DType.BF16):
        raise MnemoTypeError(Status.E_DTYPE,
                             "targets must be a float32/float16/bfloat16 [n, dim] tensor")
    nq, qdim = (1, q.shape[0]) if len(q.shape) == 1 else q.shape
    n, dim = t.shape
    if qdim != dim:
        raise MnemoValueError(Status.E_SHAPE, f"queries have dimension {qdim}, targets {dim}")
    res = empty_like_framework(q, (n,) if len(q.shape) == 1 else (nq, n), DType.F32)
    check(lib.mnemo_similarity_device(runtime.handle, m, q.ptr, nq, t.ptr, t.dtype, n, dim,
                                      DeviceArray(res, "scores").ptr, stream_of(q)))
    return res


def score_pairs(runtime: "Runtime", table: np.ndarray, src: Any, tgt: Any,
                metric: MetricLike = "cosine", *,
                out: Optional[np.ndarray] = None) -> np.ndarray:
    """One score per (src, tgt) pair, in input order (mnemo_score_pairs).

    Args:
        table: [n_items, dim] of float32, float16 or uint16 (bf16 bits).
        src, tgt: [n_pairs] row indices into table, both uint64 or both
            uint32 (lists are converted to uint64).
        metric: "cosine", "dot" or "l2sq".
        out: optional float32 [n_pairs] output.

    Returns:
        float32 [n_pairs]: scores[p] = metric(table[src[p]], table[tgt[p]]).
        An index >= n_items raises MnemoError(MNEMO_E_OUT_OF_RANGE).
    """
    m = parse_enum(metric, Metric, "metric")
    tab = check_array(table, "table", DATA_DTYPES, ndim=2)
    s = as_ids(src, "src", INDEX_DTYPES)
    d = as_ids(tgt, "tgt", INDEX_DTYPES)
    if s.dtype != d.dtype:
        raise MnemoTypeError(Status.E_DTYPE, f"src is {s.dtype} but tgt is {d.dtype}")
    check_shape(d, "tgt", s.shape)
    n_items, dim = tab.shape
    res = output(out, "out", s.shape, np.float32)
    check(lib.mnemo_score_pairs(runtime.handle, m, ptr(tab), mnemo_dtype(tab),
                                n_items, dim, ptr(s), ptr(d), mnemo_dtype(s),
                                s.shape[0], ptr(res)))
    return res


def resample(runtime: "Runtime", data: np.ndarray, src_times: np.ndarray,
             tgt_times: np.ndarray, src_lengths: Any = None,
             tgt_lengths: Any = None, *,
             out: Optional[np.ndarray] = None) -> np.ndarray:
    """Linear interpolation of trajectories at new times (mnemo_resample).

    Args:
        data: [batch, n_src, dim] of float32, float16 or uint16 (bf16 bits).
        src_times: [batch, n_src], non-decreasing per row, float64 or float32.
        tgt_times: [batch, n_tgt], same dtype as src_times, any order.
        src_lengths: optional uint64 [batch], each in [1, n_src]: only the
            first src_lengths[b] samples of row b are used.
        tgt_lengths: optional uint64 [batch], each in [0, n_tgt]: targets
            past it are not read and their output rows are zero.
        out: optional output [batch, n_tgt, dim] of data's dtype; it must not
            overlap the inputs.

    Returns:
        [batch, n_tgt, dim] of data's dtype. Targets outside a row's time
        range take the end sample (clamped, never extrapolated).
    """
    x = check_array(data, "data", DATA_DTYPES, ndim=3)
    st = check_array(src_times, "src_times", TIME_DTYPES, ndim=2)
    tt = check_array(tgt_times, "tgt_times", TIME_DTYPES, ndim=2)
    if tt.dtype != st.dtype:
        raise MnemoTypeError(Status.E_DTYPE,
                             f"src_times are {st.dtype} but tgt_times {tt.dtype}")
    batch, n_src, dim = x.shape
    check_shape(st, "src_times", (batch, n_src))
    if tt.shape[0] != batch:
        raise MnemoValueError(Status.E_SHAPE,
                              f"tgt_times has {tt.shape[0]} rows; data has {batch}")
    n_tgt = tt.shape[1]
    opts = lib.mnemo_resample_options_default()
    lengths = {}
    for name, value in (("src_lengths", src_lengths), ("tgt_lengths", tgt_lengths)):
        if value is not None:
            arr = as_input(value, name, [np.uint64], ndim=1)
            check_shape(arr, name, (batch,))
            lengths[name] = arr  # kept alive until the call returns
            setattr(opts, name, ptr(arr))
    res = output(out, "out", (batch, n_tgt, dim), x.dtype)
    check(lib.mnemo_resample(runtime.handle, ptr(x), mnemo_dtype(x), batch, n_src,
                             dim, ptr(st), ptr(tt), mnemo_dtype(st), n_tgt,
                             ctypes.byref(opts), ptr(res)))
    return res


def normalize_rows(runtime: "Runtime", x: np.ndarray, *,
                   out: Optional[np.ndarray] = None) -> np.ndarray:
    """Each row divided by its L2 norm; a zero row stays zero
    (mnemo_normalize_rows).

    Args:
        x: [rows, dim] of float32, float16 or uint16 (bf16 bits).
        out: optional output of x's shape and dtype; out=x works in place.
    """
    a = check_array(x, "x", DATA_DTYPES, ndim=2)
    res = output(out, "out", a.shape, a.dtype)
    check(lib.mnemo_normalize_rows(runtime.handle, ptr(a), ptr(res), mnemo_dtype(a),
                                   a.shape[0], a.shape[1]))
    return res


def layer_norm(runtime: "Runtime", x: np.ndarray, gamma: Any = None,
               beta: Any = None, eps: float = 1e-5, *,
               out: Optional[np.ndarray] = None) -> np.ndarray:
    """LayerNorm over each row: (x - mean) / sqrt(var + eps) * gamma + beta,
    with the biased variance (mnemo_layer_norm).

    Args:
        x: [rows, dim] of float32, float16 or uint16 (bf16 bits).
        gamma, beta: optional float32 [dim] (default ones / zeros).
        eps: finite and >= 0.
        out: optional output of x's shape and dtype; out=x works in place.
    """
    a = check_array(x, "x", DATA_DTYPES, ndim=2)
    dim = a.shape[1]
    g = b = None
    if gamma is not None:
        g = as_input(gamma, "gamma", [np.float32], ndim=1)
        check_shape(g, "gamma", (dim,))
    if beta is not None:
        b = as_input(beta, "beta", [np.float32], ndim=1)
        check_shape(b, "beta", (dim,))
    res = output(out, "out", a.shape, a.dtype)
    check(lib.mnemo_layer_norm(runtime.handle, ptr(a), ptr(res), mnemo_dtype(a),
                               a.shape[0], dim, ptr(g), ptr(b), float(eps)))
    return res
