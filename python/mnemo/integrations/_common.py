"""What the framework adapters share: the store they write to (ids behind
string keys), how a framework's metadata becomes mnemo attributes and tags,
and filters compiled once into mnemo filters and run inside the search.

Metadata projection (one rule for every adapter; docs/integrations.md):
    a str (at most 1024 UTF-8 bytes, no NUL), int (int64), float (finite)
    or bool at key k becomes the attribute named k; a nested dict's values
    become "k.sub" (nested=True; else only the tag), the tag "k\\x1f{}"
    marking the dict;
    a list becomes the string attribute "k\\x1f[]" holding its canonical
    JSON (for equality) and, per scalar element e, the tag "k=<JSON of e>"
    (for membership). Names escape "\\", ".", "=" and "\\x1f" with a
    backslash. None, and values past those limits, are kept in the payload
    and returned, but a filter sees them as absent.

Numbers are held as Python compares them: an integral float's tag is the
int's, so 1.0 and 1 match; a bool never equals a number (mnemo's rule,
where Python says True == 1).
"""

from __future__ import annotations

import json
import json.scanner
import math
import threading
from typing import (Any, Callable, Dict, Hashable, Iterable, List, Mapping, NamedTuple, Optional,
                    Sequence, Tuple)

import numpy as np

from .. import _cdefs, _native
from ..arrays import ALIGNMENT, INDICES, host_input
from ..filters import Filter
from ..runtime import Runtime
from ..store import NO_ID, Store

_ext = _native.ext
MAX_TEXT = _cdefs.MAX_NAME_BYTES  # a string attribute, tag or name
MAX_KEY = _cdefs.MAX_KEY_BYTES
LIST_SUFFIX = "\x1f[]"
DICT_SUFFIX = "\x1f{}"

_runtime: Optional[Runtime] = None
_runtime_lock = threading.Lock()


def default_runtime() -> Runtime:
    """One runtime (backend auto) for the adapters that are given none."""
    global _runtime
    with _runtime_lock:
        if _runtime is None or _runtime.closed:
            _runtime = Runtime()
        return _runtime


# Projection of metadata onto attributes and tags.

def esc(part: str) -> str:
    """A key as one part of an attribute name."""
    if "\\" in part or "." in part or "=" in part or "\x1f" in part:
        part = (part.replace("\\", "\\\\").replace(".", "\\.").replace("=", "\\=")
                .replace("\x1f", "\\u"))
    return part


def _short(s: str) -> bool:
    """Whether a str can be a name, tag or string value of the store."""
    if len(s) * 4 <= MAX_TEXT:
        return "\0" not in s
    return "\0" not in s and len(s.encode("utf-8", "surrogatepass")) <= MAX_TEXT


def norm(v: Any) -> Any:
    """v with integral floats as ints (as Python's 1.0 == 1), recursively."""
    t = type(v)
    if t is float:
        return int(v) if v.is_integer() and abs(v) < 2.0**63 else v
    if t is list or t is tuple:
        return [norm(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): norm(x) for k, x in v.items()}
    return v


# Encoders and a decoder made once (json.dumps with options makes an
# encoder per call).
_canon_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode
_dumps_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_scan = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[attr-defined]


def canon(v: Any) -> str:
    """The canonical JSON of a value (tags of list elements, list equality)."""
    return _canon_encode(norm(v))


def canon_strs(parts: Sequence[Any]) -> str:
    """canon() of a list of parts (a key of namespace parts and a name),
    without norm()'s walk when they are all str."""
    parts = list(parts)
    for p in parts:
        if type(p) is not str:
            return canon(parts)
    return _canon_encode(parts)


_encode_str = json.encoder.encode_basestring  # type: ignore[attr-defined]


def key_prefix(parts: Sequence[Any]) -> str:
    """The start of canon_strs([*parts, name]) for any str name: the key is
    key_prefix(parts) + key_end(name)."""
    parts = list(parts)
    return canon_strs(parts)[:-1] + "," if parts else "["


def key_end(name: str) -> str:
    return _encode_str(name) + "]"


