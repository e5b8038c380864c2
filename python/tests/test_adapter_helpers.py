"""The compiled helpers of the framework adapters (mnemo.integrations._common):
each gives what its Python form gives, or declines (None) and leaves the
case to it."""

from __future__ import annotations

import math
from typing import Any, List

import numpy as np
import pytest

import mnemo
from mnemo import _native
from mnemo.integrations import _common as c

ext = _native.ext


def test_project_plain_is_project_of_flat_metadata(rng) -> None:
    metas: List[Any] = []
    for i in range(300):
        m = {"s": f"v{i}", "é日": "x" * int(rng.integers(0, 300)), "i": int(rng.integers(-9, 9)),
             "big": 2**63 - 1, "neg": -(2**63), "f": float(rng.standard_normal()),
             "b": bool(i % 2), "none": None, "": None}
        if i % 5 == 0:
            del m[""]
        metas.append(m if i % 7 else None)
    metas = [m for m in metas if m is None or "" not in m] + [{}]
    got = ext.project_plain(metas, ())
    assert got == [c.project(m, nested=False)[0] for m in metas]
    # Names in skip are left out, whatever they hold.
    skipped = ext.project_plain([{"data": [1, 2], "hash": "h", "a": 1}], ("data", "hash"))
    assert skipped == [{"a": 1}]
    assert c.project_many([{"data": [1, 2], "a": 1}], skip=("data",)) == ([{"a": 1}], None)


@pytest.mark.parametrize("meta", [
    {"a.b": 1}, {"a=b": 1}, {"a\\b": 1}, {"a\x1fb": 1}, {"a\0": 1}, {"": 1}, {1: 1},
    {"a": "x\0y"}, {"a": "é" * 513}, {"a": 2**63}, {"a": -(2**63) - 1}, {"a": math.nan},
    {"a": math.inf}, {"a": [1]}, {"a": {"b": 1}}, {"a": np.int64(1)}, {"a": "\udc80"},
    {f"k{i}": i for i in range(257)}])
def test_project_plain_declines_what_project_treats_otherwise(meta: Any) -> None:
    assert ext.project_plain([meta], ()) is None
    attrs, tags = c.project_many([meta], nested=False) if len(meta) <= 256 else (None, None)
    if attrs is not None:
        assert (attrs[0], tags[0] if tags else []) == c.project(meta, nested=False)
    assert ext.project_plain((meta,), ()) is None and ext.project_plain([1], ()) is None


def test_float32_rows(rng) -> None:
    rows = rng.standard_normal((50, 7)).tolist()
    got = ext.float32_rows(rows, 7)
    assert got.dtype == np.float32 and got.shape == (50, 7)
    assert np.array_equal(got, np.asarray(rows, dtype=np.float32))
    assert got.ctypes.data % mnemo.ALIGNMENT == 0
    for bad in ([[1.0, 2]], [[1.0], [2.0, 3.0]], [(1.0, 2.0)], [[True, 1.0]], ((1.0,),)):
        assert ext.float32_rows(bad, 2) is None
    assert ext.float32_rows([[1.0]], 0) is None
    assert c.as_matrix([[1.0, 2], [3.0, 4.0]], 2).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    q = c.as_query([0.5, 0.25])
    assert q.dtype == np.float32 and q.tolist() == [0.5, 0.25]
    with pytest.raises(ValueError):
        c.as_query([[0.5], [0.25]])


def test_pack_keys_and_ids_of_keys(cpu_rt, rng) -> None:
    store = mnemo.Store(cpu_rt, 4)
    store.add([1, 2], rng.standard_normal((2, 4)).astype(np.float32), keys=["a", "é"])
    assert ext.pack_keys(["a", "b"]).texts_address != 0
    assert ext.pack_keys(["a\0"]) is None and ext.pack_keys(("a",)) is None
    assert ext.pack_keys([b"a"]) is None
    assert store.ids_of_keys(["é", "", "a", "x" * 5000]).tolist() == \
        [2, mnemo.NO_ID, 1, mnemo.NO_ID]
    assert store.ids_of_keys(("a",)).tolist() == [1]
    with pytest.raises(ValueError, match="NUL"):
        store.ids_of_keys(["a\0"])
