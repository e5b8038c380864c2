"""Filter: which memories a search or a selection may return (mnemo_filter).

A Filter is an expression over what memories hold besides their vectors
(mnemo.h, "Filters"): attribute predicates, tags, namespaces, keys, ids,
last-access time and importance, combined by AND, OR and NOT. It is written
either with the builder

    >>> f = (Filter.attribute("year", ">=", 2020) & Filter.tags("work")
    ...      & Filter.namespace(("users", "42"), under=True))

or in the dictionary form that LangChain, mem0 and LlamaIndex users write,

    >>> f = Filter({"year": {"$gte": 2020}, "$tags": ["work"],
    ...             "$namespace": {"$under": ("users", "42")}})

Dictionary form: several keys in one dict are ANDed; "$and" / "$or" take a
list of dicts, "$not" one dict. Any other key names an attribute, whose
condition is a plain value ($eq) or a dict of operators (several: ANDed):
$eq $ne $lt $lte $gt $gte (one value), $in $nin (a list), $between
([lo, hi]), $exists (True / False), $not (a dict of operators). Values are
int, float, bool or str (a list of them may be a 1-D array); a bool is only
compared by $eq $ne $in $nin. As in
mnemo.h, a predicate on an attribute a memory lacks is false ($ne and $nin
too: they need the attribute), and values of different kinds never equal
or order each other. Reserved keys for the other fields:
    "$namespace": a tuple of str (exactly that namespace), or
        {"$eq": parts} / {"$under": parts} (that namespace or one below);
    "$tags": a list of str (holds all of them), or {"$all": [...]} /
        {"$any": [...]};
    "$key": a str, or {"$eq": str} / {"$in": [...]};
    "$id": an int, or {"$eq": int} / {"$in": [...] or an array of ids};
    "$time", "$importance": {"$gte", "$gt", "$lte", "$lt", "$eq",
        "$between"} over the last-access time (seconds) or importance.

A Filter is not tied to a store; it may be used by any number of searches
at once. Its library handle is built on first use and freed by close() (or
when the Filter is collected). A dict given to a search or a selection is
built into a Filter that the package keeps for the next call giving an equal
dict (the last 256 of them). Anything malformed raises MnemoValueError (a
ValueError) or MnemoTypeError (a TypeError) when the Filter is made.
"""

from __future__ import annotations

import ctypes
import math
import os
import threading
from collections import OrderedDict
from collections import abc as _abc
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _cdefs
from ._lib import check, lib
from ._owned import OwnedHandle
from .arrays import INDICES, host_input
from .enums import Status
from .errors import MnemoTypeError, MnemoValueError

__all__ = ["Filter", "as_filter"]

# enum mnemo_filter_op.
OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE = 1, 2, 3, 4, 5, 6
OP_IN, OP_NOT_IN, OP_BETWEEN, OP_EXISTS = 7, 8, 9, 10
OP_ANY, OP_ALL, OP_NAMESPACE_EQ, OP_NAMESPACE_UNDER = 11, 12, 13, 14

# Spellings of the attribute operators (the dictionary form's and others).
_ATTRIBUTE_OPS = {
    OP_EQ: ("$eq", "eq", "=="), OP_NE: ("$ne", "ne", "!="),
    OP_LT: ("$lt", "lt", "<"), OP_LE: ("$lte", "lte", "le", "<="),
    OP_GT: ("$gt", "gt", ">"), OP_GE: ("$gte", "gte", "ge", ">="),
    OP_IN: ("$in", "in"), OP_NOT_IN: ("$nin", "nin", "not_in", "not in"),
    OP_BETWEEN: ("$between", "between"), OP_EXISTS: ("$exists", "exists"),
}
_OP_OF = {name: op for op, names in _ATTRIBUTE_OPS.items() for name in names}
_OP_NAME = {op: names[0] for op, names in _ATTRIBUTE_OPS.items()}

# A filter nests at most this deep (the library's bound).
_MAX_DEPTH = 256

Scalar = Union[int, float, bool, str]
Where = Union["Filter", Mapping[str, Any]]


def _value_error(message: str) -> MnemoValueError:
    return MnemoValueError(Status.E_INVALID_ARGUMENT, message)