def loads(payload: Any) -> Any:
    """A JSON payload (bytes) or key (str) written by dumps() or canon()
    (compact: no whitespace around it) as Python objects; anything else
    through json.loads."""
    text = payload.decode("utf-8") if type(payload) is bytes else payload
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def element_tag(name: str, v: Any) -> str:
    return name + "=" + canon(v)


def scalar(v: Any) -> bool:
    """Whether v is a value the store can hold as an attribute."""
    t = type(v)
    if t is str:
        return _short(v)
    if t is bool:
        return True
    if t is int:
        return -(2**63) <= v < 2**63
    if t is float:
        return math.isfinite(v)
    if isinstance(v, (bool, np.bool_)):
        return True
    if isinstance(v, (int, np.integer)):
        return -(2**63) <= int(v) < 2**63
    if isinstance(v, (float, np.floating)):
        return math.isfinite(float(v))
    if isinstance(v, str):
        return _short(str(v))
    return False


def _plain(v: Any) -> Any:
    """A numpy scalar or a str/int subclass as the plain Python value."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    return str(v)


def _walk(meta: Mapping[str, Any], prefix: str, attrs: Dict[str, Any], tags: List[str],
          nested: bool) -> None:
    for k, v in meta.items():
        if type(k) is not str or not k:
            continue
        name = prefix + esc(k)
        t = type(v)
        if t is str or t is int or t is float or t is bool:
            if scalar(v):
                attrs[name] = v
        elif v is None:
            continue
        elif t is dict or isinstance(v, Mapping):
            tags.append(name + DICT_SUFFIX)
            if nested:
                _walk(v, name + ".", attrs, tags, nested)
        elif t is list or t is tuple:
            whole = canon(v)
            if _short(whole):
                attrs[name + LIST_SUFFIX] = whole
            seen = set()
            for e in v:
                if e is not None and not isinstance(e, (list, tuple, Mapping)) and scalar(e):
                    tag = element_tag(name, _plain(e) if type(e) not in (str, int, float, bool)
                                      else e)
                    if tag not in seen and _short(tag):
                        seen.add(tag)
                        tags.append(tag)
        elif scalar(v):
            attrs[name] = _plain(v)


# Metadata names seen to need no escaping (a bounded set: names repeat).
_PLAIN_NAMES: set = set()


def _plain_name(k: Any) -> bool:
    """Whether k is a str name that is its own attribute name."""
    return (type(k) is str and bool(k) and "\\" not in k and "." not in k and "=" not in k
            and "\x1f" not in k and len(k) * 4 <= MAX_TEXT)


def project(meta: Optional[Mapping[str, Any]], nested: bool = True,
            extra_tags: Sequence[str] = ()) -> Tuple[Dict[str, Any], List[str]]:
    """(attributes, tags) of a metadata dict (see the module's documentation);
    names longer than the store allows are left out like long values."""
    attrs: Dict[str, Any] = {}
    tags: List[str] = list(extra_tags)
    if meta:
        if type(meta) is dict and len(meta) <= 64:
            # Plain names and short str, int and bool values, the common case,
            # as _walk takes them; anything else goes through _walk.
            plain = _PLAIN_NAMES
            for k, v in meta.items():
                t = type(v)
                if type(k) is not str:
                    break
                if k not in plain:
                    if not _plain_name(k):
                        break
                    if len(plain) < 4096:
                        plain.add(k)
                if t is str:
                    if len(v) * 4 > MAX_TEXT or "\0" in v:
                        break
                elif t is int:
                    if not -(2**63) <= v < 2**63:
                        break
                elif t is not bool:
                    break
                attrs[k] = v
            else:
                if len(tags) > _cdefs.MAX_TAGS:
                    raise ValueError(f"{len(tags)} tags; a mnemo memory holds at most "
                                     f"{_cdefs.MAX_TAGS}")
                return attrs, tags
            attrs = {}
        _walk(meta, "", attrs, tags, nested)
    if any(len(n) * 4 > MAX_TEXT for n in attrs):
        attrs = {n: v for n, v in attrs.items() if _short(n)}
    if len(attrs) > _cdefs.MAX_ATTRIBUTES or len(tags) > _cdefs.MAX_TAGS:
        raise ValueError(f"metadata with {len(attrs)} filterable values and {len(tags)} list "
                         f"elements; a mnemo memory holds at most {_cdefs.MAX_ATTRIBUTES} "
                         f"attributes and {_cdefs.MAX_TAGS} tags")
    return attrs, tags


def project_plain(metas: Any, skip: Tuple[str, ...] = ()) -> Optional[List[Dict[str, Any]]]:
    """The attributes project() makes of each dict of a list (None: no
    metadata), names in `skip` left out, when every dict is flat with plain
    names and values (str, int, float, bool, None), made by the compiled
    extension in one call; else None."""
    return _ext.project_plain(metas, skip) if type(metas) is list else None


def project_many(metas: List[Any], nested: bool = True, skip: Tuple[str, ...] = ()
                 ) -> Tuple[List[Dict[str, Any]], Optional[List[List[str]]]]:
    """project() of each metadata dict (None: none), names in `skip` left
    out: (attributes, tags), tags None when no dict gives any. Flat dicts
    of plain names and values are projected by the compiled extension in
    one call; any other list as project() does, dict by dict."""
    got = project_plain(metas, skip)
    if got is not None:
        return got, None
    attrs: List[Dict[str, Any]] = []
    tags: List[List[str]] = []
    for m in metas:
        if skip and m and any(f in m for f in skip):
            m = {k: v for k, v in m.items() if k not in skip}
        a, t = project(m, nested)
        attrs.append(a)
        tags.append(t)
    return attrs, (tags if any(tags) else None)


def dumps(doc: Any) -> str:
    """The JSON a payload holds; values JSON cannot hold are refused (a
    silent str() would come back as another type)."""
    try:
        return _dumps_encode(doc)
    except TypeError as exc:
        raise TypeError(f"metadata must be JSON-serialisable to be stored in mnemo: {exc}") from None


# Conditions: a filter as the mnemo filters that bracket it, and its test.

class Cond:
    """A predicate over memories: lo and hi are mnemo filters with lo <= P
    <= hi (the same object when P is exact, evaluated wholly by the store);
    test(attributes, tags) decides P on a memory read back, by the store's
    own rules, for the inexact case (substring tests the store lacks)."""

    __slots__ = ("lo", "hi", "test")

    def __init__(self, lo: Filter, hi: Filter, test: Callable[[Mapping[str, Any], Sequence[str]], bool]):
        self.lo, self.hi, self.test = lo, hi, test

    @property
    def exact(self) -> bool:
        return self.lo is self.hi


def _kind(v: Any) -> int:
    t = type(v)
    if t is bool:
        return 2
    if t is str:
        return 3
    return 1


def _eq(a: Any, b: Any) -> bool:
    return _kind(a) == _kind(b) and a == b


_ORDER = {"$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b,
          "$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b}


def _attr_test(name: str, op: str, values: Tuple[Any, ...]) -> Callable[..., bool]:
    """The store's attribute predicate in Python (mnemo.h: values of
    different kinds never equal or order each other; NE and NIN need the
    attribute)."""
    if op == "$exists":
        return lambda a, t: name in a
    if op == "$eq":
        v = values[0]
        return lambda a, t: name in a and _eq(a[name], v)
    if op == "$ne":
        v = values[0]
        return lambda a, t: name in a and not _eq(a[name], v)
    if op == "$in":
        return lambda a, t: name in a and any(_eq(a[name], v) for v in values)
    if op == "$nin":
        return lambda a, t: name in a and not any(_eq(a[name], v) for v in values)
    if op == "$between":
        lo, hi = values

        def between(a: Mapping[str, Any], t: Any) -> bool:
            x = a.get(name)
            return (x is not None and _kind(x) != 2 and _kind(x) == _kind(lo) == _kind(hi)
                    and lo <= x <= hi)
        return between
    cmp, v = _ORDER[op], values[0]
    return lambda a, t: (name in a and _kind(a[name]) != 2 and _kind(a[name]) == _kind(v)
                         and cmp(a[name], v))


def attr(name: str, op: str, *values: Any) -> Cond:
    values = tuple(_plain(v) if type(v) not in (str, int, float, bool) else v for v in values)
    for v in values:
        if type(v) is str and not _short(v):
            raise ValueError(f"a filter value of {len(v.encode())} bytes: mnemo's string values "
                             f"hold at most {MAX_TEXT} bytes")
    f = Filter.attribute(name, op, *values)
    return Cond(f, f, _attr_test(name, op, values))


def tags(mode: str, names: Sequence[str]) -> Cond:
    names = tuple(names)
    if any(not _short(n) for n in names):
        # A tag the store could not hold: no memory has it.
        kept = tuple(n for n in names if _short(n))
        if mode == "all":
            return FALSE
        names = kept
    f = Filter.tags(*names, mode=mode) if names else (Filter.all() if mode == "all"
                                                       else Filter.nothing())
    if mode == "all":
        return Cond(f, f, lambda a, t: all(n in t for n in names))
    return Cond(f, f, lambda a, t: any(n in t for n in names))


def substring(name: str, needle: str, fold: bool = False) -> Cond:
    """A string attribute holding `needle` (case-folded with fold): the
    store has no substring test, so this is bracketed by nothing and by
    "has the attribute", and tested on the memories read back."""
    n = needle.lower() if fold else needle

    def test(a: Mapping[str, Any], t: Any) -> bool:
        x = a.get(name)
        if type(x) is not str:
            return False
        return n in (x.lower() if fold else x)
    return Cond(NOTHING_F, Filter.exists(name), test)


TRUE_F = Filter.all()
NOTHING_F = Filter.nothing()
TRUE = Cond(TRUE_F, TRUE_F, lambda a, t: True)
FALSE = Cond(NOTHING_F, NOTHING_F, lambda a, t: False)


def and_(*conds: Cond) -> Cond:
    conds = tuple(c for c in conds if c is not TRUE)
    if not conds:
        return TRUE
    if len(conds) == 1:
        return conds[0]
    if any(c is FALSE for c in conds):
        return FALSE
    lo = Filter.and_(*(c.lo for c in conds))
    hi = lo if all(c.exact for c in conds) else Filter.and_(*(c.hi for c in conds))
    tests = tuple(c.test for c in conds)
    return Cond(lo, hi, lambda a, t: all(f(a, t) for f in tests))


def or_(*conds: Cond) -> Cond:
    conds = tuple(c for c in conds if c is not FALSE)
    if not conds:
        return FALSE
    if len(conds) == 1:
        return conds[0]
    if any(c is TRUE for c in conds):
        return TRUE
    lo = Filter.or_(*(c.lo for c in conds))
    hi = lo if all(c.exact for c in conds) else Filter.or_(*(c.hi for c in conds))
    tests = tuple(c.test for c in conds)
    return Cond(lo, hi, lambda a, t: any(f(a, t) for f in tests))


def not_(c: Cond) -> Cond:
    if c is TRUE:
        return FALSE
    if c is FALSE:
        return TRUE
    lo = Filter.not_(c.hi)
    hi = lo if c.exact else Filter.not_(c.lo)
    test = c.test
    return Cond(lo, hi, lambda a, t: not test(a, t))


def present(name: str) -> Cond:
    """The metadata holds something other than None at `name`: a value,
    a list or a dict (values past the store's limits excepted)."""
    return or_(attr(name, "$exists"), attr(name + LIST_SUFFIX, "$exists"),
               tags("any", [name + DICT_SUFFIX]))


class FilterCache:
    """Compiled filters by a hashable form of the framework's filter, so a
    repeated filter costs a dictionary look-up (a mnemo filter may serve
    any number of searches at once)."""

    def __init__(self, size: int = 512) -> None:
        self._items: Dict[Hashable, Any] = {}
        self._size = size
        self._lock = threading.Lock()
        # A hit without a Python call: the dict's own get (None: not made yet).
        self.find = self._items.get

    def get(self, key: Hashable, make: Callable[[], Any]) -> Any:
        # A hit is one look-up, without the lock (a dict's get is atomic);
        # past `size` filters the oldest made goes first.
        found = self._items.get(key)
        if found is not None:
            return found
        value = make()
        with self._lock:
            self._items[key] = value
            if len(self._items) > self._size:
                del self._items[next(iter(self._items))]
        return value


_KEY_TYPES = (str, int, bool)


def filter_key(f: Any) -> Hashable:
    """A hashable form of a dictionary filter (None for one without): a
    flat dict of str, int and bool values as its items with their types
    (True, 1 and 1.0 are different filters), anything else as its JSON."""
    if f is None:
        return None
    if type(f) is dict:
        if len(f) == 1:
            for k, v in f.items():
                t = v.__class__
                if type(k) is str and (t is str or t is int or t is bool):
                    return (k, t, v)
        elif len(f) <= 8:
            key = tuple((k, v.__class__, v) for k, v in f.items())
            if all(type(k) is str and t in _KEY_TYPES for k, t, _ in key):
                return key
    try:
        return json.dumps(f, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return repr(f)


class Plan:
    """What a search runs: the store's filter (scope AND the condition, or
    its upper bracket) and, for an inexact condition, the test of the
    memories read back."""

    __slots__ = ("where", "test")

    def __init__(self, scope: Optional[Filter], cond: Cond) -> None:
        base = cond.lo if cond.exact else cond.hi
        if scope is None:
            self.where = None if base is TRUE_F else base
        else:
            self.where = scope if base is TRUE_F else Filter.and_(scope, base)
        self.test = None if cond.exact else cond.test

    @staticmethod
    def exact(where: Optional[Filter]) -> "Plan":
        """The plan of a store filter alone (no test of the records read)."""
        plan = Plan.__new__(Plan)
        plan.where, plan.test = where, None
        return plan


class Row(NamedTuple):
    """What the adapters read back of a memory (a subset of mnemo.Memory's
    fields, with the same names; a field not read is None, () or b"")."""

    id: int
    key: Optional[str]
    namespace: Tuple[str, ...]
    payload: bytes
    time: float


# What mnemo_store_read_fields reads of a search's hits: only what the
# adapter uses (the key and payload; the namespace where the framework
# returns it), not every tag and attribute, nor the time and importance
# (each part is scattered memory, microseconds a hit when out of the caches
# after a scan). read_rows reads the whole Row.
ROW_FIELDS = _cdefs.FIELD_KEY | _cdefs.FIELD_NAMESPACE | _cdefs.FIELD_PAYLOAD
KEY_PAYLOAD = _cdefs.FIELD_KEY | _cdefs.FIELD_PAYLOAD


def read_rows(store: Store, ids: Any) -> List[Optional[Row]]:
    """Key, namespace, payload and time of each id (None for an id not in
    the store), read through mnemo_store_read like Store.read, in the
    compiled extension and without turning every attribute and tag into
    Python objects (for a memory with four attributes Store.read takes
    about 4x as long)."""
    if type(ids) is list:
        if all(type(i) is int and 0 <= i < NO_ID for i in ids):
            return _ext.read_rows(store.handle, ids, None, Row)  # type: ignore[no-any-return]
    elif (type(ids) is np.ndarray and ids.dtype == np.uint64 and ids.ndim == 1
          and ids.flags.c_contiguous and ids.ctypes.data % ALIGNMENT == 0):
        return _ext.read_rows(store.handle, ids, None, Row) if ids.shape[0] else []
    ids = host_input(ids, "ids", [np.uint64], ndim=1, kind=INDICES)
    return _ext.read_rows(store.handle, ids, None, Row) if ids.shape[0] else []


# Reading the ids of inexact filters in one go below this many candidates.
_SELECT_LIMIT = 4096


def run_search(store: Store, query: Any, k: int, plan: Plan,
               want_memories: bool = True,
               fields: int = KEY_PAYLOAD) -> List[Tuple[int, float, Any]]:
    """(id, score, Row or Memory) of the k best memories `plan` allows for
    `query` (an embedding as as_query takes it), best first; a Row holds
    the `fields` read (mnemo's FIELD_* bits). An inexact plan reads its
    candidates back and tests them: all of them when few, else growing
    searches until k pass; either way min(k, matches) come back, as from
    an exact one."""
    if plan.test is None:
        where = plan.where
        if want_memories:
            # The search and the hits' records in one call of the extension
            # (None: a query it does not take as it is). The handles read
            # from the objects' fields (their properties, Python calls,
            # only to build a filter's or raise for a closed store).
            h = store._handle
            fh = 0 if where is None else where._handle
            if h is not None and fh is not None:
                # The query as it came: the extension takes a float32 [dim]
                # numpy array as as_query returns it (sparing as_query's
                # checks, and their cache misses after a large scan) and
                # declines anything else, having called nothing.
                hits = _ext.search_rows(h, query, k, fh, store._dim, fields, Row)
                if hits is not None:
                    return hits  # type: ignore[no-any-return]
            query = as_query(query)
            hits = _ext.search_rows(h if h is not None else store.handle, query, k,
                                    fh if fh is not None else where.handle,  # type: ignore[union-attr]
                                    store._dim, fields, Row)
            if hits is not None:
                return hits  # type: ignore[no-any-return]
        else:
            query = as_query(query)
        ids, scores = store.search(query, k, where=where)
        if want_memories:
            # The hits before the first NO_ID, read in one call of the extension.
            return _ext.read_rows(store.handle, ids, scores, Row, fields)  # type: ignore[no-any-return]
        idl = ids.tolist()
        n = idl.index(NO_ID) if NO_ID in idl else len(idl)
        return list(zip(idl[:n], scores.tolist()[:n], [None] * n))
    query = as_query(query)
    test = plan.test
    total = store.count_where(plan.where)
    if total == 0:
        return []
    if total <= _SELECT_LIMIT:
        cand = store.select(plan.where)
        keep = {m.id: m for m in store.read(cand) if m is not None and test(m.attributes, m.tags)}
        if not keep:
            return []
        ids, scores = store.search(query, k, where=Filter.ids(list(keep)))
        n = int(np.count_nonzero(ids != NO_ID))
        return [(i, s, keep[i]) for i, s in zip(ids[:n].tolist(), scores[:n].tolist())]
    kk = min(max(4 * k, 64), total)
    while True:
        ids, scores = store.search(query, kk, where=plan.where)
        n = int(np.count_nonzero(ids != NO_ID))
        out = []
        for i, s, m in zip(ids[:n].tolist(), scores[:n].tolist(), store.read(ids[:n])):
            if m is not None and test(m.attributes, m.tags):
                out.append((i, s, m))
                if len(out) == k:
                    return out
        if kk >= total or n < kk:
            return out
        kk = min(kk * 4, total)


def run_select(store: Store, plan: Plan, offset: int = 0,
               limit: Optional[int] = None) -> np.ndarray:
    """Ids (ascending) of the memories `plan` allows, past `offset`, at
    most `limit`; an inexact plan tests its candidates."""
    if plan.test is None:
        return store.select(plan.where, offset, limit)
    cand = store.select(plan.where)
    keep = [m.id for m in store.read(cand) if m is not None and plan.test(m.attributes, m.tags)]
    end = None if limit is None else offset + limit
    return np.asarray(keep[offset:end], dtype=np.uint64)


class Backing:
    """The mnemo store under an adapter, made on first use when its
    dimension is not known beforehand, with ids handed out behind string
    keys: a key's id is looked up in the store, a new key takes the next
    id (above every id in the store when it was opened, in steps of
    `stride`, so an adapter may keep stride - 1 ids beside each)."""

    def __init__(self, store: Optional[Store] = None, *, dim: Optional[int] = None,
                 runtime: Optional[Runtime] = None, path: Optional[str] = None,
                 metric: str = "cosine", dtype: str = "f32", stride: int = 1) -> None:
        self.lock = threading.RLock()
        self._runtime = runtime
        self._path = path
        self._metric = metric
        self._dtype = dtype
        self.stride = stride
        self.store: Optional[Store] = None
        self._next = 0
        if store is not None:
            self._adopt(store)
        elif path is not None:
            import os
            if os.path.exists(path):
                self._adopt(Store.open_durable(self.runtime, path))
            elif dim:
                self._adopt(Store.open_durable(self.runtime, path, dim, dtype, metric))
        elif dim:
            self._adopt(Store(self.runtime, dim, dtype, metric))

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = default_runtime()
        return self._runtime

    def _adopt(self, store: Store) -> None:
        self.store = store
        n = store.count()
        if n:
            top = int(store.select(None, n - 1, 1)[0])
            self._next = (top // self.stride + 1) * self.stride

    def ensure(self, dim: int) -> Store:
        """The store, made now with `dim` if there is none yet."""
        store = self.store
        if store is not None:
            return store
        with self.lock:
            if self.store is None:
                if self._path is not None:
                    self._adopt(Store.open_durable(self.runtime, self._path, dim, self._dtype,
                                                   self._metric))
                else:
                    self._adopt(Store(self.runtime, dim, self._dtype, self._metric))
            return self.store  # type: ignore[return-value]

    def ids_of(self, keys: Sequence[str]) -> np.ndarray:
        """The ids of `keys` (NO_ID for keys not in the store)."""
        if self.store is None or not keys:
            return np.full(len(keys), NO_ID, dtype=np.uint64)
        return self.store.ids_of_keys(list(keys))

    def assign(self, keys: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """(ids, existed) for `keys`, new keys given new ids (a key repeated
        in `keys` gets one id). Call with the lock held through the write."""
        ids = self.ids_of(keys)
        existed = ids != NO_ID
        if not existed.all():
            fresh: Dict[str, int] = {}
            for i in np.flatnonzero(~existed).tolist():
                key = keys[i]
                got = fresh.get(key)
                if got is None:
                    got = fresh[key] = self._next
                    self._next += self.stride
                ids[i] = got
        return ids, existed


def _from_lists(rows: List[Any]) -> Optional[np.ndarray]:
    """float32 [len(rows), dim] of equally long lists of floats, converted
    by the compiled extension (about 8x as fast as numpy.asarray), or
    None."""
    return _ext.float32_rows(rows, len(rows[0]))  # type: ignore[no-any-return]


def as_matrix(vectors: Any, count: int) -> np.ndarray:
    """Embeddings as a float32 [count, dim] array."""
    arr = None
    if type(vectors) is list and vectors and type(vectors[0]) is list:
        arr = _from_lists(vectors)
    if arr is None:
        arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1 and count == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[0] != count:
        raise ValueError(f"expected {count} embeddings, got an array of shape {arr.shape}")
    return arr


_F32 = np.dtype(np.float32)
_NDARRAY = np.ndarray  # (np.ndarray: a look-up in numpy's large module dict each time)


def as_query(vector: Any) -> np.ndarray:
    t = type(vector)
    if t is _NDARRAY:
        if vector.dtype is _F32 and vector.ndim == 1:
            return vector
    elif t is list and vector and type(vector[0]) is float:
        got = _ext.float32_rows([vector], len(vector))
        if got is not None:
            return got[0]  # type: ignore[no-any-return]
    q = np.asarray(vector, dtype=np.float32)
    if q.ndim != 1:
        raise ValueError(f"expected one embedding, got an array of shape {q.shape}")
    return q


def chunks(n: int, size: int) -> Iterable[slice]:
    for b in range(0, n, size):
        yield slice(b, min(b + size, n))


# Models of values their validation would keep as they are (a search's
# results: str ids, str texts, dict payloads), made as pydantic's
# model_construct makes them: the constructor's state without its
# validation, whose code is mostly out of the caches after the scan of a
# large store. Each adapter checks at import that the state is the
# constructor's (same_as_constructor) and uses the constructor otherwise.
_new = object.__new__
_setattr = object.__setattr__


def constructed(cls: type, state: Dict[str, Any], fields_set: frozenset) -> Any:
    """An instance of the pydantic model cls whose __dict__ is state."""
    obj = _new(cls)
    _setattr(obj, "__dict__", state)
    _setattr(obj, "__pydantic_fields_set__", set(fields_set))
    _setattr(obj, "__pydantic_extra__", None)
    _setattr(obj, "__pydantic_private__", None)
    return obj


def same_as_constructor(cls: type, make: Callable[..., Any], samples: Iterable[Dict[str, Any]]) -> bool:
    """Whether make(**kw) gives the instance cls(**kw) gives, for each kw."""
    try:
        for kw in samples:
            made, fast = cls(**kw), make(**kw)
            if (list(made.__dict__.items()) != list(fast.__dict__.items())
                    or made.__pydantic_fields_set__ != fast.__pydantic_fields_set__
                    or made.__pydantic_extra__ != fast.__pydantic_extra__
                    or made.__pydantic_private__ != fast.__pydantic_private__
                    or made != fast):
                return False
    except Exception:
        return False
    return True

