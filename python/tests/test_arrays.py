"""Aligned allocation and bf16 conversion helpers."""

from __future__ import annotations

import numpy as np
import pytest

import mnemo


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint16, np.float64, np.uint64])
@pytest.mark.parametrize("shape", [(0,), (1,), (3, 5), (7, 1, 3), ()])
def test_aligned_empty(shape, dtype) -> None:
    a = mnemo.aligned_empty(shape, dtype)
    assert a.shape == shape and a.dtype == dtype
    assert a.ctypes.data % 16 == 0 and a.flags.c_contiguous and a.flags.writeable


def test_aligned_array_keeps_or_copies() -> None:
    base = mnemo.aligned_zeros(20, np.float32)
    assert mnemo.aligned_array(base) is base
    shifted = base[1:9]  # 4 bytes past a 16-byte boundary
    assert not mnemo.is_aligned(shifted)
    fixed = mnemo.aligned_array(shifted)
    assert mnemo.is_aligned(fixed) and np.array_equal(fixed, shifted)
    strided = mnemo.aligned_array(np.arange(12.0).reshape(3, 4).T, np.float32)
    assert strided.flags.c_contiguous and strided.dtype == np.float32
    assert np.array_equal(strided, np.arange(12.0).reshape(3, 4).T)
    assert mnemo.aligned_array(base, copy=True) is not base


def test_bf16_round_to_nearest_even() -> None:
    one = 1.0
    ulp = 2.0**-7  # bf16 spacing in [1, 2)
    x = np.array([one, one + ulp / 2, one + 3 * ulp / 2, one + ulp / 2 + 2.0**-20,
                  -one - ulp / 2, np.finfo(np.float32).max, -0.0, np.inf, -np.inf], dtype=np.float32)
    want = np.array([one, one, one + 2 * ulp, one + ulp, -one, np.inf, -0.0, np.inf,
                     -np.inf], dtype=np.float32)
    got = mnemo.bf16_to_f32(mnemo.f32_to_bf16(x))
    assert np.array_equal(got, want)
    assert np.signbit(got[6])
    nan = mnemo.bf16_to_f32(mnemo.f32_to_bf16(np.array([np.nan, -np.nan], np.float32)))
    assert np.isnan(nan).all()


def test_bf16_matches_exhaustive_rounding(rng: np.random.Generator) -> None:
    # Reference: pick the nearer of the two bf16 neighbours, ties to even.
    bits = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x) & (np.abs(x) < 3.0e38)]
    lo = (x.view(np.uint32) & 0xFFFF0000).view(np.float32).astype(np.float64)
    hi_bits = (x.view(np.uint32) & 0xFFFF0000) + 0x10000
    hi = hi_bits.view(np.float32).astype(np.float64)
    xd = x.astype(np.float64)
    lo_even = ((x.view(np.uint32) >> 16) & 1) == 0
    pick_lo = (np.abs(xd - lo) < np.abs(hi - xd)) | ((np.abs(xd - lo) == np.abs(hi - xd)) & lo_even)
    want = np.where(pick_lo, lo, hi)
    got = mnemo.bf16_to_f32(mnemo.f32_to_bf16(x)).astype(np.float64)
    assert np.array_equal(got, want)
    assert mnemo.f32_to_bf16(x).ctypes.data % 16 == 0