def _type_error(message: str) -> MnemoTypeError:
    return MnemoTypeError(Status.E_DTYPE, message)


def c_text(value: Any, what: str, limit: int = _cdefs.MAX_NAME_BYTES,
           empty_ok: bool = False) -> bytes:
    """A str as the NUL-terminated UTF-8 the library reads: a NUL inside
    would cut it short silently, so it is refused, as are an empty string
    (unless empty_ok) and one longer than `limit` bytes."""
    if not isinstance(value, str):
        raise _type_error(f"{what} must be a str, not {type(value).__name__} ({value!r})")
    raw = value.encode("utf-8", "surrogateescape")
    if b"\0" in raw:
        raise _value_error(f"{what} {value!r} holds a NUL character")
    if not raw and not empty_ok:
        raise _value_error(f"{what} is empty")
    if len(raw) > limit:
        raise _value_error(f"{what} is {len(raw)} bytes long; at most {limit}")
    return raw


def c_texts(values: Any, what: str, limit: int = _cdefs.MAX_NAME_BYTES) -> Tuple[bytes, ...]:
    """A list, tuple or set of str (a str alone is refused: its characters
    would be taken one by one)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, _abc.Iterable):
        raise _type_error(f"{what} must be a list or tuple of str, not "
                          f"{type(values).__name__} ({values!r})")
    return tuple(c_text(v, f"{what}[{i}]", limit) for i, v in enumerate(values))


def namespace_parts(parts: Any, what: str = "namespace") -> Tuple[bytes, ...]:
    """A namespace: a tuple or list of str parts. A str is refused, since
    "/" may be inside a part."""
    if isinstance(parts, str):
        raise _type_error(f"{what} must be a tuple of str parts, not the str {parts!r} "
                          f"(\"/\" may be inside a part: write {tuple(parts.split('/'))!r})")
    if not isinstance(parts, (tuple, list)):
        raise _type_error(f"{what} must be a tuple or list of str, not {type(parts).__name__}")
    if len(parts) > _cdefs.MAX_NAMESPACE_DEPTH:
        raise _value_error(f"{what} has {len(parts)} parts; at most "
                           f"{_cdefs.MAX_NAMESPACE_DEPTH} (MNEMO_MAX_NAMESPACE_DEPTH)")
    return tuple(c_text(p, f"{what}[{i}]") for i, p in enumerate(parts))


def typed_value(value: Any, what: str) -> Tuple[int, Any]:
    """(mnemo_value_type, value) of an int, float, bool or str (numpy
    scalars too). bool is tested before int, of which it is a subclass."""
    if isinstance(value, (bool, np.bool_)):
        return _cdefs.VALUE_BOOL, bool(value)
    if isinstance(value, (int, np.integer)):
        v = int(value)
        if not -(2**63) <= v < 2**63:
            raise MnemoValueError(Status.E_OUT_OF_RANGE, f"{what} = {v} does not fit in an int64")
        return _cdefs.VALUE_INT, v
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if not math.isfinite(v):
            raise _value_error(f"{what} is {v}; numbers must be finite")
        return _cdefs.VALUE_DOUBLE, v
    if isinstance(value, str):
        return _cdefs.VALUE_STRING, c_text(value, what, empty_ok=True)
    raise _type_error(f"{what} must be an int, float, bool or str, not "
                      f"{type(value).__name__} ({value!r})")


def fill_value(out: Any, typed: Tuple[int, Any]) -> None:
    """Writes a typed value into a ctypes mnemo_value."""
    kind, v = typed
    out.type = kind
    out.reserved = 0
    if kind == _cdefs.VALUE_DOUBLE:
        out.d = v
    elif kind == _cdefs.VALUE_STRING:
        out.s = v
    else:
        out.i = int(v)


def _real(value: Any, what: str) -> float:
    """A bound of a time or importance range: a real number, not NaN."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise _type_error(f"{what} must be a real number, not {type(value).__name__} ({value!r})")
    v = float(value)
    if math.isnan(v):
        raise _value_error(f"{what} is NaN")
    return v


