"""mnemo.Filter and filtered reads: Store.select / count_where and
search(where=..., where_each=...), held to a pure-Python model of the store
and of mnemo.h's filter semantics on random memories and random filters
(dictionary form and builder), on a plain store, a store with an index, a
store sharded by its runtime and a store reopened from its snapshot; and the
refusals of malformed filters.

The model's semantics (mnemo.h): a predicate on a field a memory lacks is
false, NOT makes it true; $ne and $nin need the attribute; INT and DOUBLE
compare as numbers (exactly), strings bytewise, a bool only equals or
differs, and values of different kinds never equal or order each other.

Vectors hold small integers and the metric is dot (or l2sq), so every score
is exact and ties are common: a filtered exact search must return the
model's brute force over the matching ids, ties by the smaller id, then
NO_ID padding."""

from __future__ import annotations

import copy
import ctypes
import math
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Iterator, List, Optional, Tuple

import numpy as np
import pytest

import mnemo
from mnemo import Filter, Status
from mnemo._lib import lib

# As conftest.CUDA_ON; read here because a run over every test folder may
# import another folder's conftest under that name.
CUDA_ON = os.environ.get("MNEMO_TEST_CUDA") == "1"

DIM = 7
NO_ID = mnemo.NO_ID

# What memories hold: drawn from small pools, so that filters match often.
PARTS = ["users", "42", "7", "episodic", "semantic", "a/b", "ü", " "]
TAGS = ["red", "green", "blue", "Blue", "ü", "with space", "#x"]
NAMES = ["alice", "bob", "Bob", "", "ü", "alice2", "a"]
BIG = [2**53, 2**53 + 1, float(2**53), 2**63 - 1, -(2**63), float(2**62), -float(2**63)]
SCORES = [-0.0, 0.0, 0.5, 1.5, 2.0, -3.25, 7.0]
POOLS: Dict[str, List[Any]] = {
    "year": list(range(2015, 2026)),
    "score": SCORES,
    "flag": [True, False],
    "name": NAMES,
    "mixed": [1, 2, 1.0, 2.5, True, False, "1", "x", 0, -0.0],
    "big": BIG,
}
TIMES = [-5.0, 0.0, 1.5, 100.0, 1e9, 1e9 + 0.25]
IMPORTANCE = [float(np.float32(v)) for v in (-1.0, 0.0, 0.1, 0.5, 0.7, 3.0)]


@dataclass
class Rec:
    """One memory of the model."""

    id: int
    vec: np.ndarray
    time: float = 0.0
    imp: float = 0.0
    key: Optional[str] = None
    ns: Optional[Tuple[str, ...]] = None
    tags: FrozenSet[str] = frozenset()
    attrs: Dict[str, Any] = field(default_factory=dict)


class Model:
    """The store as the tests expect it: id -> Rec."""

    def __init__(self) -> None:
        self.recs: Dict[int, Rec] = {}

    def ids(self, pred: Callable[[Rec], bool]) -> np.ndarray:
        return np.array(sorted(i for i, r in self.recs.items() if pred(r)), dtype=np.uint64)


def random_rec(rng: np.random.Generator, id_: int, rank: int) -> Rec:
    vec = rng.integers(-3, 4, DIM)
    while not vec.any():  # never a zero vector
        vec = rng.integers(-3, 4, DIM)
    rec = Rec(id_, vec.astype(np.float32), time=float(rng.choice(TIMES)),
              imp=float(rng.choice(IMPORTANCE)))
    if rng.random() < 0.7:
        rec.key = f"k{id_}"
    if rng.random() < 0.8:
        rec.ns = tuple(rng.choice(PARTS) for _ in range(int(rng.integers(1, 4))))
    rec.tags = frozenset(rng.choice(TAGS, size=int(rng.integers(0, 5)), replace=False).tolist())
    for name, pool in POOLS.items():
        if rng.random() < 0.6:
            rec.attrs[name] = pool[int(rng.integers(len(pool)))]
    rec.attrs["rank"] = rank  # one distinct number per memory: selectivity by threshold
    return rec


