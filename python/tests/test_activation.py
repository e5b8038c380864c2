"""Activation search (relevance, recency, importance, bias) against a float64
numpy reference, min-max normalisation, filters, touch, the metadata calls
(add with times/importance, set_times, set_importance, get_meta), persistence
and the refusals of bad input."""

from __future__ import annotations

import ctypes
import math
import time
from pathlib import Path
from typing import Dict, Optional, Tuple

import numpy as np
import pytest

import mnemo
import reference as ref
from mnemo import Activation, Status
from mnemo._lib import lib

NOW = 1.7e9  # a UNIX time in 2023
HIGHER_BETTER = {"cosine": True, "dot": True, "l2sq": False}


class Memories:
    """A store and what it should hold: stored vectors, times, importance, bias."""

    def __init__(self, rt, rng: np.random.Generator, n: int, dim: int, storage: str = "f32",
                 metric: str = "cosine") -> None:
        self.metric = metric
        self.store = mnemo.Store(rt, dim, storage, metric)
        self.ids = mnemo.aligned_array(rng.permutation(10 * n)[:n] * 7 + 1000, np.uint64)
        vectors = ref.randn(rng, (n, dim))
        self.held = ref.to_storage(vectors, ref.STORAGE[storage])
        self.times = random_times(rng, n)
        self.importance = (5.0 + 5.0 * rng.uniform(-1, 1, n)).astype(np.float32)
        self.bias = (0.3 * rng.uniform(-1, 1, n)).astype(np.float32)
        self.store.add(self.ids, vectors, times=self.times, importance=self.importance)
        self.store.set_bias(self.ids, self.bias)

    def reference(self, q: np.ndarray, act: Activation, now: float, apply_bias: bool = False,
                  allowed: Optional[set] = None) -> Tuple[Dict[int, float], Dict[int, float]]:
        return activation_reference(self.ids, self.held, self.times, self.importance,
                                    self.bias if apply_bias else None, q, self.metric, act, now,
                                    allowed)


def random_times(rng: np.random.Generator, n: int) -> np.ndarray:
    """Whole seconds decades, hours and seconds before NOW, and some after it."""
    span = rng.choice([3e9, 4e4, 60.0, -600.0], n)
    return np.floor(NOW - span * rng.uniform(1e-3, 1.0, n))


def recency(times: np.ndarray, now: float, half_life: float) -> Tuple[np.ndarray, np.ndarray]:
    """2^(-(now - t) / half_life), 1 for t >= now, and the bound of its f32
    evaluation (an f32 power of an f64 age)."""
    age = now - times.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        x = np.where(age > 0, age / half_life, 0.0)
        rec = np.where(age > 0, np.exp2(-x), 1.0)
        tol = np.where(rec > 0, rec * (x * 2.0**-22 + 2.0**-21), 0.0) + 2.0**-140
    return rec, np.where(age > 0, tol, 0.0)


def scaled(x: np.ndarray, tol: float) -> Tuple[np.ndarray, np.ndarray]:
    """Min-max scaling over the candidates (0.5 when all are equal) and its
    bound from values each known within `tol`."""
    lo, hi = float(x.min()), float(x.max())
    if not hi > lo:
        return np.full(x.shape, 0.5), np.zeros(x.shape)
    return (x - lo) / (hi - lo), np.full(x.shape, 4.0 * tol / (hi - lo) + 2.0**-20)


