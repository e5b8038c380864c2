"""What a memory holds besides its vector (mnemo.h, "What a memory holds
besides its vector"): a key, a namespace, tags, typed attributes and a
payload, written per row as mnemo_memory_fields and read back as Memory.

Writes take, for each field, None (not written) or one entry per id; an
entry of None leaves that memory's field as it is, any other value replaces
it, and an empty one (key "", namespace (), tags [], attributes {},
payload b"") clears it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _cdefs, _native
from ._lib import check, lib
from .enums import Status
from .errors import MnemoTypeError, MnemoValueError
from .filters import c_text, c_texts, fill_value, namespace_parts, typed_value

__all__ = ["Memory", "AttributeValue"]

AttributeValue = Union[int, float, bool, str]

# Store.add / update_fields argument -> its mnemo_field_bits bit.
FIELD_ARGS = (("keys", _cdefs.FIELD_KEY), ("namespaces", _cdefs.FIELD_NAMESPACE),
              ("tags", _cdefs.FIELD_TAGS), ("attributes", _cdefs.FIELD_ATTRIBUTES),
              ("payloads", _cdefs.FIELD_PAYLOAD))


@dataclass(frozen=True)
class Memory:
    """A memory read back (mnemo_store_read): its id, fields, last-access
    time and importance.

    Attributes:
        key: its key, or None.
        namespace: its namespace parts; () when it has none.
        tags: its tags, sorted (bytewise) and unique.
        attributes: name -> int, float, bool or str, sorted by name.
        payload: its payload bytes; b"" when it has none.
        time: last-access time in seconds; importance as stored (float32).
    """

    id: int
    key: Optional[str]
    namespace: Tuple[str, ...]
    tags: Tuple[str, ...]
    attributes: Dict[str, AttributeValue]
    payload: bytes
    time: float
    importance: float

    @property
    def text(self) -> str:
        """The payload decoded as UTF-8."""
        return self.payload.decode("utf-8")


def _shape_error(name: str, got: int, want: int) -> MnemoValueError:
    return MnemoValueError(Status.E_SHAPE,
                           f"{name} has {got} entries; expected one per id ({want})")


def _rows(value: Any, name: str, count: int) -> Optional[Sequence[Any]]:
    """A per-id argument as a sequence of `count` entries (None: not given)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, bytearray, memoryview, Mapping)):
        raise MnemoTypeError(Status.E_DTYPE, f"{name} must be a list with one entry per id, "
                                             f"not a {type(value).__name__}")
    try:
        rows = list(value)
    except TypeError:
        raise MnemoTypeError(Status.E_DTYPE, f"{name} must be a list with one entry per id, "
                                             f"not {type(value).__name__}") from None
    if len(rows) != count:
        raise _shape_error(name, len(rows), count)
    return rows


def _payload(value: Any, what: str) -> bytes:
    if isinstance(value, str):
        raw = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
    else:
        raise MnemoTypeError(Status.E_DTYPE, f"{what} must be a str or bytes, not "
                                             f"{type(value).__name__}")
    if len(raw) > _cdefs.MAX_PAYLOAD_BYTES:
        raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                              f"{what} is {len(raw)} bytes; at most {_cdefs.MAX_PAYLOAD_BYTES} "
                              "(MNEMO_MAX_PAYLOAD_BYTES)")
    return raw


def _attributes(value: Any, what: str) -> List[Tuple[bytes, Tuple[int, Any]]]:
    if not isinstance(value, Mapping):
        raise MnemoTypeError(Status.E_DTYPE, f"{what} must be a dict of name -> int, float, "
                                             f"bool or str, not {type(value).__name__}")
    if len(value) > _cdefs.MAX_ATTRIBUTES:
        raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                              f"{what} holds {len(value)} attributes; at most "
                              f"{_cdefs.MAX_ATTRIBUTES} (MNEMO_MAX_ATTRIBUTES)")
    return [(c_text(name, f"{what} name"), typed_value(v, f"{what}[{name!r}]"))
            for name, v in value.items()]


