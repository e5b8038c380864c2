"""bfloat16 as uint16 bit patterns: numpy has no bf16 dtype, so mnemo takes
bf16 data as uint16 arrays holding the upper half of each binary32."""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import aligned_empty


def f32_to_bf16(a: Any) -> np.ndarray:
    """Rounds float32 values to bf16 (nearest, ties to even), as mnemo does
    when f32 data goes into bf16 storage. Returns an aligned uint16 array.

    NaN stays NaN (quiet); overflow past the largest bf16 gives infinity.
    """
    f = np.asarray(a, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    lsb = (bits >> 16) & 1
    rounded = ((bits + 0x7FFF + lsb) >> 16).astype(np.uint16)
    # Rounding could carry a NaN's payload into infinity: force a quiet NaN.
    quiet_nan = ((bits >> 16) | 0x0040).astype(np.uint16)
    out = aligned_empty(f.shape, np.uint16)
    out[...] = np.where(np.isnan(f), quiet_nan, rounded)
    return out


def bf16_to_f32(bits: Any) -> np.ndarray:
    """Widens bf16 bit patterns (uint16) to float32 exactly. Returns an
    aligned float32 array."""
    b = np.asarray(bits)
    if b.dtype != np.uint16:
        raise TypeError(f"bf16 bits must be uint16, not {b.dtype}")
    out = aligned_empty(b.shape, np.float32)
    out.view(np.uint32)[...] = b.astype(np.uint32) << 16
    return out