def activation_reference(ids: np.ndarray, held: np.ndarray, times: np.ndarray,
                         importance: np.ndarray, bias: Optional[np.ndarray], q: np.ndarray,
                         metric: str, act: Activation, now: float, allowed: Optional[set] = None
                         ) -> Tuple[Dict[int, float], Dict[int, float]]:
    """The returned score of every candidate in float64, and its bound: A_i
    for cosine/dot, -A_i for l2sq (rel_i being the negated distance)."""
    keep = np.array([allowed is None or int(i) in allowed for i in ids], dtype=bool)
    ids, held, times, importance = ids[keep], held[keep], times[keep], importance[keep]
    raw = ref.similarity(q[None, :], held, metric)[0]
    raw_tol = ref.tolerance(q[None, :], held, raw[None, :], metric)[0]
    sign = 1.0 if HIGHER_BETTER[metric] else -1.0
    rel, rel_tol = sign * raw, raw_tol
    rec, rec_tol = recency(times, now, act.half_life)
    imp, imp_tol = importance.astype(np.float64), np.zeros(len(ids))
    if act.normalize:
        rel, rel_tol = scaled(rel, float(rel_tol.max(initial=0.0)))
        rec, rec_tol = scaled(rec, float(rec_tol.max(initial=0.0)))
        imp, imp_tol = scaled(imp, 0.0)
    b = np.zeros(len(ids)) if bias is None else bias[keep].astype(np.float64)
    wr, wc, wi = act.w_relevance, act.w_recency, act.w_importance
    a = wr * rel + wc * rec + wi * imp + b
    tol = (abs(wr) * rel_tol + abs(wc) * rec_tol + abs(wi) * imp_tol
           + 2.0**-21 * (np.abs(wr * rel) + np.abs(wc * rec) + np.abs(wi * imp) + np.abs(b)))
    return ({int(i): sign * float(s) for i, s in zip(ids, a)},
            {int(i): float(t) for i, t in zip(ids, tol)})


def check_search(mem: Memories, q: np.ndarray, k: int, act: Activation, now: float = NOW,
                 apply_bias: bool = False, allowed: Optional[set] = None, **kw) -> None:
    got_ids, got_scores = mem.store.search(q, k, activation=act, now=now, apply_bias=apply_bias,
                                           **kw)
    assert got_ids.shape == (len(q), k) and got_scores.dtype == np.float32
    for row in range(len(q)):
        want, tol = mem.reference(q[row], act, now, apply_bias, allowed)
        ref.assert_topk(got_ids[row], got_scores[row], want, tol, k, HIGHER_BETTER[mem.metric])


@pytest.mark.parametrize("metric", list(HIGHER_BETTER))
@pytest.mark.parametrize("storage", list(ref.STORAGE))
@pytest.mark.parametrize("normalize", [False, True], ids=["plain", "normalized"])
@pytest.mark.parametrize("n,dim,k", [(7, 3, 7), (61, 19, 10), (300, 130, 300)])
def test_activation_matches_float64(rt, rng, n, dim, k, normalize, storage, metric) -> None:
    mem = Memories(rt, rng, n, dim, storage, metric)
    q = ref.randn(rng, (3, dim))
    for wr, wc, wi, hl, bias in [(1.0, 1.0, 0.1, 3600.0, False),
                                 (0.5, 2.0, -0.05, 86400.0 * 365, True),
                                 (float(rng.uniform(-1, 1)), float(rng.uniform(0, 3)),
                                  float(rng.uniform(0, 0.2)), float(rng.uniform(1, 1e6)), True)]:
        act = Activation(w_relevance=wr, w_recency=wc, w_importance=wi, half_life=hl,
                         normalize=normalize)
        check_search(mem, q, k, act, apply_bias=bias)


def test_query_batch_and_one_query(rt, rng) -> None:
    mem = Memories(rt, rng, 500, 64)
    q = ref.randn(rng, (40, 64))  # a batch large enough for the GEMM path
    act = Activation(w_recency=0.7, w_importance=0.02, half_life=7200)
    check_search(mem, q, 12, act)
    ids, scores = mem.store.search(q[5], 12, activation=act, now=NOW)
    want_ids, want_scores = mem.store.search(q, 12, activation=act, now=NOW)
    assert ids.shape == (12,)
    assert np.array_equal(ids, want_ids[5])
    assert np.allclose(scores, want_scores[5], rtol=0, atol=1e-5)


