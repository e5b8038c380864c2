"""topk_merge: the library's one top-k merge (mnemo_topk_merge)."""

from __future__ import annotations

from typing import Any, Sequence, Tuple, Union

import numpy as np

from ._lib import check, lib
from .arrays import aligned_empty, aligned_zeros, ptr
from .enums import Metric, Status, parse_enum
from .errors import MnemoValueError


def topk_merge(ids: Sequence[Any], scores: Sequence[Any],
               metric: Union[Metric, str, int], k: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Merges search results of disjoint or overlapping parts into one list.

    ids, scores: one [nq x k] uint64 / float32 array per part (as
    Store.search returns them), or stacked [parts x nq x k] arrays. Returns
    (ids, scores) of shape [nq x k]: best first by `metric` (higher score for
    cosine/dot, lower for l2sq), equal scores to the smaller id, padding
    (MNEMO_NO_ID / NaN) skipped, an id in several parts kept once. k = 0
    takes the parts' k; a larger or smaller k is applied by padding the
    inputs or cutting the output.
    """
    m = int(parse_enum(metric, Metric, "metric"))
    id_parts = [np.asarray(a, dtype=np.uint64) for a in ids] if not isinstance(ids, np.ndarray) else list(ids)
    sc_parts = [np.asarray(a, dtype=np.float32) for a in scores] if not isinstance(scores, np.ndarray) else list(scores)
    if len(id_parts) != len(sc_parts):
        raise MnemoValueError(Status.E_SHAPE, f"{len(id_parts)} id lists but {len(sc_parts)} score lists")
    if not id_parts:
        raise MnemoValueError(Status.E_INVALID_ARGUMENT, "no result lists to merge")
    shape = np.asarray(id_parts[0]).shape
    if len(shape) != 2:
        raise MnemoValueError(Status.E_SHAPE, f"each id list must be [nq x k], not {shape}")
    for i, (a, b) in enumerate(zip(id_parts, sc_parts)):
        if a.shape != shape or b.shape != shape:
            raise MnemoValueError(Status.E_SHAPE,
                                  f"part {i} has shapes {a.shape} / {b.shape}; expected {shape}")
    nq, k_in = int(shape[0]), int(shape[1])
    k_out = int(k) if k else k_in
    if k_out <= 0:
        raise MnemoValueError(Status.E_INVALID_ARGUMENT, "k must be at least 1")
    # One k for the call: inputs widened with padding when k_out is larger.
    k_call = max(k_in, k_out)
    parts = len(id_parts)
    in_ids = aligned_empty((parts, nq, k_call), np.uint64)
    in_sc = aligned_empty((parts, nq, k_call), np.float32)
    in_ids[...] = np.uint64(2**64 - 1)
    in_sc[...] = np.nan
    for i in range(parts):
        in_ids[i, :, :k_in] = id_parts[i]
        in_sc[i, :, :k_in] = sc_parts[i]
    out_ids = aligned_zeros((nq, k_call), np.uint64)
    out_sc = aligned_zeros((nq, k_call), np.float32)
    check(lib.mnemo_topk_merge(m, parts, nq, k_call, ptr(in_ids), ptr(in_sc), ptr(out_ids), ptr(out_sc)))
    return out_ids[:, :k_out].copy(), out_sc[:, :k_out].copy()