def _attribute_op(op: Any) -> int:
    if isinstance(op, str):
        found = _OP_OF.get(op.strip().lower())
        if found is None:
            raise _value_error(f"unknown attribute operator {op!r}; expected one of "
                               + ", ".join(names[0] for names in _ATTRIBUTE_OPS.values()))
        return found
    if isinstance(op, (int, np.integer)) and not isinstance(op, (bool, np.bool_)) \
            and int(op) in _ATTRIBUTE_OPS:
        return int(op)
    raise _type_error(f"an attribute operator must be one of "
                      f"{', '.join(names[0] for names in _ATTRIBUTE_OPS.values())}, not {op!r}")


class Filter(OwnedHandle):
    """A filter expression (mnemo_filter); see the module's documentation.

    Filter(where) reads the dictionary form; the class methods build one
    predicate each, and &, |, ~ (or and_, or_, not_) combine them.
    """

    def __init__(self, where: Optional[Where] = None) -> None:
        self._handle: Optional[int] = None
        self._closed = False
        # Per filter: a collected filter's close() may run inside another's
        # build (the collector runs anywhere), so one lock for all would
        # deadlock.
        self._lock = threading.Lock()
        self._pid = os.getpid()
        if where is None:
            tree: tuple = ("and", ())
        elif isinstance(where, Filter):
            tree = where._tree
        elif isinstance(where, _abc.Mapping):
            tree = _parse(where, "where")._tree
        else:
            raise _type_error(f"a filter is a mnemo.Filter or a dict, not {type(where).__name__}")
        self._tree = tree
        self._depth, self._nodes = _measure(tree)
        self._check_size()

    @classmethod
    def _of(cls, tree: tuple) -> "Filter":
        f = cls.__new__(cls)
        f._handle = None
        f._closed = False
        f._lock = threading.Lock()
        f._pid = os.getpid()
        f._tree = tree
        f._depth, f._nodes = _measure(tree)
        f._check_size()
        return f

    def _check_size(self) -> None:
        if self._depth > _MAX_DEPTH:
            raise _value_error(f"a filter nests at most {_MAX_DEPTH} levels deep")
        if self._nodes > _cdefs.MAX_FILTER_NODES:
            raise _value_error(f"a filter holds at most {_cdefs.MAX_FILTER_NODES} nodes "
                               "(MNEMO_MAX_FILTER_NODES)")

    @classmethod
    def from_dict(cls, where: Mapping[str, Any]) -> "Filter":
        """The dictionary form (see the module's documentation)."""
        if not isinstance(where, _abc.Mapping):
            raise _type_error(f"where must be a dict, not {type(where).__name__}")
        return cls._of(_parse(where, "where")._tree)

    # Predicates.

    @classmethod
    def attribute(cls, name: str, op: Any, *values: Scalar) -> "Filter":
        """An attribute predicate: op is "$eq" / "eq" / "==", "$ne", "$lt",
        "$lte", "$gt", "$gte" (one value), "$in", "$nin" (any number),
        "$between" (lo, hi) or "$exists" (none)."""
        code = _attribute_op(op)
        raw = c_text(name, "an attribute name")
        what = f"attribute {name!r} {_OP_NAME[code]}"
        need = {OP_BETWEEN: 2, OP_EXISTS: 0, OP_IN: None, OP_NOT_IN: None}.get(code, 1)
        if need is not None and len(values) != need:
            raise _value_error(f"{what} takes {need} value{'s' if need != 1 else ''}, "
                               f"not {len(values)}")
        typed = tuple(typed_value(v, f"{what} value") for v in values)
        if code in (OP_LT, OP_LE, OP_GT, OP_GE, OP_BETWEEN) and any(
                t == _cdefs.VALUE_BOOL for t, _ in typed):
            raise _type_error(f"{what}: booleans are only compared by $eq, $ne, $in and $nin")
        if code == OP_BETWEEN:
            kinds = {_cdefs.VALUE_STRING if t == _cdefs.VALUE_STRING else 0 for t, _ in typed}
            if len(kinds) != 1:
                raise _type_error(f"{what} takes two numbers or two strings, not {values!r}")
        return cls._of(("attr", raw, code, typed))

    @classmethod
    def exists(cls, name: str) -> "Filter":
        """The memories that have the attribute `name`."""
        return cls.attribute(name, OP_EXISTS)

    @classmethod
    def tags(cls, *tags: str, mode: str = "all") -> "Filter":
        """The memories holding every one ("all"; of none: every memory) or
        at least one ("any"; of none: nothing) of `tags`."""
        if mode not in ("all", "any"):
            raise _value_error(f"mode must be 'all' or 'any', not {mode!r}")
        raw = c_texts(_spread(tags), "tags")
        return cls._of(("tags", OP_ALL if mode == "all" else OP_ANY, raw))

    @classmethod
    def namespace(cls, parts: Sequence[str], under: bool = False) -> "Filter":
        """The memories in exactly this namespace (a tuple of str), or with
        under=True in it or one below it (with no parts: every memory that
        has a namespace)."""
        if not isinstance(under, (bool, np.bool_)):
            raise _type_error(f"under must be a bool, not {type(under).__name__}")
        raw = namespace_parts(parts)
        return cls._of(("ns", OP_NAMESPACE_UNDER if under else OP_NAMESPACE_EQ, raw))

    @classmethod
    def keys(cls, *keys: str) -> "Filter":
        """The memories holding any of these keys (given one by one or as
        one list)."""
        return cls._of(("keys", c_texts(_spread(keys), "keys", _cdefs.MAX_KEY_BYTES)))

    @classmethod
    def ids(cls, ids: Any) -> "Filter":
        """The memories with any of these ids (ids not in a store are
        ignored); a list or an array of non-negative integers."""
        if isinstance(ids, (int, np.integer)) and not isinstance(ids, (bool, np.bool_)):
            ids = [ids]
        arr = host_input(ids, "ids", [np.uint64], ndim=1, kind=INDICES)
        arr.setflags(write=False)
        return cls._of(("ids", arr))

    @classmethod
    def time(cls, lo: float = -math.inf, hi: float = math.inf) -> "Filter":
        """Last-access time in [lo, hi] (inclusive; an infinite end is open)."""
        return cls._of(("time", _real(lo, "time lo"), _real(hi, "time hi")))

    @classmethod
    def importance(cls, lo: float = -math.inf, hi: float = math.inf) -> "Filter":
        """Importance in [lo, hi] (inclusive; an infinite end is open)."""
        return cls._of(("importance", _real(lo, "importance lo"), _real(hi, "importance hi")))

    @classmethod
    def all(cls) -> "Filter":
        """Every memory (an AND of nothing)."""
        return cls._of(("and", ()))

    @classmethod
    def nothing(cls) -> "Filter":
        """No memory (an OR of nothing)."""
        return cls._of(("or", ()))

    # Combinations.

    @classmethod
    def and_(cls, *filters: Where) -> "Filter":
        """Every one of `filters` (Filters or dicts); of none: every memory."""
        return cls._of(_combine("and", filters))

    @classmethod
    def or_(cls, *filters: Where) -> "Filter":
        """At least one of `filters`; of none: no memory."""
        return cls._of(_combine("or", filters))

    @classmethod
    def not_(cls, f: Where) -> "Filter":
        """Not `f`: true for a memory that lacks what `f` asks about."""
        return cls._of(("not", _as_tree(f)))

    def __and__(self, other: Where) -> "Filter":
        return Filter.and_(self, other)

    def __or__(self, other: Where) -> "Filter":
        return Filter.or_(self, other)

    def __invert__(self) -> "Filter":
        return Filter.not_(self)

    # The library handle.

    @property
    def handle(self) -> int:
        """The mnemo_filter* as an int, built on first use; MnemoValueError
        once closed."""
        h = self._handle
        if h is not None:
            return h
        with self._lock:
            if self._closed:
                raise MnemoValueError(Status.E_NULL_POINTER, "the filter is closed")
            if self._handle is None:
                self._handle = _build(self._tree)
            return self._handle

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Frees the library's filter; further use raises MnemoValueError."""
        with self._lock:
            self._closed = True
            handle, self._handle = self._handle, None
        if handle is not None:
            lib.mnemo_filter_destroy(handle)

    def to_dict(self) -> dict:
        """The dictionary form of this filter (Filter(f.to_dict()) filters
        as f does)."""
        return _to_dict(self._tree)

    def __repr__(self) -> str:
        return f"mnemo.Filter({self.to_dict()!r})"