def test_equal_times(rt, rng) -> None:
    mem = Memories(rt, rng, 80, 16)
    mem.times[:] = NOW - 1234.5
    mem.store.set_times(mem.ids, mem.times)
    q = ref.randn(rng, (2, 16))
    check_search(mem, q, 10, Activation(w_recency=1.0, half_life=600))
    # All equal: each normalised recency is 0.5, so the ranking is relevance's.
    act = Activation(w_recency=3.0, normalize=True)
    check_search(mem, q, 10, act)
    plain_ids, _ = mem.store.search(q, 10)
    act_ids, _ = mem.store.search(q, 10, activation=act, now=NOW)
    assert np.array_equal(plain_ids, act_ids)


def test_future_times_count_as_now(rt, rng) -> None:
    mem = Memories(rt, rng, 40, 8)
    mem.times[:] = NOW + rng.uniform(1, 1e9, 40)
    mem.store.set_times(mem.ids, mem.times)
    ids, scores = mem.store.search(ref.randn(rng, (8,)), 40,
                                   activation=Activation(w_relevance=0.0, w_recency=1.0),
                                   now=NOW)
    assert np.all(scores == 1.0)
    assert np.array_equal(ids, np.sort(mem.ids))  # equal scores: ties to the smaller id
    check_search(mem, ref.randn(rng, (2, 8)), 9, Activation(w_recency=2.0, half_life=1.0))


@pytest.mark.parametrize("half_life", [math.inf, 1e300, 1e-300, 5e-324])
def test_half_life_extremes(rt, rng, half_life) -> None:
    mem = Memories(rt, rng, 100, 12, metric="dot")
    mem.times[:10] = NOW  # age 0: recency 1 even for a vanishing half-life
    mem.store.set_times(mem.ids[:10], mem.times[:10])
    q = ref.randn(rng, (3, 12))
    for normalize in (False, True):
        check_search(mem, q, 15, Activation(w_recency=2.0, w_importance=0.01,
                                            half_life=half_life, normalize=normalize))
    rec_only = Activation(w_relevance=0.0, w_recency=1.0, half_life=half_life)
    _, scores = mem.store.search(q[0], 100, activation=rec_only, now=NOW)
    want, _ = recency(mem.times, NOW, half_life)
    assert np.allclose(np.sort(scores), np.sort(want), rtol=1e-6, atol=2.0**-140)
    if half_life == math.inf:
        assert np.all(scores == 1.0)
    if half_life < 1e-200:
        assert sorted(scores.tolist()) == sorted(np.where(mem.times >= NOW, 1.0, 0.0).tolist())


def test_normalize_is_over_the_candidates(rt, rng) -> None:
    mem = Memories(rt, rng, 120, 10)
    q = ref.randn(rng, (2, 10))
    act = Activation(w_relevance=1.0, w_recency=1.0, w_importance=1.0, half_life=3600,
                     normalize=True)
    allowed = set(int(i) for i in rng.choice(mem.ids, 17, replace=False))
    check_search(mem, q, 17, act, allowed=allowed, filter_ids=sorted(allowed))
    # One candidate: every term is 0.5 whatever its values.
    one = int(mem.ids[3])
    ids, scores = mem.store.search(q[0], 3, activation=act, now=NOW, filter_ids=[one],
                                   apply_bias=True)
    assert ids[0] == one and ids[1] == mnemo.NO_ID
    assert abs(float(scores[0]) - (1.5 + float(mem.bias[3]))) <= 1e-6
    # Equal importance everywhere: 0.5 for all, the ranking is unchanged.
    mem.importance[:] = 4.0
    mem.store.set_importance(mem.ids, mem.importance)
    check_search(mem, q, 20, Activation(w_importance=5.0, normalize=True))