class FieldRows:
    """mnemo_memory_fields [count] of Store.add / update_fields's arguments,
    with every array and string they point to kept alive."""

    def __init__(self, count: int, keys: Any = None, namespaces: Any = None, tags: Any = None,
                 attributes: Any = None, payloads: Any = None) -> None:
        given = {"keys": keys, "namespaces": namespaces, "tags": tags,
                 "attributes": attributes, "payloads": payloads}
        rows = {name: _rows(v, name, count) for name, v in given.items()}
        self.count = count
        self.array = (_cdefs.MemoryFields * max(count, 1))()
        self.address = ctypes.addressof(self.array)
        self._keep: List[Any] = []
        size = ctypes.sizeof(_cdefs.MemoryFields)
        for i in range(count):
            f = self.array[i]
            f.struct_size = size
            for name, bit in FIELD_ARGS:
                column = rows[name]
                if column is None or column[i] is None:
                    continue
                f.set |= bit
                self._fill(f, name, column[i], f"{name}[{i}]")

    def _fill(self, f: Any, name: str, value: Any, what: str) -> None:
        if name == "keys":
            raw = c_text(value, what, _cdefs.MAX_KEY_BYTES, empty_ok=True)
            self._keep.append(raw)
            f.key = raw if raw else None
        elif name == "namespaces":
            parts = namespace_parts(value, what)
            arr = (ctypes.c_char_p * max(len(parts), 1))(*parts)
            self._keep.append(arr)
            f.namespace_parts = arr
            f.namespace_depth = len(parts)
        elif name == "tags":
            if isinstance(value, Sequence) or isinstance(value, (set, frozenset)):
                if len(value) > _cdefs.MAX_TAGS:
                    raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                                          f"{what} holds {len(value)} tags; at most "
                                          f"{_cdefs.MAX_TAGS} (MNEMO_MAX_TAGS)")
            raw_tags = c_texts(value, what)
            arr = (ctypes.c_char_p * max(len(raw_tags), 1))(*raw_tags)
            self._keep.append(arr)
            f.tags = arr
            f.tag_count = len(raw_tags)
        elif name == "attributes":
            attrs = _attributes(value, what)
            arr = (_cdefs.Attribute * max(len(attrs), 1))()
            for slot, (attr_name, typed) in zip(arr, attrs):
                slot.name = attr_name
                fill_value(slot.value, typed)
            self._keep.extend((arr, attrs))
            f.attributes = arr
            f.attribute_count = len(attrs)
        else:
            raw = _payload(value, what)
            if raw:
                # The bytes object's own buffer, not a copy of it.
                self._keep.append(raw)
                f.payload = ctypes.cast(ctypes.c_char_p(raw), ctypes.c_void_p).value
            f.payload_bytes = len(raw)


def pack_rows(count: int, keys: Any = None, namespaces: Any = None, tags: Any = None,
              attributes: Any = None, payloads: Any = None) -> Any:
    """The mnemo_memory_fields [count] of Store.add / update_fields's
    arguments, as an object whose `address` is the array's (0 for none)
    and that keeps what it points to alive: packed in one pass by the
    compiled extension when every entry is of a plain type (list or tuple
    columns of str, tuples, lists, dicts, int, float, bool, bytes) within
    the limits, else by FieldRows, which refuses what must be refused."""
    if _native.AVAILABLE:
        packed = _native.ext.pack_fields(count, keys, namespaces, tags, attributes, payloads)
        if packed is not None:
            return packed
    return FieldRows(count, keys, namespaces, tags, attributes, payloads)


def any_given(*columns: Any) -> bool:
    return any(c is not None for c in columns)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def read_memories(store_handle: int, ids: np.ndarray) -> List[Optional[Memory]]:
    """mnemo_store_read of `ids` (uint64, aligned): a Memory per id, None
    for an id not in the store. Read by the compiled extension (which also
    reads records for the framework adapters: each C function is bound
    once); without it LibraryLoadError, as for Store.search."""
    return _native.ext.read_memories(store_handle, ids, Memory)  # type: ignore[no-any-return]


def store_namespaces(store_handle: int) -> List[Tuple[Tuple[str, ...], int]]:
    """mnemo_store_namespaces: (parts, memories) of each namespace in use."""
    listing = ctypes.c_void_p()
    check(lib.mnemo_store_namespaces(store_handle, ctypes.byref(listing)))
    try:
        out = []
        parts = ctypes.POINTER(ctypes.c_char_p)()
        depth, memories = ctypes.c_uint32(), ctypes.c_uint64()
        for i in range(lib.mnemo_namespaces_count(listing)):
            check(lib.mnemo_namespaces_get(listing, i, ctypes.byref(parts), ctypes.byref(depth),
                                           ctypes.byref(memories)))
            out.append((tuple(_text(parts[j]) for j in range(depth.value)), memories.value))
        return out
    finally:
        lib.mnemo_namespaces_destroy(listing)


def lookup_keys(keys: Any) -> Tuple[Any, int]:
    """(char* [n], n) of the keys to look up: a list of str (a str alone
    is refused). Any length is looked up; a NUL would cut a key short, so
    it is refused."""
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
        raise MnemoTypeError(Status.E_DTYPE, "keys must be a list of str, not "
                                             f"{type(keys).__name__} ({keys!r})")
    raw = [c_text(k, f"keys[{i}]", limit=2**62, empty_ok=True) for i, k in enumerate(keys)]
    return (ctypes.c_char_p * max(len(raw), 1))(*raw), len(raw)