class _Part(Filter):
    """A piece of a dictionary form being parsed: its tree alone, with no
    handle, lock or process id, so that a dict makes one Filter rather than
    one per predicate and combination (10,000 one-tag dicts for a batch's
    where_each: a quarter of their parse time). Never handed out: the parse
    ends in a Filter of its tree."""

    @classmethod
    def _of(cls, tree: tuple) -> "Filter":
        p = object.__new__(cls)
        p._tree = tree
        return p

    def close(self) -> None:
        pass


def _spread(args: Tuple[Any, ...]) -> Any:
    """Arguments given one by one, or one list of them."""
    if len(args) == 1 and not isinstance(args[0], (str, bytes)) and isinstance(args[0], _abc.Iterable):
        return args[0]
    return args


def as_filter(where: Optional[Where]) -> Optional[Filter]:
    """The Filter of a Filter, a dict (built once and kept for the next
    call giving an equal dict) or None."""
    if where is None or isinstance(where, Filter):
        return where
    if isinstance(where, _abc.Mapping):
        return _cached(where)
    raise _type_error(f"where must be a mnemo.Filter or a dict, not {type(where).__name__}")


# Filters of the dictionary forms used lately: an agent asks with the same
# dict call after call, and parsing and building it costs more than a small
# search. Evicted ones are freed once no search holds them any more.
_CACHE_SIZE = 256
_cache: "OrderedDict[Any, Filter]" = OrderedDict()
_cache_lock = threading.Lock()