def test_filters(rt, rng) -> None:
    mem = Memories(rt, rng, 150, 20, metric="l2sq")
    q = ref.randn(rng, (3, 20))
    act = Activation(w_relevance=0.1, w_recency=1.0, w_importance=0.05, half_life=1e5)
    allowed = set(int(i) for i in rng.choice(mem.ids, 40, replace=False))
    check_search(mem, q, 25, act, allowed=allowed, filter_ids=sorted(allowed))
    mask = np.array([int(i) in allowed for i in mem.ids])  # ids were added in slot order
    check_search(mem, q, 25, act, allowed=allowed, filter_bitmap=mask)
    normalized = Activation(w_relevance=1.0, w_recency=1.0, normalize=True)
    check_search(mem, q, 50, normalized, allowed=allowed, filter_bitmap=mask)


def test_activation_true_is_the_defaults(cpu_rt, rng) -> None:
    mem = Memories(cpu_rt, rng, 50, 6)
    q = ref.randn(rng, (6,))
    a = mem.store.search(q, 5, activation=True, now=NOW)
    b = mem.store.search(q, 5, activation=Activation(), now=NOW)
    c = mem.store.search(q, 5)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert np.array_equal(a[0], c[0])  # w_relevance 1, no recency or importance
    assert Activation() == Activation(1, 0, 0, 86400, False)
    assert Activation(w_recency=1) == Activation(w_recency=1.0)
    with pytest.raises(Exception):
        Activation().w_recency = 2.0  # frozen


def test_touch_sets_times_of_returned_memories(rt, rng) -> None:
    mem = Memories(rt, rng, 60, 9)
    q = ref.randn(rng, (2, 9))
    act = Activation(w_recency=1.0, half_life=3600)
    before = mem.store.get_meta(mem.ids)
    ids, _ = mem.store.search(q, 4, activation=act, now=NOW + 10, touch=True)
    touched = set(int(i) for i in ids.ravel())
    after = mem.store.get_meta(mem.ids)
    for j, i in enumerate(mem.ids.tolist()):
        assert after.times[j] == (NOW + 10 if i in touched else before.times[j])
    assert np.array_equal(after.importance, before.importance)
    assert np.array_equal(after.biases, before.biases)
    # Default now: the clock at the call.
    t0 = time.time()
    ids, _ = mem.store.search(q[0], 2, activation=act, touch=True)
    t1 = time.time()
    got = mem.store.get_meta(ids).times
    assert np.all((got >= t0 - 1.0) & (got <= t1 + 1.0)), (t0, got, t1)
    # A plain search touches nothing.
    snapshot = mem.store.get_meta(mem.ids).times
    mem.store.search(q, 5, activation=act, now=NOW + 99)
    assert np.array_equal(mem.store.get_meta(mem.ids).times, snapshot)


def test_metadata_calls(cpu_rt, rng) -> None:
    store = mnemo.Store(cpu_rt, 4)
    v = ref.randn(rng, (5, 4))
    store.add([1, 2, 3], v[:3], times=[10.5, 2e9, -3.25], importance=[1, 2, 3])
    meta = store.get_meta([3, 1, 2])
    assert meta.times.dtype == np.float64 and meta.importance.dtype == np.float32
    assert meta.times.tolist() == [-3.25, 10.5, 2e9]
    assert meta.importance.tolist() == [3, 1, 2] and meta.biases.tolist() == [0, 0, 0]
    times, importance, biases = store.get_meta(2)  # one id: arrays of one
    assert times.shape == importance.shape == biases.shape == (1,)
    # An add without times keeps an upserted memory's; new memories get 0.
    store.add([1, 4], v[3:5])
    assert store.get_meta([1, 4]).times.tolist() == [10.5, 0.0]
    store.add([2, 4], v[:2], importance=[7.5, 8.5])
    meta = store.get_meta([2, 4])
    assert meta.times.tolist() == [2e9, 0.0] and meta.importance.tolist() == [7.5, 8.5]
    # A repeated id takes its last entry; a number for one id.
    store.add([5, 5], v[:2], times=[1.0, 2.0])
    store.add(6, v[0], times=123.0, importance=0.25)
    assert store.get_meta([5, 6]).times.tolist() == [2.0, 123.0]
    store.set_times([3, 3], [5.0, 6.0])
    store.set_importance(4, -1.5)
    store.set_bias([1], [0.75])
    meta = store.get_meta([3, 4, 1])
    assert meta.times.tolist()[0] == 6.0 and meta.importance.tolist()[1] == -1.5
    assert meta.biases.tolist()[2] == 0.75
    # Integer and float32 times are converted; full float64 precision is kept.
    store.set_times([1, 2], np.array([1_700_000_000, 3], dtype=np.int64))
    store.set_times([3], np.array([0.5], dtype=np.float32))
    assert store.get_meta([1, 2, 3]).times.tolist() == [1.7e9, 3.0, 0.5]
    t = 1_700_000_000.000_001
    store.set_times(1, [t])
    assert store.get_meta(1).times[0] == t
    assert store.get_meta([]).times.shape == (0,)