def fill(store: mnemo.Store, model: Model, rng: np.random.Generator, n: int) -> None:
    """n random memories under scattered ids (some near the top of uint64)."""
    taken = set(model.recs)
    ids = [int(i) for i in rng.choice(10**12, size=n, replace=False) + 1]
    ids[: n // 10] = [2**64 - 2 - int(i) for i in rng.choice(10**6, n // 10, replace=False)]
    ids = [i for i in ids if i not in taken]
    rng.shuffle(ids)
    recs = [random_rec(rng, i, len(taken) + r) for r, i in enumerate(ids)]
    add(store, model, recs)


def add(store: mnemo.Store, model: Model, recs: List[Rec]) -> None:
    # Every field written, "" and () for none: an upsert replaces them all.
    store.add([r.id for r in recs], np.stack([r.vec for r in recs]),
              times=[r.time for r in recs], importance=[r.imp for r in recs],
              keys=[r.key or "" for r in recs], namespaces=[r.ns or () for r in recs],
              tags=[sorted(r.tags) for r in recs], attributes=[r.attrs for r in recs])
    for r in recs:
        model.recs[r.id] = r


# The semantics of mnemo.h, written for the model.

def kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    return "str" if isinstance(v, str) else "num"


def same(x: Any, v: Any) -> bool:
    return kind(x) == kind(v) and (x.encode() == v.encode() if kind(x) == "str" else x == v)


def cmp(x: Any, v: Any) -> Optional[int]:
    """-1, 0, 1, or None when they do not order (other kinds, bools)."""
    if kind(x) != kind(v) or kind(x) == "bool":
        return None
    a, b = (x.encode(), v.encode()) if kind(x) == "str" else (x, v)
    return (a > b) - (a < b)


def attr_pred(name: str, op: str, values: List[Any]) -> Callable[[Rec], bool]:
    def pred(r: Rec) -> bool:
        if name not in r.attrs:
            return False
        x = r.attrs[name]
        if op == "$exists":
            return True
        if op == "$eq":
            return same(x, values[0])
        if op == "$ne":
            return not same(x, values[0])
        if op == "$in":
            return any(same(x, v) for v in values)
        if op == "$nin":
            return not any(same(x, v) for v in values)
        if op == "$between":
            lo, hi = cmp(x, values[0]), cmp(x, values[1])
            return lo is not None and hi is not None and lo >= 0 and hi <= 0
        c = cmp(x, values[0])
        if c is None:
            return False
        return {"$lt": c < 0, "$lte": c <= 0, "$gt": c > 0, "$gte": c >= 0}[op]
    return pred


# Random filters: (dictionary form, builder form, model predicate).

Gen = Tuple[Dict[str, Any], Filter, Callable[[Rec], bool]]


class FilterGen:
    def __init__(self, rng: np.random.Generator, model: Model) -> None:
        self.rng = rng
        self.model = model

    def pick(self, seq: List[Any]) -> Any:
        return seq[int(self.rng.integers(len(seq)))]

    def value(self, name: str, orderable: bool = False) -> Any:
        """A value of the attribute's pool, or now and then of another's."""
        pool = POOLS.get(name, [0, 1, 2])
        if self.rng.random() < 0.2:
            pool = self.pick(list(POOLS.values()))
        v = self.pick(pool)
        while orderable and isinstance(v, bool):
            v = self.pick(POOLS["year"] + NAMES + SCORES)
        return v

    def attribute(self) -> Gen:
        name = self.pick(list(POOLS) + ["rank", "missing"])
        op = self.pick(["plain", "$eq", "$ne", "$lt", "$lte", "$gt", "$gte", "$in", "$nin",
                        "$between", "$exists", "range", "$not"])
        if op == "plain":
            v = self.value(name)
            return {name: v}, Filter.attribute(name, "==", v), attr_pred(name, "$eq", [v])
        if op in ("$eq", "$ne"):
            v = self.value(name)
            return {name: {op: v}}, Filter.attribute(name, op[1:], v), attr_pred(name, op, [v])
        if op in ("$lt", "$lte", "$gt", "$gte"):
            v = self.value(name, orderable=True)
            sym = {"$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">="}[op]
            return {name: {op: v}}, Filter.attribute(name, sym, v), attr_pred(name, op, [v])
        if op in ("$in", "$nin"):
            vs = [self.value(name) for _ in range(int(self.rng.integers(0, 4)))]
            return ({name: {op: vs}}, Filter.attribute(name, op, *vs),
                    attr_pred(name, op, vs))
        if op == "$between":
            if self.rng.random() < 0.3:
                vs = [self.pick(NAMES), self.pick(NAMES)]
            else:
                vs = [self.pick(POOLS["year"] + SCORES + BIG) for _ in range(2)]
                if self.rng.random() < 0.8:
                    vs.sort()
            return ({name: {"$between": vs}}, Filter.attribute(name, "between", *vs),
                    attr_pred(name, "$between", vs))
        if op == "$exists":
            there = bool(self.rng.random() < 0.5)
            p = attr_pred(name, "$exists", [])
            b = Filter.exists(name)
            return ({name: {"$exists": there}}, b if there else ~b,
                    p if there else (lambda r: not p(r)))
        if op == "range":
            lo, hi = self.value(name, True), self.value(name, True)
            p1, p2 = attr_pred(name, "$gte", [lo]), attr_pred(name, "$lt", [hi])
            return ({name: {"$gte": lo, "$lt": hi}},
                    Filter.attribute(name, ">=", lo) & Filter.attribute(name, "<", hi),
                    lambda r: p1(r) and p2(r))
        v = self.value(name, orderable=True)
        p = attr_pred(name, "$gt", [v])
        return ({name: {"$not": {"$gt": v}}}, ~Filter.attribute(name, ">", v),
                lambda r: not p(r))

    def tags(self) -> Gen:
        ts = self.rng.choice(TAGS + ["never"], size=int(self.rng.integers(0, 4)),
                             replace=False).tolist()
        mode = self.pick(["list", "$all", "$any"])
        if mode == "$any":
            return ({"$tags": {"$any": ts}}, Filter.tags(*ts, mode="any"),
                    lambda r: bool(r.tags & set(ts)))
        d = {"$tags": ts} if mode == "list" else {"$tags": {"$all": ts}}
        return d, Filter.tags(ts), lambda r: set(ts) <= r.tags

    def namespace(self) -> Gen:
        held = [r.ns for r in self.model.recs.values() if r.ns]
        if held and self.rng.random() < 0.8:
            full = self.pick(held)
            parts = full[: int(self.rng.integers(0, len(full) + 1))]
        else:
            parts = tuple(self.pick(PARTS) for _ in range(int(self.rng.integers(0, 3))))
        if self.rng.random() < 0.5:
            d = {"$namespace": parts} if self.rng.random() < 0.5 else \
                {"$namespace": {"$eq": list(parts)}}
            return d, Filter.namespace(parts), lambda r: r.ns is not None and r.ns == parts
        return ({"$namespace": {"$under": parts}}, Filter.namespace(parts, under=True),
                lambda r: r.ns is not None and r.ns[: len(parts)] == parts)

    def key(self) -> Gen:
        held = [r.key for r in self.model.recs.values() if r.key] or ["k0"]
        ks = [self.pick(held) if self.rng.random() < 0.8 else "nobody"
              for _ in range(int(self.rng.integers(1, 4)))]
        if len(ks) == 1 and self.rng.random() < 0.5:
            return {"$key": ks[0]}, Filter.keys(ks[0]), lambda r: r.key == ks[0]
        return {"$key": {"$in": ks}}, Filter.keys(ks), lambda r: r.key in ks

    def ids(self) -> Gen:
        held = list(self.model.recs)
        ids = [self.pick(held) if self.rng.random() < 0.8 else int(self.rng.integers(2**40))
               for _ in range(int(self.rng.integers(1, 6)))]
        if len(ids) == 1 and self.rng.random() < 0.5:
            return {"$id": ids[0]}, Filter.ids(ids[0]), lambda r: r.id == ids[0]
        return {"$id": {"$in": ids}}, Filter.ids(np.array(ids, np.uint64)), lambda r: r.id in ids

    def range_of(self, what: str) -> Gen:
        pool = TIMES if what == "time" else IMPORTANCE
        get: Callable[[Rec], float] = (lambda r: r.time) if what == "time" else (lambda r: r.imp)
        a, b = sorted((self.pick(pool), self.pick(pool)))
        build = Filter.time if what == "time" else Filter.importance
        form = self.pick(["between", "gte_lte", "gt", "lt", "eq"])
        if form == "between":
            return ({f"${what}": {"$between": [a, b]}}, build(a, b),
                    lambda r: a <= get(r) <= b)
        if form == "gte_lte":
            return ({f"${what}": {"$gte": a, "$lte": b}}, build(lo=a, hi=b),
                    lambda r: a <= get(r) <= b)
        if form == "gt":
            return ({f"${what}": {"$gt": a}}, build(math.nextafter(a, math.inf)),
                    lambda r: get(r) > a)
        if form == "lt":
            return ({f"${what}": {"$lt": b}}, build(hi=math.nextafter(b, -math.inf)),
                    lambda r: get(r) < b)
        return {f"${what}": {"$eq": a}}, build(a, a), lambda r: get(r) == a

    def leaf(self) -> Gen:
        return self.pick([self.attribute, self.attribute, self.attribute, self.tags,
                          self.namespace, self.key, self.ids,
                          lambda: self.range_of("time"), lambda: self.range_of("importance")])()

    def filter(self, depth: int = 3) -> Gen:
        roll = self.rng.random()
        if depth == 0 or roll < 0.45:
            return self.leaf()
        if roll < 0.6:
            d, b, p = self.filter(depth - 1)
            return {"$not": d}, ~b if self.rng.random() < 0.5 else Filter.not_(b), \
                lambda r: not p(r)
        kids = [self.filter(depth - 1) for _ in range(int(self.rng.integers(0, 4)))]
        preds = [p for _, _, p in kids]
        if roll < 0.8:
            keys = [key for d, _, _ in kids for key in d]
            if len(set(keys)) == len(keys) and self.rng.random() < 0.5:
                merged: Dict[str, Any] = {}
                for d, _, _ in kids:
                    merged.update(d)  # several keys in one dict: AND
                d = merged
            else:
                d = {"$and": [d for d, _, _ in kids]}
            return d, Filter.and_(*[b for _, b, _ in kids]), lambda r: all(p(r) for p in preds)
        return ({"$or": [d for d, _, _ in kids]}, Filter.or_(*[b for _, b, _ in kids]),
                lambda r: any(p(r) for p in preds))

    def form(self, gen: Gen) -> Any:
        """The dictionary form, the builder form, or a Filter of the dict."""
        d, b, _ = gen
        return self.pick([d, d, b, Filter(d)])


# The reference search.

def brute_force(model: Model, q: np.ndarray, k: int, allowed: np.ndarray,
                metric: str = "dot") -> Tuple[np.ndarray, np.ndarray]:
    """ids and scores (float32) of the k best allowed memories, ties by the
    smaller id, then NO_ID / NaN."""
    qi = q.astype(np.int64)
    scored = []
    for i in allowed.tolist():
        v = model.recs[i].vec.astype(np.int64)
        s = int(v @ qi) if metric == "dot" else int(((v - qi) ** 2).sum())
        scored.append((-s if metric == "dot" else s, i))
    scored.sort()
    ids = np.full(k, NO_ID, np.uint64)
    scores = np.full(k, np.nan, np.float32)
    for j, (s, i) in enumerate(scored[:k]):
        ids[j] = i
        scores[j] = -s if metric == "dot" else s
    return ids, scores


def same_results(got: Tuple[np.ndarray, np.ndarray], want: Tuple[np.ndarray, np.ndarray],
                 what: Any) -> None:
    assert np.array_equal(got[0], want[0]), (what, got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1], err_msg=str(what))


def random_queries(rng: np.random.Generator, nq: int) -> np.ndarray:
    q = rng.integers(-3, 4, (nq, DIM))
    q[~q.any(axis=1), 0] = 1
    return mnemo.aligned_array(q, np.float32)


@pytest.fixture(scope="module")
def sharded_rt() -> Iterator[mnemo.Runtime]:
    with mnemo.Runtime(backend="cpu", shards=2) as runtime:
        yield runtime


def filled(rt: Any, rng: np.random.Generator, n: int = 600,
           metric: str = "dot") -> Tuple[mnemo.Store, Model]:
    store = mnemo.Store(rt, DIM, "f32", metric)
    model = Model()
    fill(store, model, rng, n)
    return store, model


def check_select(store: mnemo.Store, model: Model, gen: FilterGen, rounds: int) -> None:
    for _ in range(rounds):
        g = gen.filter()
        where = gen.form(g)
        want = model.ids(g[2])
        got = store.select(where)
        assert got.dtype == np.uint64
        assert np.array_equal(got, want), (g[0], got, want)
        assert store.count_where(where) == len(want), g[0]


def check_search(store: mnemo.Store, model: Model, gen: FilterGen, rng: np.random.Generator,
                 rounds: int, metric: str = "dot", nprobe: int = 0) -> None:
    for _ in range(rounds):
        g = gen.filter()
        allowed = model.ids(g[2])
        k = int(rng.integers(1, len(allowed) + 3)) if rng.random() < 0.3 else \
            int(rng.integers(1, 12))
        q = random_queries(rng, int(rng.integers(1, 4)))
        got = store.search(q, k, where=gen.form(g), nprobe=nprobe)
        for row in range(q.shape[0]):
            want = brute_force(model, q[row], k, allowed, metric)
            same_results((got[0][row], got[1][row]), want, g[0])


# Random filters against the model.

def test_select_matches_the_model(rt, rng) -> None:
    store, model = filled(rt, rng)
    check_select(store, model, FilterGen(rng, model), 400)
    assert np.array_equal(store.select(), model.ids(lambda r: True))
    assert store.count_where() == len(model.recs)


@pytest.mark.parametrize("metric", ["dot", "l2sq"])
def test_filtered_search_is_the_brute_force_of_the_matches(rt, rng, metric) -> None:
    store, model = filled(rt, rng, metric=metric)
    check_search(store, model, FilterGen(rng, model), rng, 300, metric)


def test_sharded_store_matches_the_model(sharded_rt, rng) -> None:
    store, model = filled(sharded_rt, rng)
    gen = FilterGen(rng, model)
    check_select(store, model, gen, 200)
    check_search(store, model, gen, rng, 200)


def test_after_writes_removals_and_compaction(rt, rng) -> None:
    """Upserts (new fields, or none: kept), field updates and removals keep
    the postings right."""
    store, model = filled(rt, rng, 500)
    gen = FilterGen(rng, model)
    for _ in range(4):
        ids = list(model.recs)
        # Remove a third.
        gone = [ids[i] for i in rng.choice(len(ids), len(ids) // 3, replace=False)]
        assert store.remove(gone) == len(gone)
        for i in gone:
            del model.recs[i]
        # Upsert some with new fields, some with a new vector only.
        live = list(model.recs)
        again = [live[i] for i in rng.choice(len(live), 40, replace=False)]
        add(store, model, [random_rec(rng, i, 10_000 + j) for j, i in enumerate(again[:20])])
        for i in again[20:]:
            vec = model.recs[i].vec[::-1].copy()
            store.add([i], vec[None, :])
            model.recs[i].vec = vec
        # Update tags and attributes of others.
        touched = [live[i] for i in rng.choice(len(live), 30, replace=False)]
        new_tags = [sorted(rng.choice(TAGS, 2, replace=False).tolist()) for _ in touched]
        new_attrs = [{"year": int(rng.integers(2015, 2026)), "rank": 20_000 + j}
                     for j in range(len(touched))]
        store.update_fields(touched, tags=new_tags, attributes=new_attrs)
        for i, t, a in zip(touched, new_tags, new_attrs):
            model.recs[i].tags = frozenset(t)
            model.recs[i].attrs = a
        # And new memories.
        fill(store, model, rng, 150)
        check_select(store, model, gen, 60)
        check_search(store, model, gen, rng, 40)


def test_clustered_store_answers_as_before(rt, rng) -> None:
    """Store.cluster lays the memories out by namespace: every search gives
    the same ids and scores as before, scoped searches read one run of rows
    (stats().filtered_ranged on a host store), and the model still agrees
    after more writes."""
    store, model = filled(rt, rng, 600)
    gen = FilterGen(rng, model)
    gone = list(model.recs)[::7]
    assert store.remove(gone) == len(gone)
    for i in gone:
        del model.recs[i]
    wheres = [gen.form(gen.filter()) for _ in range(30)]
    queries = random_queries(rng, len(wheres))

    def each():
        return [store.search(queries[j:j + 1], 25, where=w) for j, w in enumerate(wheres)]

    before = each()
    store.cluster()
    assert store.stats().tombstones == 0
    after = each()
    for (bi, bs), (ai, as_) in zip(before, after):
        assert np.array_equal(bi, ai)
        assert np.array_equal(bs.view(np.uint32), as_.view(np.uint32))
    space = sorted({r.ns for r in model.recs.values() if r.ns})[0]
    ranged = store.stats().filtered_ranged
    store.search(queries[:1], 5, where=Filter({"$namespace": space}))
    if store.stats().filtered_on_device == 0:
        assert store.stats().filtered_ranged == ranged + 1
    fill(store, model, rng, 100)
    check_select(store, model, gen, 30)
    check_search(store, model, gen, rng, 20)


def test_selectivity_from_one_memory_to_all(rt, rng) -> None:
    """rank < m for m from 1 to every memory: the selective plan (few
    matches: their rows only) and the masked one (many) give the brute
    force, min(k, m) results, then padding."""
    store, model = filled(rt, rng, 2000)
    n = len(model.recs)
    q = random_queries(rng, 3)
    for m in (1, 2, 5, 31, 32, 33, 100, n // 8, n // 2, n - 1, n):
        where = {"rank": {"$lt": m}}
        allowed = model.ids(attr_pred("rank", "$lt", [m]))
        assert len(allowed) == m
        assert np.array_equal(store.select(where), allowed)
        for k in (1, 10, m, m + 5):
            got = store.search(q, k, where=where)
            for row in range(3):
                same_results((got[0][row], got[1][row]), brute_force(model, q[row], k, allowed),
                             (m, k))
    held = list(model.recs)  # Python ints: numpy would round ids past 2**53 as floats
    one = held[int(rng.integers(len(held)))]
    got = store.search(q, 4, where={"$id": one})
    assert got[0][:, 0].tolist() == [one] * 3 and np.all(got[0][:, 1:] == NO_ID)
    got = store.search(q, 4, where={"$id": {"$in": []}})
    assert np.all(got[0] == NO_ID) and np.all(np.isnan(got[1]))


def test_where_each_is_per_query(rt, rng) -> None:
    store, model = filled(rt, rng)
    gen = FilterGen(rng, model)
    for _ in range(60):
        nq = int(rng.integers(1, 7))
        q = random_queries(rng, nq)
        k = int(rng.integers(1, 15))
        gens = [gen.filter() if rng.random() < 0.75 else None for _ in range(nq)]
        # A dict shared by queries in a row becomes one filter.
        if nq > 2 and gens[0] is not None:
            gens[1] = gens[0]
        each = [None if g is None else gen.form(g) for g in gens]
        if nq > 2 and gens[0] is not None:
            each[1] = each[0]
        common = gen.filter() if rng.random() < 0.4 else None
        got = store.search(q, k, where=None if common is None else gen.form(common),
                           where_each=each)
        for row, g in enumerate(gens):
            preds = [p for p in (None if g is None else g[2],
                                 None if common is None else common[2]) if p is not None]
            allowed = model.ids(lambda r: all(p(r) for p in preds))
            same_results((got[0][row], got[1][row]), brute_force(model, q[row], k, allowed),
                         (None if g is None else g[0], None if common is None else common[0]))
    # One query given as a vector: where_each of one entry.
    q = random_queries(rng, 1)[0]
    g = gen.filter()
    got = store.search(q, 5, where_each=[g[0]])
    same_results(got, brute_force(model, q, 5, model.ids(g[2])), g[0])


def test_where_each_long_lists_build_their_own_filters(rt, rng) -> None:
    """where_each of more entries than take the filters' cache: each built
    for the call, an entry equal to the one before sharing its filter only
    when the values' types agree too (True, 1 and 1.0 compare equal in
    Python and filter differently); every query gets its own filter's
    answer."""
    from mnemo import filters as filters_mod
    from mnemo import store as store_mod
    store, model = filled(rt, rng)
    gen = FilterGen(rng, model)
    nq = filters_mod._EACH_CACHED + 37
    q = random_queries(rng, nq)
    gens, each = [], []
    for i in range(nq):
        r = rng.random()
        if i > 0 and r < 0.3:  # the same object again
            gens.append(gens[-1])
            each.append(each[-1])
        elif i > 0 and r < 0.5 and gens[-1] is not None:  # an equal dict, built again
            gens.append(gens[-1])
            each.append(copy.deepcopy(gens[-1][0]))
        else:
            g = gen.filter() if rng.random() < 0.85 else None
            gens.append(g)
            each.append(None if g is None else gen.form(g))
    got = store.search(q, 6, where_each=each)
    for row, g in enumerate(gens):
        allowed = model.ids(lambda r: True) if g is None else model.ids(g[2])
        same_results((got[0][row], got[1][row]), brute_force(model, q[row], 6, allowed),
                     None if g is None else g[0])
    arr, held = store_mod._where_each([{"n": 1}, {"n": True}, {"n": 1.0}, {"n": 1}, {"n": 1}]
                                      + [None] * filters_mod._EACH_CACHED, filters_mod._EACH_CACHED + 5)
    handles = [arr[i] for i in range(5)]
    assert len(set(handles[:4])) == 4 and handles[3] == handles[4]
    assert handles[0] != handles[3]  # equal, but not the one before it


def test_where_with_the_id_filter_and_bias(rt, rng) -> None:
    """where, filter_ids and apply_bias together: a memory must pass both
    filters, and its bias (integers here, so still exact) is added."""
    store, model = filled(rt, rng)
    gen = FilterGen(rng, model)
    ids = list(model.recs)
    bias = rng.integers(-2, 3, len(ids))
    store.set_bias(ids, bias.astype(np.float32))
    bias_of = dict(zip(ids, bias.tolist()))
    for _ in range(40):
        g = gen.filter()
        listed = [ids[i] for i in rng.choice(len(ids), len(ids) // 2, replace=False)]
        kept = set(listed)
        allowed = [i for i in model.ids(g[2]).tolist() if i in kept]
        q = random_queries(rng, 1)[0]
        k = int(rng.integers(1, 10))
        got = store.search(q, k, where=gen.form(g), filter_ids=listed, apply_bias=True)
        scored = sorted((-(int(model.recs[i].vec.astype(np.int64) @ q.astype(np.int64))
                           + bias_of[i]), i) for i in allowed)[:k]
        assert got[0].tolist()[: len(scored)] == [i for _, i in scored], g[0]
        assert got[1].tolist()[: len(scored)] == [-s for s, _ in scored], g[0]
        assert np.all(got[0][len(scored):] == NO_ID)


def test_store_with_an_index(rt, rng) -> None:
    """After build_index (slots laid out list by list) select still matches
    the model; a filtered search with nprobe > 0 returns min(k, matches)
    memories, all matching, with their exact scores, best first; with
    nprobe >= nlist it is the exact search."""
    store, model = filled(rt, rng, 1500)
    store.build_index(nlist=16, seed=int(rng.integers(1, 2**31)), background=False)
    gen = FilterGen(rng, model)
    check_select(store, model, gen, 100)
    check_search(store, model, gen, rng, 60, nprobe=16)
    for _ in range(200):
        g = gen.filter()
        allowed = model.ids(g[2])
        k = int(rng.integers(1, 40))
        q = random_queries(rng, 2)
        ids, scores = store.search(q, k, where=gen.form(g), nprobe=int(rng.integers(1, 3)))
        n = min(k, len(allowed))
        for row in range(2):
            got = ids[row][:n].tolist()
            assert np.all(ids[row][n:] == NO_ID) and np.all(np.isnan(scores[row][n:])), g[0]
            assert len(set(got)) == n and set(got) <= set(allowed.tolist()), g[0]
            exact = [float(model.recs[i].vec @ q[row]) for i in got]
            assert scores[row][:n].tolist() == exact, g[0]
            keys = [(-s, i) for s, i in zip(exact, got)]
            assert keys == sorted(keys), g[0]
    # Written after the build: in the hot tier, found at once.
    fill(store, model, rng, 50)
    check_select(store, model, gen, 40)
    check_search(store, model, gen, rng, 30, nprobe=16)


def test_reopened_from_a_snapshot(rt, rng, tmp_path) -> None:
    """The postings of a store opened from its snapshot (with its index)
    answer as the saved store's did."""
    store, model = filled(rt, rng, 800)
    store.build_index(nlist=8, seed=int(rng.integers(1, 2**31)), background=False)
    path = tmp_path / "filtered.mnemo"
    store.save(path)
    with mnemo.Store.open(rt, path) as again:
        gen = FilterGen(rng, model)
        check_select(again, model, gen, 100)
        check_search(again, model, gen, rng, 60)
        check_search(again, model, gen, rng, 30, nprobe=8)


def test_select_offset_limit(rt, rng) -> None:
    store, model = filled(rt, rng, 300)
    gen = FilterGen(rng, model)
    for _ in range(60):
        g = gen.filter(1)
        want = model.ids(g[2])
        offset = int(rng.integers(0, len(want) + 3))
        limit = None if rng.random() < 0.3 else int(rng.integers(0, len(want) + 3))
        got = store.select(g[0], offset=offset, limit=limit)
        end = None if limit is None else offset + limit
        assert np.array_equal(got, want[offset:end]), (g[0], offset, limit)
        assert mnemo.is_aligned(got) or got.size == 0


def test_to_dict_round_trip(rt, rng) -> None:
    store, model = filled(rt, rng, 300)
    gen = FilterGen(rng, model)
    for _ in range(100):
        d, b, p = gen.filter()
        for f in (Filter(d), b):
            assert np.array_equal(store.select(Filter(f.to_dict())), model.ids(p)), d


def test_the_ctypes_call_gives_the_same_results(rt, rng) -> None:
    """mnemo_store_search called through ctypes with where and where_each in
    the options: the results of Store.search (made by the extension)."""
    store, model = filled(rt, rng, 300)
    gen = FilterGen(rng, model)
    for _ in range(30):
        nq, k = 3, int(rng.integers(1, 20))
        q = random_queries(rng, nq)
        common = Filter(gen.filter()[0])
        each = [Filter(gen.filter()[0]), None, Filter(gen.filter()[0])]
        opts = lib.mnemo_search_options_default()
        opts.where = common.handle
        arr = (ctypes.c_void_p * nq)(*[None if f is None else f.handle for f in each])
        opts.where_each = ctypes.addressof(arr)
        ids = mnemo.aligned_empty((nq, k), np.uint64)
        scores = mnemo.aligned_empty((nq, k), np.float32)
        assert lib.mnemo_store_search(store.handle, q.ctypes.data, nq, k, ctypes.byref(opts),
                                      ids.ctypes.data, scores.ctypes.data) == Status.OK
        same_results(store.search(q, k, where=common, where_each=each), (ids, scores), k)


def test_numpy_fast_path_and_general_path_agree(rt, rng) -> None:
    """A numpy query with where alone takes the extension's numpy path;
    the same search given as a list (converted on the general path) or
    with where_each gives the same results."""
    store, model = filled(rt, rng, 400)
    gen = FilterGen(rng, model)
    for _ in range(60):
        g = gen.filter()
        where = gen.form(g)
        k = int(rng.integers(1, 30))
        q = random_queries(rng, int(rng.integers(1, 4)))
        fast = store.search(q, k, where=where)
        same_results(store.search(q.tolist(), k, where=where), fast, g[0])
        same_results(store.search(q, k, where_each=[where] * q.shape[0]), fast, g[0])
        out = (mnemo.aligned_empty(fast[0].shape, np.uint64),
               mnemo.aligned_empty(fast[1].shape, np.float32))
        got = store.search(q, k, where=where, out_ids=out[0], out_scores=out[1])
        assert got[0] is out[0] and got[1] is out[1]
        same_results(got, fast, g[0])


@pytest.mark.skipif(not CUDA_ON, reason="CUDA tensor cases run only with MNEMO_TEST_CUDA=1")
def test_torch_cuda_queries_with_filters(rng) -> None:
    """torch CUDA queries on a CUDA runtime (mnemo_store_search_device, the
    filters in host memory): where and where_each give the brute force."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    with mnemo.Runtime(backend="cuda") as cuda_rt:
        store, model = filled(cuda_rt, rng, 600)
        gen = FilterGen(rng, model)
        for _ in range(40):
            nq, k = int(rng.integers(1, 5)), int(rng.integers(1, 20))
            q = random_queries(rng, nq)
            tq = torch.from_numpy(q).cuda()
            g = gen.filter()
            gens = [gen.filter() if rng.random() < 0.7 else None for _ in range(nq)]
            each = [None if e is None else gen.form(e) for e in gens]
            ids, scores = store.search(tq, k, where=gen.form(g), where_each=each)
            assert ids.is_cuda and scores.is_cuda
            ids = ids.cpu().numpy().view(np.uint64)
            scores = scores.cpu().numpy()
            for row, e in enumerate(gens):
                preds = [g[2]] + ([] if e is None else [e[2]])
                allowed = model.ids(lambda r: all(p(r) for p in preds))
                same_results((ids[row], scores[row]), brute_force(model, q[row], k, allowed),
                             (g[0], None if e is None else e[0]))


def test_equal_dicts_of_other_types_filter_apart(cpu_rt) -> None:
    """Dicts are kept built for the next call giving an equal one; True, 1,
    1.0 and "1" are equal or alike to Python but filter differently."""
    store = mnemo.Store(cpu_rt, 2, "f32", "dot")
    store.add([1, 2, 3, 4, 5], np.ones((5, 2), np.float32),
              attributes=[{"v": 1}, {"v": 1.0}, {"v": True}, {"v": "1"}, {"v": -0.0}])
    want = {"int": [1, 2], "bool": [3], "float": [1, 2], "str": [4], "zero": [5], "neg": [5]}
    forms = {"int": {"v": 1}, "bool": {"v": True}, "float": {"v": 1.0}, "str": {"v": "1"},
             "zero": {"v": 0}, "neg": {"v": -0.0}}
    for _ in range(3):
        for name, where in forms.items():
            assert store.select(dict(where)).tolist() == want[name], name
            ids, _ = store.search(np.ones(2, np.float32), 5, where=dict(where))
            assert sorted(i for i in ids.tolist() if i != NO_ID) == want[name], name
            assert store.count_where({"$or": [dict(where)]}) == len(want[name]), name
    # Ids in an array are not kept: built each call.
    assert store.select({"$id": {"$in": np.array([2, 5], np.uint64)}}).tolist() == [2, 5]


def test_a_filter_is_shared_by_threads(rt, rng) -> None:
    store, model = filled(rt, rng, 400)
    gen = FilterGen(rng, model)
    g = gen.filter()
    while len(model.ids(g[2])) < 5:
        g = gen.filter()
    f = Filter(g[0])
    q = random_queries(rng, 8)
    want = [brute_force(model, q[i], 6, model.ids(g[2])) for i in range(8)]
    errors: List[BaseException] = []

    def run() -> None:
        try:
            for _ in range(20):
                ids, scores = store.search(q, 6, where=f)
                for i in range(8):
                    same_results((ids[i], scores[i]), want[i], g[0])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_edge_semantics(cpu_rt) -> None:
    """Hand-picked cases of mnemo.h's rules."""
    store = mnemo.Store(cpu_rt, 2, "f32", "dot")
    store.add([1, 2, 3, 4, 5, 6], np.ones((6, 2), np.float32),
              attributes=[{"v": 1}, {"v": 1.0}, {"v": True}, {"v": "1"}, {"v": 2**53 + 1}, {}],
              namespaces=[("a",), ("a", "b"), ("ab",), None, ("a", "b", "c"), ()],
              tags=[["x"], ["x", "y"], [], None, ["y"], ["z"]])
    sel = lambda w: store.select(w).tolist()  # noqa: E731
    assert sel({"v": 1}) == [1, 2]                      # INT and DOUBLE are numbers
    assert sel({"v": True}) == [3]                      # a bool is not 1
    assert sel({"v": "1"}) == [4]
    assert sel({"v": {"$ne": 1}}) == [3, 4, 5]          # has v, differs (6 lacks it)
    assert sel({"v": {"$nin": [1, "1"]}}) == [3, 5]
    assert sel({"v": {"$gte": 1}}) == [1, 2, 5]         # bools and strings do not order
    assert sel({"v": float(2**53)}) == []               # 2^53 + 1 is not rounded
    assert sel({"v": {"$gt": float(2**53)}}) == [5]
    assert sel({"v": {"$exists": False}}) == [6]
    assert sel({"$not": {"v": 1}}) == [3, 4, 5, 6]
    assert sel({"$namespace": ("a",)}) == [1]
    assert sel({"$namespace": {"$under": ("a",)}}) == [1, 2, 5]   # by parts, not bytes
    assert sel({"$namespace": {"$under": ()}}) == [1, 2, 3, 5]    # any namespace
    assert sel({"$namespace": ()}) == []
    assert sel({"$tags": []}) == [1, 2, 3, 4, 5, 6]     # ALL of none: every memory
    assert sel({"$tags": {"$any": []}}) == []
    assert sel({"$tags": {"$any": ["x", "z"]}}) == [1, 2, 6]
    assert sel({"$tags": ["x", "y"]}) == [2]
    assert sel({"$and": []}) == [1, 2, 3, 4, 5, 6] and sel({"$or": []}) == []
    assert sel({}) == [1, 2, 3, 4, 5, 6]
    assert sel(Filter.nothing()) == [] and sel(Filter.all()) == [1, 2, 3, 4, 5, 6]
    assert sel({"$id": {"$in": [2, 99, 4]}}) == [2, 4]
    assert sel({"$time": {"$gte": 0, "$lte": 0}}) == [1, 2, 3, 4, 5, 6]  # times default to 0
    assert sel({"$time": {"$gt": 0}}) == []


# Refusals.

NAN, INF = float("nan"), float("inf")

BAD_TYPES = [
    {1: 2},
    {"x": [1, 2]},
    {"x": None},
    {"x": b"bytes"},
    {"x": {"$eq": [1]}},
    {"x": {"$in": 5}},
    {"x": {"$in": "abc"}},
    {"x": {"$nin": {"a": 1}}},
    {"x": {"$gt": True}},
    {"x": {"$lte": False}},
    {"x": {"$between": [True, 5]}},
    {"x": {"$between": [1, "a"]}},
    {"x": {"$exists": 1}},
    {"x": {"$exists": "yes"}},
    {"x": {"$not": 5}},
    {"x": {"$in": [1, [2]]}},
    {"$and": {"a": 1}},
    {"$and": [1]},
    {"$or": "a"},
    {"$not": [{"a": 1}]},
    {"$namespace": "users/42"},
    {"$namespace": ("a", 1)},
    {"$namespace": {"$under": "a"}},
    {"$tags": "red"},
    {"$tags": [1]},
    {"$tags": {"$any": "red"}},
    {"$key": 5},
    {"$key": ["k1"]},
    {"$key": {"$in": "k1"}},
    {"$id": True},
    {"$id": 1.0},
    {"$id": "7"},
    {"$id": {"$in": [1, 2.5]}},
    {"$time": 5},
    {"$time": {"$gte": True}},
    {"$time": {"$gte": "1"}},
    {"$importance": {"$lt": None}},
]

BAD_VALUES = [
    {"$foo": 1},
    {"$nor": [{"a": 1}]},
    {"x": {}},
    {"x": {"$like": "a%"}},
    {"x": {"$eq": 1, "$bogus": 2}},
    {"x": {"$between": [1]}},
    {"x": {"$between": [1, 2, 3]}},
    {"x": {"$between": 5}},
    {"x": NAN},
    {"x": INF},
    {"x": {"$gt": -INF}},
    {"x": {"$in": [1, NAN]}},
    {"x": 2**63},
    {"x": -(2**63) - 1},
    {"": 1},
    {"x\0y": 1},
    {"x": "a\0b"},
    {"x": "é" * 600},
    {"$namespace": ("a", "")},
    {"$namespace": ("a\0",)},
    {"$namespace": ("p",) * 33},
    {"$namespace": {"$prefix": ("a",)}},
    {"$namespace": {}},
    {"$tags": [""]},
    {"$tags": {"$none": ["a"]}},
    {"$key": ""},
    {"$key": "k" * 1025},
    {"$id": -1},
    {"$id": 2**64},
    {"$id": {"$in": [-3]}},
    {"$time": {"$gte": NAN}},
    {"$time": {"$near": 1}},
    {"$time": {"$between": [1]}},
    {"$importance": {}},
]


@pytest.mark.parametrize("where", BAD_TYPES, ids=repr)
def test_malformed_types_raise_type_errors(cpu_rt, where) -> None:
    with pytest.raises(TypeError) as exc:
        Filter(where)
    assert isinstance(exc.value, mnemo.MnemoError)
    store = mnemo.Store(cpu_rt, 2)
    store.add([1], [[1.0, 0.0]])
    with pytest.raises(TypeError):
        store.select(where)
    with pytest.raises(TypeError):
        store.search([1.0, 0.0], 1, where=where)


@pytest.mark.parametrize("where", BAD_VALUES, ids=repr)
def test_malformed_values_raise_value_errors(cpu_rt, where) -> None:
    with pytest.raises(ValueError) as exc:
        Filter(where)
    assert isinstance(exc.value, mnemo.MnemoError)
    store = mnemo.Store(cpu_rt, 2)
    store.add([1], [[1.0, 0.0]])
    with pytest.raises(ValueError):
        store.count_where(where)
    with pytest.raises(ValueError):
        store.search([[1.0, 0.0]], 1, where_each=[where])


def test_builder_refusals() -> None:
    with pytest.raises(ValueError, match="takes 1 value"):
        Filter.attribute("x", "$eq")
    with pytest.raises(ValueError, match="takes 0 values"):
        Filter.attribute("x", "$exists", 1)
    with pytest.raises(ValueError, match="takes 2 values"):
        Filter.attribute("x", "between", 1)
    with pytest.raises(ValueError, match="unknown attribute operator"):
        Filter.attribute("x", "~=", 1)
    with pytest.raises(TypeError):
        Filter.attribute("x", 99, 1)
    with pytest.raises(TypeError, match="booleans"):
        Filter.attribute("x", "<", True)
    with pytest.raises(TypeError):
        Filter.attribute(5, "==", 1)
    with pytest.raises(ValueError):
        Filter.tags("a", mode="some")
    with pytest.raises(TypeError):
        Filter.namespace("users/42")
    with pytest.raises(TypeError):
        Filter.namespace(("a",), under=1)
    with pytest.raises(ValueError):
        Filter.time(NAN)
    with pytest.raises(TypeError):
        Filter.importance(hi="1")
    with pytest.raises(TypeError):
        Filter.and_({"a": 1}, 5)
    with pytest.raises(TypeError):
        Filter("a == 1")
    with pytest.raises(TypeError):
        Filter([{"a": 1}])
    with pytest.raises(ValueError, match="NUL"):
        Filter.keys("a\0")


def test_depth_and_node_limits(cpu_rt) -> None:
    f = Filter.attribute("x", "==", 1)
    for _ in range(255):
        f = ~f
    store = mnemo.Store(cpu_rt, 2)
    store.add([1, 2], [[1.0, 0.0], [0.0, 1.0]], attributes=[{"x": 1}, {"x": 2}])
    assert store.select(f).tolist() == [2]  # 255 NOTs: odd
    with pytest.raises(ValueError, match="256 levels"):
        ~f
    many = Filter.or_(*[Filter.ids(i) for i in range(65535)])
    assert store.select(many).tolist() == [1, 2]
    with pytest.raises(ValueError, match="65536 nodes"):
        many | Filter.ids(7)


def test_closed_filter_and_where_each_shape(cpu_rt) -> None:
    store = mnemo.Store(cpu_rt, 2)
    store.add([1, 2], [[1.0, 0.0], [0.0, 1.0]], tags=[["a"], ["b"]])
    f = Filter({"$tags": ["a"]})
    assert store.select(f).tolist() == [1]
    f.close()
    assert f.closed
    f.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        store.select(f)
    with pytest.raises(ValueError, match="closed"):
        store.search([1.0, 0.0], 1, where=f)
    with Filter({"$tags": ["b"]}) as g:
        assert store.select(g).tolist() == [2]
    assert g.closed
    q = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="one per query"):
        store.search(q, 1, where_each=[{"$tags": ["a"]}])
    with pytest.raises(TypeError):
        store.search(q, 1, where_each={"$tags": ["a"]})
    with pytest.raises(TypeError):
        store.search(q, 1, where_each=[5, None])
    with pytest.raises(TypeError):
        store.search(q, 1, where=5)
    with pytest.raises(TypeError):
        store.select(where=[("a", 1)])
    with pytest.raises(TypeError):
        store.select(offset=1.5)


def test_dict_filters_are_whole_filters_within_the_size_limits():
    """A dict is parsed into one Filter (its pieces are never handed out),
    and the nesting and node limits hold for every way of giving one."""
    from mnemo.filters import as_filter
    d = {"user": "u1", "year": {"$gte": 2020, "$lt": 2030}, "$tags": {"$any": ["a", "b"]},
         "$or": [{"$namespace": ("users", "1")}, {"$not": {"$key": "k"}}]}
    for f in (Filter(d), Filter.from_dict(d), as_filter(d)):
        assert type(f) is Filter
        assert f.handle != 0
        assert Filter(f.to_dict()).to_dict() == f.to_dict()
    deep: Dict[str, Any] = {"a": 1}
    for _ in range(300):
        deep = {"$not": deep}
    wide = {"$or": [{"a": i} for i in range(70_000)]}
    for bad, what in ((deep, "levels deep"), (wide, "nodes")):
        for make in (Filter, Filter.from_dict, as_filter):
            with pytest.raises(ValueError, match=what):
                make(bad)


def test_dict_cache_tells_value_kinds_apart():
    """Equal dicts share one cached Filter; dicts equal in Python but not
    as filters (True, 1, 1.0 and "1"; a list and a tuple of tags stay
    equal) do not."""
    from collections import OrderedDict

    from mnemo.filters import as_filter
    a = as_filter({"n": 1, "$tags": ["x"]})
    assert as_filter({"n": 1, "$tags": ["x"]}) is a
    assert as_filter(OrderedDict([("n", 1), ("$tags", ["x"])])) is a
    assert as_filter({"n": 1, "$tags": ("x",)}) is a
    kinds = [as_filter({"n": v, "$tags": ["x"]}) for v in (1, True, 1.0, "1", np.int64(1))]
    assert len({id(f) for f in kinds[:4]}) == 4
    assert len({f._tree for f in kinds[:4]}) == 4  # typed values: not Python's equality
    assert kinds[4]._tree == kinds[0]._tree