def _frozen(x: Any) -> Any:
    """A hashable image of a dictionary form that tells apart whatever
    filters differently: the type of every value goes with it (True, 1 and
    1.0 are equal and hash alike in Python), floats by their repr. The
    plain types first: the generic checks below cost more than the rest of
    a cached filter's look-up."""
    t = type(x)
    if t is str or t is int or t is bool:
        return (t.__name__, x)
    if t is dict:
        return ("{", tuple((_frozen(k), _frozen(v)) for k, v in x.items()))
    if t is list or t is tuple:
        return ("[", tuple(_frozen(v) for v in x))
    if t is float:
        return ("float", repr(x))
    if isinstance(x, _abc.Mapping):
        return ("{", tuple((_frozen(k), _frozen(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return ("[", tuple(_frozen(v) for v in x))
    if isinstance(x, (set, frozenset)):
        return ("{}", frozenset(_frozen(v) for v in x))
    if isinstance(x, (float, np.floating)):
        return (type(x).__name__, repr(x))
    hash(x)  # anything unhashable (an array of ids) is not kept
    return (type(x).__name__, x)


def _cache_key(where: Mapping[str, Any]) -> Any:
    """The cache's key of a dictionary form, None where it has none (a
    value that is not hashable)."""
    try:
        return _frozen(where)
    except TypeError:
        return None


def _cached(where: Mapping[str, Any]) -> Filter:
    key = _cache_key(where)
    if key is None:
        return Filter.from_dict(where)
    with _cache_lock:
        f = _cache.get(key)
        if f is not None:
            _cache.move_to_end(key)
            return f
    f = Filter.from_dict(where)
    f.handle  # built once, before others may share it
    with _cache_lock:
        f = _cache.setdefault(key, f)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return f


# Lists of at most this many filters (search's where_each) take the cache.
_EACH_CACHED = 64


def as_filters(entries: Sequence[Any]) -> List[Optional[Filter]]:
    """as_filter of each entry. Few entries go through the cache (a caller
    repeating its filters call after call builds them once). Many, each a
    filter of its own, would only churn it: they are built here, an entry
    equal to the one before (the same object, or an equal dict with the
    same types) taking its filter, so that those queries are still searched
    together. 10,000 one- or two-tag dicts, each new, with their handles:
    145.9 ms through the cache, 101.6 here (medians of 8, in turn in one
    process, the 2-core development machine)."""
    if len(entries) <= _EACH_CACHED:
        return [as_filter(e) for e in entries]
    out: List[Optional[Filter]] = []
    prev: Any = None
    prev_f: Optional[Filter] = None
    prev_key: Any = None
    for e in entries:
        if not isinstance(e, _abc.Mapping):
            f = as_filter(e)  # a TypeError for anything but a Filter, a dict or None
        elif e is prev:
            f = prev_f
        else:
            key = None
            if prev is not None and e == prev:
                # Equal dicts may still differ in their values' types
                # (True, 1 and 1.0 compare equal and filter differently).
                key = _cache_key(e)
                if prev_key is None:
                    prev_key = _cache_key(prev)
            f = prev_f if key is not None and key == prev_key else Filter.from_dict(e)
            prev, prev_f, prev_key = e, f, key
        out.append(f)
    return out


# The expression tree: tuples, built and checked once, turned into library
# nodes on first use.
#   ("attr", name, op, ((type, value), ...)), ("tags", op, tags),
#   ("ns", op, parts), ("keys", keys), ("ids", uint64 array),
#   ("time", lo, hi), ("importance", lo, hi),
#   ("and", children), ("or", children), ("not", child)

def _as_tree(f: Where) -> tuple:
    if isinstance(f, Filter):
        return f._tree
    if isinstance(f, _abc.Mapping):
        return _parse(f, "where")._tree
    raise _type_error(f"a filter is a mnemo.Filter or a dict, not {type(f).__name__}")


def _combine(kind: str, filters: Sequence[Where]) -> tuple:
    children: List[tuple] = []
    for f in filters:
        t = _as_tree(f)
        # Nested ANDs (ORs) are one AND (OR): fewer nodes, less depth.
        children.extend(t[1] if t[0] == kind else (t,))
    if len(children) == 1:
        return children[0]
    return (kind, tuple(children))


def _measure(tree: tuple) -> Tuple[int, int]:
    """(depth, nodes) of a tree."""
    kind = tree[0]
    if kind in ("and", "or"):
        depth, nodes = 0, 1
        for c in tree[1]:
            d, n = _measure(c)
            depth, nodes = max(depth, d), nodes + n
        return depth + 1, nodes
    if kind == "not":
        d, n = _measure(tree[1])
        return d + 1, n + 1
    return 1, 1


def _build(tree: tuple) -> int:
    """A new library filter holding `tree` (its last node the root)."""
    handle = ctypes.c_void_p()
    check(lib.mnemo_filter_create(ctypes.byref(handle)))
    try:
        _node(handle.value, tree)
    except BaseException:
        lib.mnemo_filter_destroy(handle.value)
        raise
    return handle.value


def _strings(items: Sequence[bytes]) -> Any:
    return (ctypes.c_char_p * max(len(items), 1))(*items)


def _node(h: int, tree: tuple) -> int:
    node = ctypes.c_uint32()
    out = ctypes.byref(node)
    kind = tree[0]
    if kind in ("and", "or"):
        kids = [_node(h, c) for c in tree[1]]
        arr = (ctypes.c_uint32 * max(len(kids), 1))(*kids)
        fn = lib.mnemo_filter_and if kind == "and" else lib.mnemo_filter_or
        check(fn(h, arr, len(kids), out))
    elif kind == "not":
        check(lib.mnemo_filter_not(h, _node(h, tree[1]), out))
    elif kind == "attr":
        _, name, op, typed = tree
        values = (_cdefs.Value * max(len(typed), 1))()
        for slot, t in zip(values, typed):
            fill_value(slot, t)
        check(lib.mnemo_filter_attribute(h, name, op, values, len(typed), out))
    elif kind == "tags":
        check(lib.mnemo_filter_tags(h, tree[1], _strings(tree[2]), len(tree[2]), out))
    elif kind == "ns":
        check(lib.mnemo_filter_namespace(h, tree[1], _strings(tree[2]), len(tree[2]), out))
    elif kind == "keys":
        check(lib.mnemo_filter_keys(h, _strings(tree[1]), len(tree[1]), out))
    elif kind == "ids":
        ids = tree[1]
        check(lib.mnemo_filter_ids(h, ids.ctypes.data if ids.size else None, ids.size, out))
    elif kind == "time":
        check(lib.mnemo_filter_time(h, tree[1], tree[2], out))
    elif kind == "importance":
        check(lib.mnemo_filter_importance(h, tree[1], tree[2], out))
    else:  # pragma: no cover - trees are made here only
        raise AssertionError(kind)
    return node.value


# The dictionary form.

_RESERVED = ("$namespace", "$tags", "$key", "$id", "$time", "$importance")


def _parse(where: Mapping[str, Any], at: str) -> Filter:
    parts: List[Filter] = []
    for key, cond in where.items():
        if not isinstance(key, str):
            raise _type_error(f"{at}: a key must be a str, not {type(key).__name__} ({key!r})")
        here = f"{at}[{key!r}]"
        if key in ("$and", "$or"):
            if not isinstance(cond, (list, tuple)):
                raise _type_error(f"{here} takes a list of dicts, not {type(cond).__name__}")
            subs = [_parse(_mapping(c, f"{here}[{i}]"), f"{here}[{i}]")
                    for i, c in enumerate(cond)]
            parts.append(_Part.and_(*subs) if key == "$and" else _Part.or_(*subs))
        elif key == "$not":
            parts.append(_Part.not_(_parse(_mapping(cond, here), here)))
        elif key == "$namespace":
            parts.append(_namespace(cond, here))
        elif key == "$tags":
            parts.append(_tags(cond, here))
        elif key == "$key":
            parts.append(_key(cond, here))
        elif key == "$id":
            parts.append(_id(cond, here))
        elif key in ("$time", "$importance"):
            parts.append(_range(key[1:], cond, here))
        elif key.startswith("$"):
            raise _value_error(f"{at}: unknown operator {key!r}; expected $and, $or, $not, "
                               + ", ".join(_RESERVED) + " or an attribute name")
        else:
            parts.append(_attribute(key, cond, here))
    return _Part.and_(*parts)


def _mapping(cond: Any, at: str) -> Mapping[str, Any]:
    if not isinstance(cond, _abc.Mapping):
        raise _type_error(f"{at} must be a dict, not {type(cond).__name__} ({cond!r})")
    return cond


def _operators(cond: Mapping[str, Any], allowed: Sequence[str], at: str) -> List[Tuple[str, Any]]:
    """The (operator, operand) pairs of an operator dict, each one allowed."""
    if not cond:
        raise _value_error(f"{at} is an empty dict; expected one of {', '.join(allowed)}")
    for op in cond:
        if op not in allowed:
            raise _value_error(f"{at}: unknown operator {op!r}; expected one of "
                               + ", ".join(allowed))
    return list(cond.items())


def _listed(values: Any, at: str) -> Sequence[Any]:
    if isinstance(values, np.ndarray) and values.ndim == 1:
        return values.tolist()
    if isinstance(values, (str, bytes, _abc.Mapping)) or not isinstance(values, (list, tuple, set,
                                                                            frozenset)):
        raise _type_error(f"{at} takes a list, not {type(values).__name__} ({values!r})")
    return list(values)


def _attribute(name: str, cond: Any, at: str) -> Filter:
    if not isinstance(cond, _abc.Mapping):
        if isinstance(cond, (list, tuple, set, dict)):
            raise _type_error(f"{at}: a {type(cond).__name__} is no attribute value; "
                              "write {'$in': [...]} for any of several values")
        return _Part.attribute(name, OP_EQ, cond)
    parts = []
    allowed = [names[0] for names in _ATTRIBUTE_OPS.values()] + ["$not"]
    for op, operand in _operators(cond, allowed, at):
        here = f"{at}[{op!r}]"
        if op == "$not":
            parts.append(_Part.not_(_attribute(name, _mapping(operand, here), here)))
        elif op in ("$in", "$nin"):
            parts.append(_Part.attribute(name, op, *_listed(operand, here)))
        elif op == "$between":
            values = operand if isinstance(operand, (list, tuple)) else None
            if values is None or len(values) != 2:
                raise _value_error(f"{here} takes [lo, hi], not {operand!r}")
            parts.append(_Part.attribute(name, op, *values))
        elif op == "$exists":
            if not isinstance(operand, (bool, np.bool_)):
                raise _type_error(f"{here} takes True or False, not {operand!r}")
            e = _Part.attribute(name, OP_EXISTS)
            parts.append(e if operand else _Part.not_(e))
        else:
            if isinstance(operand, (list, tuple, set, dict)):
                raise _type_error(f"{here} takes one value, not a {type(operand).__name__}")
            parts.append(_Part.attribute(name, op, operand))
    return _Part.and_(*parts)


def _namespace(cond: Any, at: str) -> Filter:
    if not isinstance(cond, _abc.Mapping):
        return _Part.namespace(cond)
    parts = [_Part.namespace(v, under=(op == "$under"))
             for op, v in _operators(cond, ("$eq", "$under"), at)]
    return _Part.and_(*parts)


def _tags(cond: Any, at: str) -> Filter:
    if not isinstance(cond, _abc.Mapping):
        return _Part.tags(*_listed(cond, at))
    parts = [_Part.tags(*_listed(v, f"{at}[{op!r}]"), mode=op[1:])
             for op, v in _operators(cond, ("$all", "$any"), at)]
    return _Part.and_(*parts)


def _key(cond: Any, at: str) -> Filter:
    if not isinstance(cond, _abc.Mapping):
        if not isinstance(cond, str):
            raise _type_error(f"{at} takes a str, or {{'$in': [...]}}, not "
                              f"{type(cond).__name__} ({cond!r})")
        return _Part.keys(cond)
    parts = [_Part.keys([v] if op == "$eq" else _listed(v, f"{at}[{op!r}]"))
             for op, v in _operators(cond, ("$eq", "$in"), at)]
    return _Part.and_(*parts)


def _one_id(value: Any, at: str) -> Any:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise _type_error(f"{at} must be an int id, not {type(value).__name__} ({value!r})")
    return [value]


def _id(cond: Any, at: str) -> Filter:
    if not isinstance(cond, _abc.Mapping):
        return _Part.ids(_one_id(cond, at))
    parts = [_Part.ids(_one_id(v, f"{at}[{op!r}]") if op == "$eq"
                        else v if isinstance(v, np.ndarray) else _listed(v, f"{at}[{op!r}]"))
             for op, v in _operators(cond, ("$eq", "$in"), at)]
    return _Part.and_(*parts)


def _range(field: str, cond: Any, at: str) -> Filter:
    """$time / $importance: the operators folded into one inclusive range;
    an exclusive bound is the next double (the columns hold doubles, and
    floats that are doubles exactly)."""
    lo, hi = -math.inf, math.inf
    for op, v in _operators(_mapping(cond, at), ("$gte", "$gt", "$lte", "$lt", "$eq",
                                                  "$between"), at):
        here = f"{at}[{op!r}]"
        if op == "$between":
            if not isinstance(v, (list, tuple)) or len(v) != 2:
                raise _value_error(f"{here} takes [lo, hi], not {v!r}")
            a, b = _real(v[0], here), _real(v[1], here)
            lo, hi = max(lo, a), min(hi, b)
            continue
        x = _real(v, here)
        if op in ("$gte", "$eq"):
            lo = max(lo, x)
        if op in ("$lte", "$eq"):
            hi = min(hi, x)
        if op == "$gt":
            lo = max(lo, math.nextafter(x, math.inf))
        if op == "$lt":
            hi = min(hi, math.nextafter(x, -math.inf))
    return _Part.time(lo, hi) if field == "time" else _Part.importance(lo, hi)


def _to_dict(tree: tuple) -> dict:
    kind = tree[0]
    if kind in ("and", "or"):
        return {f"${kind}": [_to_dict(c) for c in tree[1]]}
    if kind == "not":
        return {"$not": _to_dict(tree[1])}
    if kind == "attr":
        _, name, op, typed = tree
        values = [v.decode("utf-8", "surrogateescape") if t == _cdefs.VALUE_STRING else v
                  for t, v in typed]
        key = name.decode("utf-8", "surrogateescape")
        if op == OP_EXISTS:
            return {key: {"$exists": True}}
        if op in (OP_IN, OP_NOT_IN, OP_BETWEEN):
            return {key: {_OP_NAME[op]: values}}
        return {key: {_OP_NAME[op]: values[0]}}
    text = [s.decode("utf-8", "surrogateescape") for s in tree[-1]] \
        if kind in ("tags", "ns", "keys") else None
    if kind == "tags":
        return {"$tags": {"$all" if tree[1] == OP_ALL else "$any": text}}
    if kind == "ns":
        return {"$namespace": {"$eq" if tree[1] == OP_NAMESPACE_EQ else "$under": tuple(text)}}
    if kind == "keys":
        return {"$key": {"$in": text}}
    if kind == "ids":
        return {"$id": {"$in": [int(i) for i in tree[1]]}}
    return {f"${kind}": {"$between": [tree[1], tree[2]]}}