def test_bad_input(cpu_rt, rng) -> None:
    store = mnemo.Store(cpu_rt, 3)
    v = ref.randn(rng, (3, 3))
    store.add([1, 2], v[:2], times=[1.0, 2.0], importance=[0.5, 0.5])
    for bad in ([1.0, math.nan, 3.0], [1.0, math.inf, 3.0]):
        with pytest.raises(mnemo.MnemoError) as e:
            store.add([3, 4, 5], v, times=bad)
        assert e.value.status == Status.E_NON_FINITE
    with pytest.raises(mnemo.MnemoError) as e:
        store.add([3, 4, 5], v, importance=[0, 0, -math.inf])
    assert e.value.status == Status.E_NON_FINITE
    assert store.count() == 2  # nothing added
    with pytest.raises(mnemo.MnemoError) as e:
        store.set_times([1, 2], [5.0, math.nan])
    assert e.value.status == Status.E_NON_FINITE
    with pytest.raises(mnemo.MnemoError) as e:
        store.set_importance([1, 2], [math.nan, 1.0])
    assert e.value.status == Status.E_NON_FINITE
    with pytest.raises(mnemo.MnemoError) as e:
        store.set_times([1, 9], [5.0, 6.0])
    assert e.value.status == Status.E_NOT_FOUND
    with pytest.raises(mnemo.MnemoError) as e:
        store.get_meta([2, 9])
    assert e.value.status == Status.E_NOT_FOUND
    meta = store.get_meta([1, 2])  # every refused call changed nothing
    assert meta.times.tolist() == [1.0, 2.0] and meta.importance.tolist() == [0.5, 0.5]
    # Shapes and dtypes are checked by the package.
    with pytest.raises(ValueError) as e:
        store.add([3, 4], v[:2], times=[1.0])
    assert e.value.status == Status.E_SHAPE
    with pytest.raises(ValueError):
        store.set_importance([1, 2], [[1.0, 2.0]])
    with pytest.raises(TypeError):
        store.set_times([1], ["soon"])
    with pytest.raises(ValueError, match="copy=False"):
        store.add([3], v[:1], times=np.array([1.0], np.float32), copy=False)
    # Activation settings.
    for kw in ({"half_life": 0.0}, {"half_life": -1.0}, {"half_life": math.nan},
               {"w_recency": math.inf}, {"w_relevance": math.nan}, {"w_importance": 1e39}):
        with pytest.raises(mnemo.MnemoValueError) as e:
            Activation(**kw)
        assert e.value.status == Status.E_INVALID_ARGUMENT
    for kw in ({"half_life": "1h"}, {"w_recency": True}, {"normalize": "yes"}):
        with pytest.raises(mnemo.MnemoTypeError):
            Activation(**kw)
    q = ref.randn(rng, (3,))
    with pytest.raises(mnemo.MnemoValueError):
        store.search(q, 1, activation=Activation(), now=math.inf)
    with pytest.raises(mnemo.MnemoValueError, match="need activation"):
        store.search(q, 1, touch=True)
    with pytest.raises(mnemo.MnemoValueError, match="need activation"):
        store.search(q, 1, now=NOW)
    with pytest.raises(mnemo.MnemoTypeError):
        store.search(q, 1, activation="recency")


