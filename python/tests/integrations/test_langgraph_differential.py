"""MnemoStore against the store LangGraph ships (InMemoryStore), on
generated sequences of operations: puts (new, updated, per-op index
fields, not indexed), deletes, gets, searches (prefix, query, filter,
limit, offset) and namespace listings (prefix, suffix, wildcards, depth),
one by one, in batches, and through abatch; every answer compared.

Where the two differ by design the comparison says so:
- order of equal scores is free; listings without a query come in the
  order items were first put (InMemoryStore groups them by namespace), so
  the reference's full answer is put in that order before slicing;
- created_at is kept across updates (as PostgresStore does; InMemoryStore
  resets it on every put): checked against the items' first put;
- InMemoryStore keeps vectors of fields a re-put no longer has, and an
  entry for every namespace ever read or emptied (langgraph-checkpoint
  4.3.2); after each step those are dropped from the reference, so both
  stores answer about the items they hold;
- InMemoryStore fails on a batch whose puts embed one text twice (it
  embeds each distinct text once and then expects one vector per use):
  such batches are not generated.
Generated values are typed consistently (a field is a number, a string,
a bool, a list or an object, never several), and range filters only name
fields every value has: InMemoryStore raises on float(None), and compares
True == 1, where mnemo keeps kinds apart (docs/integrations.md).
"""

from __future__ import annotations

import asyncio
import math
import random
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.base import InvalidNamespaceError
import langgraph.store.memory as memory_module
from langgraph.store.memory import InMemoryStore

from mnemo.integrations.langgraph import MnemoStore

DIMS = 12
WORDS = ["tea", "coffee", "rain", "sun", "tokyo", "paris", "cat", "dog", "blue", "red"]
KINDS = ["pref", "fact", "event"]
NAMESPACES = [("users", "1"), ("users", "2"), ("users", "1", "notes"), ("teams", "a"),
              ("teams", "a", "x"), ("teams", "b", "notes"), ("docs",)]
SCORE_EPS = 1e-5


