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


def _memories(cpu_rt: Any, rng: Any) -> mnemo.Store:
    """60 memories over 8 dims: a key, namespace, tags, attributes and a
    payload each, except every fifth (none of them)."""
    store = mnemo.Store(cpu_rt, 8)
    n = 60
    full = [i % 5 != 0 for i in range(n)]
    store.add(np.arange(n, dtype=np.uint64), rng.standard_normal((n, 8)).astype(np.float32),
              times=np.arange(n, dtype=np.float64),
              keys=[f"k{i}é" if f else None for i, f in enumerate(full)],
              namespaces=[("u", str(i % 3)) if f else None for i, f in enumerate(full)],
              tags=[[f"t{i % 4}"] if f else None for i, f in enumerate(full)],
              attributes=[{"g": i % 7, "s": f"v{i % 2}"} if f else None
                          for i, f in enumerate(full)],
              payloads=[b'{"i":%d}' % i if f else None for i, f in enumerate(full)])
    return store


@pytest.mark.parametrize("fields", [c.ROW_FIELDS, c.KEY_PAYLOAD, 0, mnemo._cdefs.FIELD_ALL,
                                    c.KEY_PAYLOAD | mnemo._cdefs.READ_META])
def test_search_rows_is_store_search_then_read_rows(cpu_rt, rng, fields: int) -> None:
    store = _memories(cpu_rt, rng)
    where = [None, mnemo.Filter.attribute("g", "$eq", 3), mnemo.Filter.tags("t1"),
             mnemo.Filter.nothing()]
    calls0 = ext.search_rows_time()[0]
    made = 0
    for f in where:
        for k in (1, 4, 100):
            q = rng.standard_normal(8).astype(np.float32)
            got = ext.search_rows(store.handle, q, k, 0 if f is None else f.handle, 8, fields,
                                  c.Row)
            made += 1
            ids, scores = store.search(q, k, where=f)
            assert got == ext.read_rows(store.handle, ids, scores, c.Row, fields)
            for i, s, row in got:
                assert row.id == i and row.time == (float(i) if fields & 256 else 0.0)
                assert row.key == (f"k{i}é" if fields & 1 and i % 5 else None)
                assert row.namespace == (("u", str(i % 3)) if fields & 2 and i % 5 else ())
                assert row.payload == (b'{"i":%d}' % i if fields & 16 and i % 5 else b"")
    calls, seconds = ext.search_rows_time()
    assert calls - calls0 == made and seconds > 0


def test_search_rows_declines_what_it_does_not_take_as_it_is(cpu_rt, rng) -> None:
    store = _memories(cpu_rt, rng)
    q = rng.standard_normal(8).astype(np.float32)
    with_int = q.tolist()
    with_int[2] = 1
    for query, k in [(q.astype(np.float64), 4), (q.reshape(1, 8), 4), (q[:4], 4),
                     (q[::2].copy(), 4), (q, 0), (q, 4097), (q, True), (q, 4.0), (q, -1),
                     (with_int, 4), (q.tolist()[:7], 4), (tuple(q.tolist()), 4),
                     (type("L", (list,), {})(q.tolist()), 4), (q.tolist(), 0)]:
        assert ext.search_rows(store.handle, query, k, 0, 8, c.KEY_PAYLOAD, c.Row) is None
    # A list of exact floats is taken as float32_rows converts it.
    for v in (q.tolist(), rng.standard_normal(8).tolist()):
        want = ext.search_rows(store.handle, ext.float32_rows([v], 8)[0], 4, 0, 8, c.KEY_PAYLOAD,
                               c.Row)
        assert want and ext.search_rows(store.handle, v, 4, 0, 8, c.KEY_PAYLOAD, c.Row) == want
    # Whatever it declines, run_search answers through Store.search.
    plan = c.Plan.exact(mnemo.Filter.tags("t2"))
    assert c.run_search(store, q, 4, plan) == c.run_search(store, q.astype(np.float64), 4, plan)


def test_search_rows_and_read_rows_refuse_bad_arguments(cpu_rt, rng) -> None:
    store = _memories(cpu_rt, rng)
    q = rng.standard_normal(8).astype(np.float32)
    ids, scores = store.search(q, 4)
    for bad in (32, 512, 1 << 31):
        with pytest.raises(mnemo.MnemoError, match="MNEMO_FIELD_ALL") as err:
            ext.search_rows(store.handle, q, 4, 0, 8, bad, c.Row)
        assert err.value.status == mnemo.Status.E_INVALID_ARGUMENT
        with pytest.raises(mnemo.MnemoError, match="MNEMO_FIELD_ALL"):
            ext.read_rows(store.handle, ids, scores, c.Row, bad)
    with pytest.raises(mnemo.MnemoError) as err:
        ext.search_rows(0, q, 4, 0, 8, c.KEY_PAYLOAD, c.Row)
    assert err.value.status == mnemo.Status.E_NULL_POINTER
    with pytest.raises(TypeError, match="row_type"):
        ext.search_rows(store.handle, q, 4, 0, 8, c.KEY_PAYLOAD, dict)
    # Ids no longer in the store: left out of a search's rows, None in a read.
    assert ext.read_rows(store.handle, [10**9, 1], None, c.Row, c.KEY_PAYLOAD)[0] is None
    assert store.count() == 60