def raw_search(store: mnemo.Store, q: np.ndarray, k: int, **fields) -> Tuple[int, np.ndarray]:
    """mnemo_store_search with options set field by field, as C would."""
    opts = lib.mnemo_search_options_default()
    for name, value in fields.items():
        setattr(opts, name, value)
    ids = mnemo.aligned_empty(k, np.uint64)
    scores = mnemo.aligned_empty(k, np.float32)
    status = lib.mnemo_store_search(store.handle, q.ctypes.data, 1, k, ctypes.byref(opts),
                                    ids.ctypes.data, scores.ctypes.data)
    return status, ids


def test_library_checks_the_options(cpu_rt, rng) -> None:
    store = mnemo.Store(cpu_rt, 5)
    store.add(np.arange(20), ref.randn(rng, (20, 5)), times=np.arange(20.0))
    q = ref.randn(rng, (5,))
    opts = lib.mnemo_search_options_default()
    assert (opts.activation, opts.normalize, opts.touch) == (0, 0, 0)
    assert (opts.w_relevance, opts.w_recency, opts.w_importance) == (1.0, 0.0, 0.0)
    assert opts.half_life == 86400.0 and math.isnan(opts.now)
    for fields in ({"normalize": 1}, {"touch": 1}, {"activation": 2},
                   {"activation": 1, "half_life": 0.0}, {"activation": 1, "half_life": -5.0},
                   {"activation": 1, "w_recency": math.inf}, {"activation": 1, "now": math.inf}):
        status, _ = raw_search(store, q, 3, **fields)
        assert status == Status.E_INVALID_ARGUMENT, fields
    # A caller of the first ABI (struct_size 40) gets a plain search.
    status, ids = raw_search(store, q, 5, struct_size=40, activation=1, w_relevance=0.0,
                             w_recency=1.0, now=NOW)
    assert status == Status.OK
    assert np.array_equal(ids, store.search(q, 5)[0])


def test_save_and_open_keep_metadata(rt, rng, tmp_path: Path) -> None:
    mem = Memories(rt, rng, 90, 11, "f16")
    path = tmp_path / "memories.mnemo"
    mem.store.save(path)
    back = mnemo.Store.open(rt, path)
    want, got = mem.store.get_meta(mem.ids), back.get_meta(mem.ids)
    for a, b in zip(want, got):
        assert np.array_equal(a, b)
    q = ref.randn(rng, (2, 11))
    act = Activation(w_recency=1.0, w_importance=0.1, half_life=1e4)
    for x, y in zip(back.search(q, 10, activation=act, now=NOW, apply_bias=True),
                    mem.store.search(q, 10, activation=act, now=NOW, apply_bias=True)):
        assert np.array_equal(x, y)


def test_durable_store_journals_metadata(cpu_rt, rng, tmp_path: Path) -> None:
    path = tmp_path / "durable.mnemo"
    v = ref.randn(rng, (6, 4))
    store = mnemo.open_durable(cpu_rt, path, dim=4, sync="os")
    store.add(np.arange(6), v, times=np.full(6, 100.0), importance=np.arange(6.0))
    store.checkpoint()
    store.set_times([0, 1], [200.0, 300.0])
    store.set_importance([5], [9.0])
    act = Activation(w_relevance=0.0, w_recency=1.0, half_life=50.0)
    ids, _ = store.search(v[2], 2, activation=act, now=1000.0, touch=True)
    want = store.get_meta(np.arange(6))
    assert sorted(ids.tolist()) == [0, 1]  # the most recent two
    assert want.times.tolist() == [1000.0, 1000.0, 100.0, 100.0, 100.0, 100.0]
    assert store.stats().journal_records >= 3
    store.close()
    back = mnemo.open_durable(cpu_rt, path)
    got = back.get_meta(np.arange(6))
    for a, b in zip(want, got):
        assert np.array_equal(a, b)
    assert got.importance.tolist() == [0, 1, 2, 3, 4, 9]
    back.close()