class Clock:
    """One clock for both stores: a second per step."""

    def __init__(self) -> None:
        self.t = 1_700_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clk = Clock()

    class FakeDatetime(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
            return datetime.fromtimestamp(clk.t, tz=tz or timezone.utc)

    monkeypatch.setattr(memory_module, "datetime", FakeDatetime)
    return clk


class Model:
    """What the harness knows of the items: first-put order and time."""

    def __init__(self) -> None:
        self.items: Dict[Tuple[Tuple[str, ...], str], Tuple[int, float]] = {}
        self.seq = 0

    def apply(self, ops: List[Any], now: float) -> None:
        puts: Dict[Tuple[Tuple[str, ...], str], Any] = {}
        for op in ops:
            if isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op
        for k, op in puts.items():
            if op.value is None:
                self.items.pop(k, None)
            elif k not in self.items:
                self.items[k] = (self.seq, now)
                self.seq += 1

    def order(self, item: Any) -> int:
        return self.items[(tuple(item.namespace), item.key)][0]


class Gen:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.keys = [f"k{i}" for i in range(14)]

    def text(self) -> str:
        return " ".join(self.r.sample(WORDS, self.r.randint(1, 3)))

    def value(self) -> Dict[str, Any]:
        r = self.r
        v: Dict[str, Any] = {"n": r.randint(0, 9), "x": round(r.uniform(-1, 1), 3)}
        if r.random() < 0.9:
            v["text"] = self.text()
        if r.random() < 0.7:
            v["kind"] = r.choice(KINDS)
        if r.random() < 0.5:
            v["tags"] = r.sample(WORDS, r.randint(0, 3))
        if r.random() < 0.5:
            v["meta"] = {"k": r.randint(0, 3), "s": r.choice(WORDS)}
        if r.random() < 0.4:
            v["flag"] = r.random() < 0.5
        if r.random() < 0.3:
            v["opt"] = None if r.random() < 0.5 else r.choice(WORDS)
        return v

    def filter(self) -> Optional[Dict[str, Any]]:
        r = self.r
        if r.random() < 0.3:
            return None
        choices = [
            lambda: {"kind": r.choice(KINDS)},
            lambda: {"kind": {"$ne": r.choice(KINDS)}},
            lambda: {"kind": {"$eq": r.choice(KINDS)}},
            lambda: {"n": {r.choice(["$gt", "$gte", "$lt", "$lte"]): r.randint(0, 9)}},
            lambda: {"n": {"$gte": r.randint(0, 4), "$lt": r.randint(4, 10)}},
            lambda: {"x": {r.choice(["$gt", "$lte"]): round(r.uniform(-1, 1), 2)}},
            lambda: {"n": r.randint(0, 9)},
            lambda: {"n": {"$ne": r.randint(0, 9)}},
            lambda: {"meta": {"k": r.randint(0, 3)}},
            lambda: {"meta": {"s": r.choice(WORDS), "k": r.randint(0, 3)}},
            lambda: {"flag": r.random() < 0.5},
            lambda: {"opt": None},
            lambda: {"opt": {"$ne": None}},
            lambda: {"tags": r.sample(WORDS, r.randint(0, 2))},
            lambda: {"text": self.text()},
        ]
        f: Dict[str, Any] = {}
        for _ in range(r.choice([1, 1, 1, 2])):
            f.update(r.choice(choices)())
        return f

    def namespace(self) -> Tuple[str, ...]:
        return self.r.choice(NAMESPACES)

    def prefix(self) -> Tuple[str, ...]:
        ns = self.r.choice(NAMESPACES)
        return ns[: self.r.randint(0, len(ns))]

    def put(self, indexed: bool) -> PutOp:
        r = self.r
        value = None if r.random() < 0.15 else self.value()
        index: Any = None
        if indexed and r.random() < 0.4:
            index = r.choice([False, ["text"], ["text", "tags[*]"], ["meta.s"], ["kind", "text"]])
        return PutOp(self.namespace(), r.choice(self.keys), value, index=index)

    def get(self) -> GetOp:
        return GetOp(self.namespace(), self.r.choice(self.keys))

    def search(self, indexed: bool) -> SearchOp:
        r = self.r
        query = self.text() if indexed and r.random() < 0.7 else None
        return SearchOp(self.prefix(), self.filter(), r.choice([1, 2, 3, 5, 10, 50]),
                        r.choice([0, 0, 0, 1, 2, 5]), query)

    def list_ns(self, whole: bool) -> ListNamespacesOp:
        r = self.r
        conds = []
        if r.random() < 0.5:
            p = list(self.prefix())
            if p and r.random() < 0.3:
                p[r.randrange(len(p))] = "*"
            if p:
                conds.append(MatchCondition("prefix", tuple(p)))
        if r.random() < 0.3:
            ns = r.choice(NAMESPACES)
            s = list(ns[len(ns) - r.randint(1, len(ns)):])
            if r.random() < 0.3:
                s[r.randrange(len(s))] = "*"
            conds.append(MatchCondition("suffix", tuple(s)))
        depth = r.choice([None, None, 1, 2, 3])
        if whole:
            return ListNamespacesOp(tuple(conds), depth, 1000, 0)
        return ListNamespacesOp(tuple(conds), depth, r.choice([1, 2, 5, 100]), r.choice([0, 0, 1, 2]))


def fix_reference(ref: InMemoryStore, ops: List[Any]) -> None:
    """Drops what InMemoryStore keeps for nothing (see the module's doc):
    namespaces without items, and vectors of paths an item's last put
    did not write."""
    for ns in [ns for ns, items in ref._data.items() if not items]:
        del ref._data[ns]
    puts: Dict[Tuple[Tuple[str, ...], str], PutOp] = {}
    for op in ops:
        if isinstance(op, PutOp):
            puts[(tuple(op.namespace), op.key)] = op
    for (ns, key), op in puts.items():
        if op.value is None or ns not in ref._vectors or key not in ref._vectors[ns]:
            continue
        to_embed = ref._extract_texts({(ns, key): op})
        paths = {path for entries in to_embed.values() for (_, _, path) in entries}
        vectors = ref._vectors[ns][key]
        for path in [p for p in vectors if p not in paths]:
            del vectors[path]


def repeats_a_text(ref: InMemoryStore, ops: List[Any]) -> bool:
    """Whether a batch's puts embed one text twice, on which InMemoryStore
    fails (it embeds each text once, then expects a vector per use)."""
    puts: Dict[Tuple[Tuple[str, ...], str], PutOp] = {}
    for op in ops:
        if isinstance(op, PutOp):
            puts[(tuple(op.namespace), op.key)] = op
    return any(len(uses) > 1 for uses in ref._extract_texts(puts).values())


def check_item(ours: Any, theirs: Any, model: Model) -> None:
    assert (ours is None) == (theirs is None), (ours, theirs)
    if ours is None:
        return
    assert ours.namespace == theirs.namespace and ours.key == theirs.key
    assert ours.value == theirs.value, (ours.value, theirs.value)
    assert ours.updated_at == theirs.updated_at
    first = model.items[(tuple(ours.namespace), ours.key)][1]
    assert ours.created_at == datetime.fromtimestamp(first, tz=timezone.utc)


def check_search(op: SearchOp, ours: List[Any], full: List[Any], model: Model) -> None:
    """`ours` against the reference's whole answer `full` (limit 10**9,
    offset 0) to the same search on the same state."""
    names = lambda items: [(i.namespace, i.key) for i in items]  # noqa: E731
    assert len(set(names(ours))) == len(ours)
    if op.query is None:
        expected = sorted(full, key=model.order)[op.offset: op.offset + op.limit]
        assert names(ours) == names(expected), (op, names(ours), names(expected))
        for a, b in zip(ours, expected):
            check_item(a, b, model)
            assert a.score is None
        return
    scored = [i for i in full if i.score is not None]
    scoreless = sorted((i for i in full if i.score is None), key=model.order)
    by_name = {(i.namespace, i.key): i for i in full}
    ours_scored = [i for i in ours if i.score is not None]
    ours_rest = [i for i in ours if i.score is None]
    assert ours == ours_scored + ours_rest
    window = scored[op.offset: op.offset + op.limit]
    assert len(ours_scored) == len(window), (op, names(ours), names(window))
    for a, b in zip(ours_scored, window):
        # Position by position the same score; each item its own score:
        # the same ranking, equal scores in any order.
        assert math.isclose(a.score, b.score, abs_tol=SCORE_EPS), (a.score, b.score)
        theirs = by_name[(a.namespace, a.key)]
        assert theirs.score is not None and math.isclose(a.score, theirs.score,
                                                         abs_tol=SCORE_EPS)
        check_item(a, theirs, model)
    fill = scoreless[: op.limit - len(window)]
    assert names(ours_rest) == names(fill), (op, names(ours_rest), names(fill))
    for a, b in zip(ours_rest, fill):
        check_item(a, b, model)


def check_list(op: ListNamespacesOp, ours: List[Any], theirs: List[Any], model: Model) -> None:
    if op.limit == 1000 and op.offset == 0:
        # In a batch, InMemoryStore also lists namespaces an earlier get of
        # the batch made (empty): compared on those holding items.
        depth = op.max_depth
        held = {ns if depth is None else ns[:depth] for ns, _ in model.items}
        theirs = [ns for ns in theirs if ns in held]
    assert ours == theirs, (op, ours, theirs)


def run_sequence(seed: int, steps: int, indexed: bool, clock: Clock) -> Dict[str, int]:
    gen = Gen(seed)
    emb = DeterministicFakeEmbedding(size=DIMS)
    index = {"dims": DIMS, "embed": emb, "fields": ["text", "tags[*]"]} if indexed else None
    ref = InMemoryStore(index=index)
    ours = MnemoStore(index=index, clock=clock)
    model = Model()
    counts: Dict[str, int] = {}
    while counts.get("ops", 0) < steps:
        clock.t += 1.0
        r = gen.r.random()
        mode = "batch" if r < 0.15 else ("async" if r < 0.25 else "single")
        n = gen.r.randint(2, 6) if mode == "batch" else 1
        while True:
            ops: List[Any] = []
            for _ in range(n):
                kind = gen.r.random()
                if kind < 0.38:
                    ops.append(gen.put(indexed))
                elif kind < 0.55:
                    ops.append(gen.get())
                elif kind < 0.9:
                    ops.append(gen.search(indexed))
                else:
                    ops.append(gen.list_ns(whole=n > 1))
            if not repeats_a_text(ref, ops):
                break
        # The reference's whole answer to each search, on the state the
        # batch's reads see (before its writes).
        fulls = {i: ref.batch([SearchOp(op.namespace_prefix, op.filter, 10**9, 0, op.query)])[0]
                 for i, op in enumerate(ops) if isinstance(op, SearchOp)}
        theirs = ref.batch(ops)
        mine = asyncio.run(ours.abatch(ops)) if mode == "async" else ours.batch(ops)
        assert len(mine) == len(theirs)
        for i, (op, a, b) in enumerate(zip(ops, mine, theirs)):
            name = type(op).__name__
            counts[name] = counts.get(name, 0) + 1
            if isinstance(op, GetOp):
                check_item(a, b, model)
            elif isinstance(op, SearchOp):
                check_search(op, a, fulls[i], model)
                counts["results"] = counts.get("results", 0) + len(a)
            elif isinstance(op, ListNamespacesOp):
                check_list(op, a, b, model)
            else:
                assert a is None and b is None
        counts["ops"] = counts.get("ops", 0) + len(ops)
        model.apply(ops, clock.t)
        fix_reference(ref, ops)
        if gen.r.random() < 0.05:
            # Now and then the whole store: every item and namespace.
            for (ns, key) in list(model.items):
                check_item(ours.get(ns, key), ref.get(ns, key), model)
            assert ours.list_namespaces(limit=1000) == ref.list_namespaces(limit=1000)
    return counts


@pytest.mark.parametrize("seed", [1, 2])
def test_against_inmemorystore_indexed(seed: int, clock: Clock) -> None:
    counts = run_sequence(seed, 1500, indexed=True, clock=clock)
    assert counts["ops"] >= 1500 and counts["SearchOp"] > 400


def test_against_inmemorystore_without_index(clock: Clock) -> None:
    counts = run_sequence(3, 1000, indexed=False, clock=clock)
    assert counts["ops"] >= 1000


def test_invalid_namespaces_refused_alike() -> None:
    ref, ours = InMemoryStore(), MnemoStore()
    for ns in [(), ("a.b",), ("",), ("langgraph", "x")]:
        for store in (ref, ours):
            with pytest.raises(InvalidNamespaceError):
                store.put(ns, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        ours.batch([GetOp(("a.b",), "k")])
