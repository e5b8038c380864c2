"""LangGraph: a long-term memory store (langgraph-checkpoint's BaseStore)
over a mnemo store.

    from mnemo.integrations.langgraph import MnemoStore
    store = MnemoStore(index={"dims": 384, "embed": my_embeddings, "fields": ["text"]})
    store.put(("users", "42", "memories"), "m1", {"text": "likes tea", "kind": "pref"})
    store.search(("users", "42"), query="drinks", filter={"kind": "pref"}, limit=5)

An item is one memory per vector it has (at least one): the first holds
the item's key (its namespace and key as a JSON list), namespace, payload
(value, timestamps, TTL, vector count as JSON) and its value's fields as
attributes and tags for filters (nested dicts as "a.b", lists as
"name=value" tags and their JSON); the others, ids next to it, hold the
item's further vectors (the index's fields, one per text, as
InMemoryStore keeps them) with the same namespace and fields, so that a
filtered semantic search runs in one mnemo search and is max-pooled per
item. Namespace prefixes are mnemo namespace predicates; filters
($eq $ne $gt $gte $lt $lte, nested dicts, lists) mnemo filters; listing
is mnemo's namespace table. TTL: an item's expiry time is its memories'
time field (tag "\\x1fttl"), refreshed on reads, omitted from reads with
ttl={"omit_expired": True}, and removed by sweep_ttl() or the sweeper
thread. docs/integrations.md lists what differs from InMemoryStore.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from langgraph.store.base import (BaseStore, GetOp, IndexConfig, Item, ListNamespacesOp,
                                  MatchCondition, Op, PutOp, Result, SearchItem, SearchOp,
                                  TTLConfig, ensure_embeddings, get_text_at_path, tokenize_path,
                                  validate_op_namespace)

from .. import _cdefs
from ..enums import Status
from ..errors import MnemoError
from ..filters import Filter
from ..store import NO_ID, Store
from . import _common as c

__all__ = ["MnemoStore", "translate_filter"]

# Ids: an item's memories are base + j (j < 2**16), base a multiple of 2**16.
_BITS = 16
_STRIDE = 1 << _BITS
_MASK = ~(_STRIDE - 1)  # on Python ints
_ITEM = "\x1fi"   # tag of an item's first memory (its record)
_VEC = "\x1fv"    # tag of the memories holding one of its vectors
_TTL = "\x1fttl"  # tag of the memories of an item with a TTL (time = expiry)
_KINDS = {"vectors": Filter.tags(_VEC), "items": Filter.tags(_ITEM),
          "bare": Filter.and_(Filter.tags(_ITEM), Filter.not_(Filter.tags(_VEC)))}
# What a search reads of its hits: the namespace and payload (the payload
# holds the item's key; the memory's key, more scattered reads after a
# large scan, is not needed).
_HIT_FIELDS = _cdefs.FIELD_NAMESPACE | _cdefs.FIELD_PAYLOAD


# SearchItems of a search's results made by setting their slots, as
# SearchItem(...) sets them from a tuple namespace, a str key, a dict value
# and datetimes (its __init__ and Item's, two Python frames with keyword
# arguments an item, are the larger part of an item's cost after a scan).
# The check below compares the two at import; a langgraph whose SearchItem
# it finds made differently gets the constructor.
_ITEM_SLOTS = ("value", "key", "namespace", "created_at", "updated_at", "score")


def _search_item_fast(namespace: Tuple[str, ...], key: str, value: Dict[str, Any],
                      created: datetime, updated: datetime, score: Optional[float]) -> SearchItem:
    it = object.__new__(SearchItem)
    it.value, it.key, it.namespace = value, key, namespace
    it.created_at, it.updated_at, it.score = created, updated, score
    return it


def _fast_items_agree() -> bool:
    try:
        stamp = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
        for score in (0.5, None):
            args = (("a", "b"), "k", {"v": [1]}, stamp, stamp, score)
            made, fast = SearchItem(*args), _search_item_fast(*args)
            if (type(made) is not type(fast) or made != fast
                    or any(getattr(made, n) is not getattr(fast, n) for n in _ITEM_SLOTS
                           if n != "namespace")
                    or made.namespace != fast.namespace or type(made.namespace) is not tuple
                    or set(SearchItem.__slots__) | set(Item.__slots__) != set(_ITEM_SLOTS)
                    or hasattr(made, "__dict__")):
                return False
    except Exception:
        return False
    return True


_FAST_ITEMS = _fast_items_agree()


def _eq(name: str, v: Any) -> c.Cond:
    """value == v (Python's ==, on a stored value)."""
    if v is None:
        return c.not_(c.present(name))
    if isinstance(v, (list, tuple)):
        return c.attr(name + c.LIST_SUFFIX, "$eq", c.canon(v))
    if isinstance(v, dict):
        raise ValueError("a filter comparing a whole object with $eq or $ne is not supported; "
                         "compare its fields ({'field': {'sub': value}})")
    if not c.scalar(v):
        return c.FALSE  # NaN, or a value the store holds as absent
    return c.attr(name, "$eq", v)


def _cond(name: str, fv: Any) -> c.Cond:
    """InMemoryStore's _compare_values(item_value, fv) at attribute `name`."""
    if isinstance(fv, dict):
        if any(k.startswith("$") for k in fv):
            return c.and_(*(_op(name, op, v) for op, v in fv.items()))
        # A partial match of an object: each field given, and it is an object.
        return c.and_(c.tags("all", [name + c.DICT_SUFFIX]),
                      *(_cond(name + "." + c.esc(k), v) for k, v in fv.items()))
    return _eq(name, fv)


_ORDER = {"$gt": "$gt", "$gte": "$gte", "$lt": "$lt", "$lte": "$lte"}


def _op(name: str, op: str, v: Any) -> c.Cond:
    if op == "$eq":
        return _eq(name, v)
    if op == "$ne":
        return c.not_(_eq(name, v))
    if op in _ORDER:
        # float(value) op float(v): numbers only (a bool or a numeric string
        # is no number to mnemo; InMemoryStore converts them).
        return c.attr(name, op, float(v))
    raise ValueError(f"Unsupported operator: {op}")


def translate_filter(f: Optional[Dict[str, Any]]) -> c.Cond:
    """A SearchOp filter as a mnemo condition (exact)."""
    if not f:
        return c.TRUE
    return c.and_(*(_cond(c.esc(k), v) for k, v in f.items()))


def _namespace_matches(ns: Tuple[str, ...], cond: MatchCondition) -> bool:
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    pairs = zip(ns, path) if cond.match_type == "prefix" else zip(reversed(ns), reversed(path))
    if cond.match_type not in ("prefix", "suffix"):
        raise ValueError(f"Unsupported match type: {cond.match_type}")
    return all(p == "*" or a == p for a, p in pairs)


class MnemoStore(BaseStore):
    """LangGraph's BaseStore on a mnemo store.

    Args:
        index: the semantic index, as for InMemoryStore: {"dims", "embed",
            "fields"} (fields default ["$"], the whole value as JSON).
            Without it, search takes no query (filters and listing only).
        ttl: TTLConfig: default_ttl (minutes), refresh_on_read (default
            True), omit_expired (default False: expired items stay visible
            until swept), sweep_interval_minutes (start_ttl_sweeper).
        store, runtime, path: an existing mnemo.Store (of dimension dims,
            or 1 without an index), the runtime of one made here, or a
            durable store file reopened or created.
        clock: seconds since the epoch (default time.time); timestamps
            and TTLs read it.

    A batch runs its reads (get, search, list_namespaces) on the state
    before it and then its writes, the last put of a key winning, as
    InMemoryStore does.
    """

    supports_ttl: bool = True

    def __init__(self, *, index: Optional[IndexConfig] = None, ttl: Optional[TTLConfig] = None,
                 store: Optional[Store] = None, runtime: Any = None, path: Optional[str] = None,
                 clock: Optional[Callable[[], float]] = None) -> None:
        self.index_config: Optional[Dict[str, Any]] = None
        self.embeddings = None
        dim = 1
        if index:
            self.index_config = dict(index)
            self.embeddings = ensure_embeddings(index.get("embed"))
            dim = int(index["dims"])
            self.index_config["__tokenized_fields"] = [
                (p, tokenize_path(p)) if p != "$" else (p, p)
                for p in (index.get("fields") or ["$"])]
        self.ttl_config = ttl
        self._clock = clock or time.time
        self._backing = c.Backing(store, dim=dim, runtime=runtime, path=path, stride=_STRIDE)
        self.dim = dim
        self._plans = c.FilterCache()
        self._sweeper: Optional[threading.Thread] = None
        self._sweep_stop = threading.Event()

    @property
    def store(self) -> Store:
        """The mnemo store."""
        return self._backing.store  # type: ignore[return-value]

    # Helpers.

    def _now(self) -> float:
        return float(self._clock())

    def _stamp(self, t: float) -> str:
        return datetime.fromtimestamp(t, tz=timezone.utc).isoformat()

    @staticmethod
    def _key(namespace: Tuple[str, ...], key: str) -> str:
        return c.canon_strs([*namespace, key])

    def _live(self, now: float) -> Optional[Filter]:
        """Not expired, when expired items are omitted from reads."""
        if not (self.ttl_config and self.ttl_config.get("omit_expired")):
            return None
        return Filter.or_(Filter.not_(Filter.tags(_TTL)), Filter.time(lo=now))

    def _where(self, prefix: Tuple[str, ...], flt: Optional[dict], kind: str,
               now: float = 0.0) -> Optional[Filter]:
        """The store's filter of a search: `kind` ("vectors": the memories
        holding vectors; "items": item records; "bare": records of items
        without vectors), under `prefix`, matching `flt`, and not expired
        when expired items are omitted. Built once per (prefix, filter,
        kind), so the library's filter is too; the expiry part, which
        depends on the time, is added per call."""
        key = (prefix, c.filter_key(flt), kind)
        where = self._plans.find(key)
        if where is None:
            def make() -> Filter:
                parts = [_KINDS[kind]]
                if prefix:
                    parts.append(Filter.namespace(prefix, under=True))
                cond = translate_filter(flt)
                if cond is not c.TRUE:
                    parts.append(cond.lo)
                return Filter.and_(*parts)
            where = self._plans.get(key, make)
        if not self.ttl_config:
            return where
        live = self._live(now)
        return where if live is None else Filter.and_(where, live)

    def _read(self, ids: Any) -> List[Tuple[Any, Dict[str, Any]]]:
        """(row, payload as a dict) of the item records among `ids`."""
        return [(m, c.loads(m.payload)) for m in c.read_rows(self.store, ids) if m is not None]

    @staticmethod
    def _item(m: Any, body: Dict[str, Any], score: Optional[float] = None,
              search: bool = False) -> Item:
        created = datetime.fromisoformat(body["created_at"])
        updated = datetime.fromisoformat(body["updated_at"])
        if search:
            ns, key, value = m.namespace, body["key"], body["value"]
            if (_FAST_ITEMS and type(ns) is tuple and type(key) is str
                    and type(value) is dict):
                return _search_item_fast(ns, key, value, created, updated, score)
            return SearchItem(namespace=ns, key=key, value=value,
                              created_at=created, updated_at=updated, score=score)
        return Item(value=body["value"], key=body["key"], namespace=m.namespace,
                    created_at=created, updated_at=updated)

    def _refresh(self, records: Sequence[Sequence[Any]], now: float) -> None:
        """New expiry times for the items read (those with a TTL): records
        (row, payload as a dict, ...)."""
        ids: List[int] = []
        times: List[float] = []
        for r in records:
            m, body = r[0], r[1]
            if body["ttl"] is None:
                continue
            t = now + float(body["ttl"]) * 60.0
            n = max(int(body["vectors"]), 1)
            ids.extend(range(m.id, m.id + n))
            times.extend([t] * n)
        if ids:
            try:
                self.store.set_times(np.asarray(ids, dtype=np.uint64), np.asarray(times))
            except MnemoError as exc:
                # Deleted by another thread since it was read: nothing to refresh.
                if exc.status != Status.E_NOT_FOUND:
                    raise

    # Batches.

    def search(self, namespace_prefix: Tuple[str, ...], /, *, query: Optional[str] = None,
               filter: Optional[Dict[str, Any]] = None, limit: int = 10, offset: int = 0,
               refresh_ttl: Optional[bool] = None) -> List[SearchItem]:
        """BaseStore.search, run as its batch of one SearchOp is (the op's
        checks, the query's embedding, the search) without the batch's
        bookkeeping."""
        if refresh_ttl is None:
            refresh_ttl = self.ttl_config.get("refresh_on_read", True) if self.ttl_config \
                is not None else True
        for label in namespace_prefix:
            if type(label) is not str or not label or "." in label or "\x00" in label:
                # The op's own check, which raises InvalidNamespaceError.
                validate_op_namespace(SearchOp(namespace_prefix, filter, limit, offset, query,
                                               refresh_ttl))
        qvec = self.embeddings.embed_query(query) if query and self.embeddings is not None \
            else None
        return self._search_in(tuple(namespace_prefix), filter, int(offset), int(limit),
                               refresh_ttl, qvec, self._now())

    def batch(self, ops: Iterable[Op]) -> List[Result]:
        ops = list(ops)
        queries, texts, counts = self._prepare(ops)
        qvec = {q: self.embeddings.embed_query(q) for q in queries} if queries else {}
        dvec = self.embeddings.embed_documents(texts) if texts else []
        return self._execute(ops, qvec, dvec, counts)

    async def abatch(self, ops: Iterable[Op]) -> List[Result]:
        ops = list(ops)
        queries, texts, counts = self._prepare(ops)
        qvec: Dict[str, Any] = {}
        if queries:
            got = await asyncio.gather(*(self.embeddings.aembed_query(q) for q in queries))
            qvec = dict(zip(queries, got))
        dvec = await self.embeddings.aembed_documents(texts) if texts else []
        return self._execute(ops, qvec, dvec, counts)

    def _puts(self, ops: Sequence[Op]) -> Dict[Tuple[Tuple[str, ...], str], PutOp]:
        puts: Dict[Tuple[Tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op
        return puts

    def _texts_of(self, op: PutOp) -> List[str]:
        """The texts of a put's vectors, in InMemoryStore's order."""
        if op.value is None or op.index is False or self.embeddings is None:
            return []
        if op.index is None:
            paths = self.index_config["__tokenized_fields"]  # type: ignore[index]
        else:
            paths = [(p, p if p == "$" else tokenize_path(p)) for p in op.index]
        out: List[str] = []
        value = op.value
        for _, field in paths:
            # A path of one plain field holding a str: that str, as
            # get_text_at_path gives it.
            if type(field) is list and len(field) == 1 and type(value) is dict:
                tok = field[0]
                if tok != "*" and tok[:1] not in ("[", "{"):
                    got = value.get(tok)
                    if type(got) is str:
                        out.append(got)
                        continue
            out.extend(get_text_at_path(value, field))
        return out

    def _prepare(self, ops: Sequence[Op]) -> Tuple[List[str], List[str], Dict[int, int]]:
        """Checks every op; the distinct query texts, the put texts to embed
        and how many each put has (by the op's id())."""
        queries: Dict[str, None] = {}
        for op in ops:
            if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
                raise ValueError(f"Unknown operation type: {type(op)}")
            validate_op_namespace(op)
            if isinstance(op, SearchOp) and op.query and self.embeddings is not None:
                queries[op.query] = None
        texts: List[str] = []
        counts: Dict[int, int] = {}
        for op in self._puts(ops).values():
            got = self._texts_of(op)
            counts[id(op)] = len(got)
            texts.extend(got)
        return list(queries), texts, counts

    def _execute(self, ops: Sequence[Op], qvec: Dict[str, Any], dvec: Sequence[Any],
                 counts: Optional[Dict[int, int]] = None) -> List[Result]:
        now = self._now()
        results: List[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op, now))
            elif isinstance(op, SearchOp):
                results.append(self._search(op, qvec.get(op.query) if op.query else None, now))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op, now))
            else:
                results.append(None)
        puts = self._puts(ops)
        if puts:
            self._write(puts, dvec, now, counts)
        return results

    # Reads.

    def _get(self, op: GetOp, now: float) -> Optional[Item]:
        ids = self._backing.ids_of([self._key(tuple(op.namespace), op.key)])
        if ids[0] == NO_ID:
            return None
        found = self._read(ids)
        if not found:
            return None
        m, body = found[0]
        if self._live(now) is not None and body["ttl"] is not None and m.time < now:
            return None  # expired, and expired items are omitted
        if op.refresh_ttl:
            self._refresh(found, now)
        return self._item(m, body)

    def _search(self, op: SearchOp, query: Optional[Any], now: float) -> List[SearchItem]:
        return self._search_in(tuple(op.namespace_prefix), op.filter, int(op.offset),
                               int(op.limit), op.refresh_ttl, query, now)

    def _search_in(self, prefix: Tuple[str, ...], flt: Optional[dict], offset: int, limit: int,
                   refresh_ttl: bool, query: Optional[Any], now: float) -> List[SearchItem]:
        """A SearchOp's items: its fields given one by one."""
        store = self._backing.store
        if limit <= 0:
            return []
        if query is None:
            where = self._where(prefix, flt, "items", now)
            ids = store.select(where, offset, limit)
            records = self._read(ids)
            if refresh_ttl:
                self._refresh(records, now)
            return [self._item(m, body, None, True) for m, body in records]
        where = self._where(prefix, flt, "vectors", now)
        need = offset + limit
        kk = need
        while True:
            # want_memories and fields by position (matching keyword arguments
            # is code of its own, out of the caches after a large scan).
            hits = c.run_search(store, query, kk, c.Plan.exact(where), True, _HIT_FIELDS)
            n = len(hits)
            # Base id -> (score, its record when the hit was the item's
            # first memory, which holds it; else None: read below).
            best: Dict[int, Tuple[float, Any]] = {}
            gaps = False  # whether a record is to be read (None in best)
            for i, s, m in hits:
                b = i & _MASK
                if b not in best:
                    # max pooling: best first
                    if i == b:
                        best[b] = (s, m)
                    else:
                        best[b] = (s, None)
                        gaps = True
                    if len(best) == need:
                        break
            if len(best) >= need or n < kk:
                break
            kk *= 4
        # The records at the items' base ids, with their scores (best holds
        # at most `need`).
        picked = list(best.items())[offset:need] if offset else best.items()
        read: Dict[int, Any] = {}
        if gaps:
            missing = [b for b, (_, m) in picked if m is None]
            if missing:
                read = {m.id: m for m in c.read_rows(store, missing) if m is not None}
        # The steps below in this one frame (not _item's and _refresh's per
        # search): after the scan of a large store little of this code is
        # in the caches, and each further function adds its misses.
        loads = c.loads
        out = []
        timed = False  # whether an item has a TTL (else _refresh has nothing to do)
        for b, (s, m) in picked:
            if m is None:
                m = read.get(b)
                if m is None:
                    continue
            body = loads(m.payload)
            if refresh_ttl and not timed and body["ttl"] is not None:
                timed = True
            out.append((m, body, s))
        if len(out) < limit:
            # As InMemoryStore: matching items without vectors fill the rest.
            where0 = self._where(prefix, flt, "bare", now)
            extra = store.select(where0, 0, limit - len(out))
            out.extend((m, body, None) for m, body in self._read(extra))
            timed = True  # (theirs: _refresh tells)
        if refresh_ttl and timed:
            self._refresh(out, now)
        if not _FAST_ITEMS:
            return [self._item(m, body, s, True) for m, body, s in out]
        # _item's steps.
        parse, fast = datetime.fromisoformat, _search_item_fast
        items = []
        for m, body, s in out:
            created = parse(body["created_at"])
            updated = parse(body["updated_at"])
            ns, key, value = m.namespace, body["key"], body["value"]
            if type(ns) is tuple and type(key) is str and type(value) is dict:
                items.append(fast(ns, key, value, created, updated, s))
            else:
                items.append(SearchItem(namespace=ns, key=key, value=value, created_at=created,
                                        updated_at=updated, score=s))
        return items

    def _list_namespaces(self, op: ListNamespacesOp, now: float) -> List[Tuple[str, ...]]:
        names = [ns for ns, count in self.store.namespaces() if count]
        if self._live(now) is not None:
            names = [ns for ns in names if self.store.count_where(
                Filter.and_(Filter.namespace(ns), Filter.tags(_ITEM), self._live(now))) > 0]
        for cond in op.match_conditions or ():
            names = [ns for ns in names if _namespace_matches(ns, cond)]
        if op.max_depth is not None:
            names = sorted({ns[: op.max_depth] for ns in names})
        else:
            names = sorted(names)
        return names[op.offset: op.offset + op.limit]

    # Writes.

    def _write(self, puts: Dict[Tuple[Tuple[str, ...], str], PutOp], dvec: Sequence[Any],
               now: float, counts: Optional[Dict[int, int]] = None) -> None:
        prefixes: Dict[Tuple[str, ...], str] = {}
        keys = []
        for ns, k in puts:
            pre = prefixes.get(ns)
            if pre is None:
                pre = prefixes[ns] = c.key_prefix(ns)
            keys.append(pre + c.key_end(k) if type(k) is str else self._key(ns, k))
        vectors = c.as_matrix(dvec, len(dvec)).reshape(len(dvec), -1) if len(dvec) else None
        if vectors is not None and vectors.shape[1] != self.dim:
            raise ValueError(f"embeddings of dimension {vectors.shape[1]}; the index has "
                             f"dims={self.dim}")
        store = self.store
        with self._backing.lock:
            base_ids, existed = self._backing.assign(keys)
            old_of = {m.id: body for m, body in self._read(base_ids[existed])} \
                if existed.any() else {}
            row_ids: List[int] = []
            row_vecs: List[Any] = []
            cols: Dict[str, List[Any]] = {"keys": [], "namespaces": [], "tags": [],
                                          "attributes": [], "payloads": []}
            times: List[float] = []
            removed: List[int] = []
            at = 0
            zero = np.zeros(self.dim, dtype=np.float32)
            stamp = self._stamp(now)
            # Flat values of plain fields projected in one call (None: each
            # through c.project below).
            plain = c.project_plain([op.value for op in puts.values()])
            ops = list(puts.values())
            if (plain is not None and counts is not None and vectors is not None
                    and len(vectors) == len(ops) and not existed.any()
                    and all(op.value is not None and op.ttl is None and counts[id(op)] == 1
                            for op in ops)):
                # New items of one vector each, no TTL (a bulk load): the
                # rows below, column by column.
                tags = [_ITEM, _VEC]
                # (No times: a new memory's is 0, as an item without a TTL has.)
                store.add(base_ids, vectors, keys=keys,
                          namespaces=[ns for ns, _ in puts],
                          payloads=[c.dumps({"key": k, "value": op.value,
                                             "created_at": stamp, "updated_at": stamp,
                                             "ttl": None, "vectors": 1})
                                    for (_, k), op in zip(puts, ops)],
                          attributes=plain, tags=[tags] * len(ops))
                return
            for at_op, (((ns, key), op), base, key_text) in enumerate(
                    zip(puts.items(), base_ids.tolist(), keys)):
                prev = old_of.get(base)
                had = max(int(prev["vectors"]), 1) if prev else 0
                if op.value is None:
                    removed.extend(range(base, base + had))
                    continue
                m = counts[id(op)] if counts is not None else len(self._texts_of(op))
                if m > _STRIDE:
                    raise ValueError(f"an item with {m} vectors; at most {_STRIDE}")
                vecs = vectors[at:at + m] if m else None
                at += m
                value = dict(op.value)
                ttl = op.ttl
                body = {"key": key, "value": value,
                        "created_at": prev["created_at"] if prev else stamp,
                        "updated_at": stamp, "ttl": ttl, "vectors": m}
                if plain is not None:
                    attrs, tag_list = plain[at_op], []
                else:
                    attrs, tag_list = c.project(value, nested=True)
                extra = [_TTL] if ttl is not None else []
                expiry = now + float(ttl) * 60.0 if ttl is not None else 0.0
                for j in range(max(m, 1)):
                    row_ids.append(base + j)
                    row_vecs.append(vecs[j] if m else zero)
                    first = j == 0
                    cols["keys"].append(key_text if first else None)
                    cols["payloads"].append(c.dumps(body) if first else None)
                    cols["namespaces"].append(ns)
                    cols["attributes"].append(attrs)
                    cols["tags"].append(tag_list + extra + ([_ITEM] if first else [])
                                        + ([_VEC] if m else []))
                    times.append(expiry)
                removed.extend(range(base + max(m, 1), base + had))
            if row_ids:
                store.add(np.asarray(row_ids, dtype=np.uint64), np.stack(row_vecs),
                          times=np.asarray(times), **cols)
            if removed:
                store.remove(np.asarray(removed, dtype=np.uint64))

    # TTL.

    def sweep_ttl(self) -> int:
        """Removes the items whose TTL has run out; returns how many."""
        now = self._now()
        with self._backing.lock:
            where = Filter.and_(Filter.tags(_TTL), Filter.time(hi=now), Filter.tags(_ITEM))
            expired = self._read(self.store.select(where))
            ids: List[int] = []
            for m, body in expired:
                n = max(int(body["vectors"]), 1)
                ids.extend(range(m.id, m.id + n))
            if ids:
                self.store.remove(np.asarray(ids, dtype=np.uint64))
        return len(expired)

    def start_ttl_sweeper(self, sweep_interval_minutes: Optional[float] = None
                          ) -> "concurrent.futures.Future[None]":
        """Sweeps every sweep_interval_minutes (default: the TTL config's,
        else 5) on a daemon thread until stop_ttl_sweeper()."""
        minutes = sweep_interval_minutes or (self.ttl_config or {}).get(
            "sweep_interval_minutes") or 5
        done: "concurrent.futures.Future[None]" = concurrent.futures.Future()
        if self._sweeper is not None and self._sweeper.is_alive():
            done.set_result(None)
            return done
        self._sweep_stop.clear()

        def loop() -> None:
            try:
                while not self._sweep_stop.wait(float(minutes) * 60.0):
                    self.sweep_ttl()
                done.set_result(None)
            except BaseException as exc:  # the future reports it
                done.set_exception(exc)

        self._sweeper = threading.Thread(target=loop, name="mnemo-ttl-sweeper", daemon=True)
        self._sweeper.start()
        return done

    def stop_ttl_sweeper(self, timeout: Optional[float] = None) -> bool:
        """Stops the sweeper; whether it stopped within `timeout` seconds."""
        if self._sweeper is None:
            return True
        self._sweep_stop.set()
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped
