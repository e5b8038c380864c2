"""What a memory holds besides its vector: Store.add's keys, namespaces,
tags, attributes and payloads, update_fields, ids_of_keys, read and
namespaces, held to a pure-Python model of mnemo.h's write rules on random
writes (plain and sharded runtimes, snapshots, a durable store's journal
and checkpoints), with the types, limits, key conflicts and refusals.

The rules (mnemo_memory_fields): a write replaces each field it is given
(here: a column given and its entry not None) and keeps the others; a new
memory starts without any; an empty value clears; read back, tags are
sorted and unique and attributes sorted by name; a key is unique in the
store, freed when its memory is removed."""

from __future__ import annotations

import ctypes
import dataclasses
import math
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pytest

import mnemo
from mnemo import Memory, Status, _cdefs
from mnemo._lib import lib

DIM = 5
NO_ID = mnemo.NO_ID
COLUMNS = ("keys", "namespaces", "tags", "attributes", "payloads")

PARTS = ["users", "42", "episodic", "a/b", "ü", " x ", "Z"]
TAGS = ["red", "Red", "green", "ü", "äb", "with space", "#1", "z"]
ATTR_NAMES = ["year", "score", "flag", "name", "Big", "ü"]


def attr_value(rng: np.random.Generator) -> Any:
    """A random value of every kind Python writes, numpy scalars included."""
    pick = int(rng.integers(11))
    return [lambda: int(rng.integers(-10, 10)), lambda: float(rng.normal()),
            lambda: bool(rng.random() < 0.5), lambda: str(rng.choice(TAGS)),
            lambda: np.int64(rng.integers(-5, 5)), lambda: np.float32(rng.normal()),
            lambda: np.bool_(rng.random() < 0.5), lambda: -0.0,
            lambda: int(rng.choice([2**63 - 1, -(2**63), 2**53 + 1])),
            lambda: "", lambda: float(rng.choice([2.0**60, 1e-300, -1e300]))][pick]()


def canonical(v: Any) -> Tuple[str, str]:
    """A value as it reads back: Python's type and exact repr (bool is not
    int, -0.0 is not 0.0)."""
    if isinstance(v, (bool, np.bool_)):
        return "bool", repr(bool(v))
    if isinstance(v, (int, np.integer)):
        return "int", repr(int(v))
    if isinstance(v, (float, np.floating)):
        return "float", repr(float(v))
    return "str", repr(v)


def payload_bytes(v: Any) -> bytes:
    return v.encode("utf-8") if isinstance(v, str) else bytes(v)


class FieldModel:
    """id -> what the store should hold."""

    def __init__(self) -> None:
        self.mem: Dict[int, Dict[str, Any]] = {}

    def add(self, ids: List[int], times: Optional[List[float]], cols: Dict[str, Any]) -> None:
        for row, i in enumerate(ids):
            m = self.mem.setdefault(i, {"key": None, "ns": (), "tags": (), "attrs": {},
                                        "payload": b"", "time": 0.0, "imp": 0.0})
            if times is not None:
                m["time"] = times[row]
            self._write(m, row, cols)

    def update(self, ids: List[int], cols: Dict[str, Any]) -> None:
        for row, i in enumerate(ids):
            self._write(self.mem[i], row, cols)

    @staticmethod
    def _write(m: Dict[str, Any], row: int, cols: Dict[str, Any]) -> None:
        for name, column in cols.items():
            if column is None or column[row] is None:
                continue
            v = column[row]
            if name == "keys":
                m["key"] = v or None
            elif name == "namespaces":
                m["ns"] = tuple(v)
            elif name == "tags":
                m["tags"] = tuple(sorted(set(v), key=lambda t: t.encode()))
            elif name == "attributes":
                m["attrs"] = dict(v)
            else:
                m["payload"] = payload_bytes(v)

    def keys(self) -> Dict[str, int]:
        return {m["key"]: i for i, m in self.mem.items() if m["key"]}

    def check(self, store: mnemo.Store, extra_ids: List[int] = (), gone_keys: List[str] = ()
              ) -> None:
        ids = sorted(self.mem) + list(extra_ids)
        got = store.read(ids)
        assert len(got) == len(ids)
        for i, m in zip(ids, got):
            want = self.mem.get(i)
            if want is None:
                assert m is None, i
                continue
            assert isinstance(m, Memory) and m.id == i
            assert m.key == want["key"], i
            assert m.namespace == want["ns"], i
            assert m.tags == want["tags"], i
            names = list(m.attributes)
            assert names == sorted(names, key=lambda s: s.encode()), i
            assert {k: canonical(v) for k, v in m.attributes.items()} == \
                {k: canonical(v) for k, v in want["attrs"].items()}, i
            assert m.payload == want["payload"], i
            assert m.time == want["time"], i
        keys = self.keys()
        asked = list(keys) + list(gone_keys) + ["never-a-key"]
        assert store.ids_of_keys(asked).tolist() == \
            [keys.get(k, NO_ID) for k in asked]
        counts: Dict[Tuple[str, ...], int] = {}
        for m in self.mem.values():
            if m["ns"]:
                counts[m["ns"]] = counts.get(m["ns"], 0) + 1
        assert store.namespaces() == sorted(counts.items())
        assert store.count() == len(self.mem)


def random_columns(rng: np.random.Generator, ids: List[int], p_given: float = 0.6
                   ) -> Dict[str, Any]:
    """Each column given with p_given, each of its entries None (untouched)
    with 0.2, else a random value or an empty one (cleared)."""
    cols: Dict[str, Any] = {}
    for name in COLUMNS:
        if rng.random() >= p_given:
            cols[name] = None
            continue
        column = []
        for i in ids:
            r = rng.random()
            if r < 0.2:
                column.append(None)
                continue
            empty = r < 0.3
            if name == "keys":
                # Unique to its id, so that random writes never conflict.
                column.append("" if empty else f"key-{i}-{int(rng.integers(3))}")
            elif name == "namespaces":
                n = 0 if empty else int(rng.integers(1, 4))
                parts = tuple(str(rng.choice(PARTS)) for _ in range(n))
                column.append(parts if rng.random() < 0.5 else list(parts))
            elif name == "tags":
                n = 0 if empty else int(rng.integers(1, 6))
                column.append([str(rng.choice(TAGS)) for _ in range(n)])  # repeats allowed
            elif name == "attributes":
                n = 0 if empty else int(rng.integers(1, 5))
                names = rng.choice(ATTR_NAMES, n, replace=False)
                column.append({str(a): attr_value(rng) for a in names})
            else:
                raw = rng.integers(0, 256, int(rng.integers(1, 40)), dtype=np.uint8).tobytes()
                column.append(b"" if empty else
                              raw if rng.random() < 0.5 else "text ü " + raw.hex())
        cols[name] = column
    return cols


def vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    v[v == 0] = 0.5
    return v


@pytest.fixture(params=["plain", "sharded"])
def any_rt(request: pytest.FixtureRequest) -> Iterator[mnemo.Runtime]:
    with mnemo.Runtime(backend="cpu", shards=2 if request.param == "sharded" else 0) as rt:
        yield rt


def random_history(store: mnemo.Store, model: FieldModel, rng: np.random.Generator,
                   steps: int, check_every: int = 5) -> List[str]:
    """Random adds (new ids and upserts), field updates and removals, done
    to the store and the model alike; returns the keys freed by removals."""
    next_id = int(rng.integers(1, 2**40))
    gone_keys: List[str] = []
    for step in range(steps):
        live = sorted(model.mem)
        op = rng.choice(["new", "upsert", "update", "remove"]) if live else "new"
        if op == "remove":
            ids = [live[i] for i in rng.choice(len(live), min(len(live), 5), replace=False)]
            gone_keys += [model.mem[i]["key"] for i in ids if model.mem[i]["key"]]
            assert store.remove(ids + [2**63 + step]) == len(ids)
            for i in ids:
                del model.mem[i]
        elif op == "update":
            ids = [live[i] for i in rng.choice(len(live), min(len(live), 8), replace=False)]
            cols = random_columns(rng, ids)
            store.update_fields(ids, **cols)
            model.update(ids, cols)
        else:
            if op == "new":
                n = int(rng.integers(1, 12))
                ids = list(range(next_id, next_id + n))
                next_id += n + int(rng.integers(0, 3))
            else:
                ids = [live[i] for i in rng.choice(len(live), min(len(live), 8), replace=False)]
            cols = random_columns(rng, ids)
            times = [float(rng.integers(0, 1000)) for _ in ids] if rng.random() < 0.5 else None
            store.add(ids, vectors(rng, len(ids)), times=times, **cols)
            model.add(ids, times, cols)
        if check_every and step % check_every == check_every - 1:
            model.check(store, [2**63 + step, 0], gone_keys)
    return gone_keys


def test_random_writes_match_the_model(any_rt, rng) -> None:
    store = mnemo.Store(any_rt, DIM)
    model = FieldModel()
    gone_keys = random_history(store, model, rng, 60)
    model.check(store, [], gone_keys)


def test_snapshot_keeps_fields(any_rt, cpu_rt, rng, tmp_path: Path) -> None:
    """save / open: every field, the keys' map and the namespaces come back,
    on the runtime that saved and on another; the reopened store goes on
    taking writes under the same rules."""
    store = mnemo.Store(any_rt, DIM)
    model = FieldModel()
    gone_keys = random_history(store, model, rng, 40, check_every=0)
    path = tmp_path / "fields.mnemo"
    store.save(path)
    for runtime in (any_rt, cpu_rt):
        with mnemo.Store.open(runtime, path) as again:
            model.check(again, [0], gone_keys)
    with mnemo.Store.open(any_rt, path) as again:
        held = sorted(model.keys().items())
        if held:
            key, owner = held[0]
            with pytest.raises(mnemo.MnemoError):
                again.add([owner + 1], vectors(rng, 1), keys=[key])
        random_history(again, model, rng, 20)
        model.check(again, [], gone_keys)


def test_durable_checkpoint_keeps_fields(cpu_rt, rng, tmp_path: Path) -> None:
    """A checkpoint writes the fields into the snapshot and empties the
    journal; writes after it are journaled; reopened, both are there."""
    path = tmp_path / "durable.mnemo"
    model = FieldModel()
    store = mnemo.open_durable(cpu_rt, path, dim=DIM)
    gone_keys = random_history(store, model, rng, 30, check_every=0)
    store.checkpoint()
    gone_keys += random_history(store, model, rng, 15, check_every=0)
    model.check(store, [], gone_keys)
    store.close()
    with mnemo.open_durable(cpu_rt, path) as again:
        model.check(again, [], gone_keys)
        again.checkpoint()
    with mnemo.open_durable(cpu_rt, path) as again:
        model.check(again, [], gone_keys)


def test_types_read_back_as_written(cpu_rt) -> None:
    store = mnemo.Store(cpu_rt, DIM)
    attrs = {"t": True, "f": False, "one": 1, "zero": 0, "half": 0.5, "neg0": -0.0,
             "i64max": 2**63 - 1, "i64min": -(2**63), "big": 2**53 + 1, "s": "ü", "empty": "",
             "np_i": np.int32(-7), "np_u": np.uint64(9), "np_f": np.float32(0.1),
             "np_b": np.bool_(True), "np_f16": np.float16(1.5)}
    store.add([3], np.ones((1, DIM), np.float32), attributes=[attrs],
              payloads=[b"\x00bin\x00\xff"], keys=["ключ"], namespaces=[("ü", "a/b", " ")],
              tags=[["b", "B", "a", "ü", "b"]])
    m = store.read(3)[0]
    types = {k: type(v) for k, v in m.attributes.items()}
    assert types == {"t": bool, "f": bool, "one": int, "zero": int, "half": float,
                     "neg0": float, "i64max": int, "i64min": int, "big": int, "s": str,
                     "empty": str, "np_i": int, "np_u": int, "np_f": float, "np_b": bool,
                     "np_f16": float}
    assert m.attributes["t"] is True and m.attributes["one"] == 1
    assert math.copysign(1.0, m.attributes["neg0"]) == -1.0
    assert m.attributes["np_f"] == float(np.float32(0.1))
    assert (m.attributes["i64max"], m.attributes["i64min"], m.attributes["big"]) == \
        (2**63 - 1, -(2**63), 2**53 + 1)
    assert list(m.attributes) == sorted(attrs, key=lambda s: s.encode())
    assert m.payload == b"\x00bin\x00\xff"
    assert m.key == "ключ" and m.namespace == ("ü", "a/b", " ")
    assert m.tags == ("B", "a", "b", "ü")  # bytewise, unique
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.key = "other"  # type: ignore[misc]
    store.update_fields([3], payloads=["héllo"])
    assert store.read([3])[0].payload == "héllo".encode() and store.read(3)[0].text == "héllo"
    store.update_fields([3], payloads=[bytearray(b"ab")])
    assert store.read(3)[0].payload == b"ab"
    store.update_fields([3], payloads=[memoryview(b"cd")])
    assert store.read(3)[0].payload == b"cd"


def test_only_given_fields_are_written(cpu_rt, rng) -> None:
    store = mnemo.Store(cpu_rt, DIM)
    v = vectors(rng, 3)
    store.add([1, 2, 3], v, keys=["a", None, "c"], tags=[["t"], ["u"], None],
              importance=[0.5, 0.25, 1.0], times=[10.0, 20.0, 30.0])
    one, two, three = store.read([1, 2, 3])
    assert (one.key, one.tags, one.namespace, one.attributes, one.payload) == \
        ("a", ("t",), (), {}, b"")
    assert (two.key, two.tags) == (None, ("u",))
    assert (three.key, three.tags) == ("c", ())
    assert (one.time, one.importance, three.importance) == (10.0, 0.5, 1.0)
    # An upsert without fields keeps them; with some, replaces only those.
    store.add([1], v[2:3])
    assert store.read(1)[0] == one
    assert np.array_equal(store.get(1), v[2])
    store.add([1], v[0:1], attributes=[{"x": 1}], namespaces=[None])
    got = store.read(1)[0]
    assert (got.key, got.tags, got.attributes, got.time) == ("a", ("t",), {"x": 1}, 10.0)
    # Empty values clear.
    store.update_fields([1, 2], keys=["", None], tags=[[], None], attributes=[{}, None],
                        namespaces=[(), ("n",)], payloads=[b"", "p"])
    one, two = store.read([1, 2])
    assert (one.key, one.tags, one.attributes, one.namespace, one.payload) == \
        (None, (), {}, (), b"")
    assert (two.namespace, two.payload, two.tags) == (("n",), b"p", ("u",))
    assert store.ids_of_keys(["a", "c"]).tolist() == [NO_ID, 3]
    # No column at all: nothing written, but the ids must be there.
    store.update_fields([1, 2])
    assert store.read([1, 2]) == [one, two]
    with pytest.raises(mnemo.MnemoError) as exc:
        store.update_fields([1, 99], tags=[["x"], ["y"]])
    assert exc.value.status == Status.E_NOT_FOUND
    assert store.read([1, 2]) == [one, two]


def test_keys(any_rt, rng) -> None:
    store = mnemo.Store(any_rt, DIM)
    store.add([1, 2, 3], vectors(rng, 3), keys=["a", "b", None])
    assert store.ids_of_keys(["b", "a", "zz", "", "x" * 5000]).tolist() == [2, 1] + [NO_ID] * 3
    assert store.ids_of_keys([]).shape == (0,)
    before = store.read([1, 2, 3])

    def refused(fn: Any, *args: Any, **kw: Any) -> mnemo.MnemoError:
        with pytest.raises(mnemo.MnemoError) as exc:
            fn(*args, **kw)
        assert exc.value.status == Status.E_INVALID_ARGUMENT, exc.value
        assert store.read([1, 2, 3]) == before
        assert store.count() == 3
        return exc.value

    # Held by another memory: new or existing, added or updated.
    assert "held by memory 1" in refused(store.add, [4], vectors(rng, 1), keys=["a"]).message
    refused(store.add, [3], vectors(rng, 1), keys=["b"])
    refused(store.update_fields, [3], keys=["a"])
    # Given twice in one call.
    refused(store.add, [4, 5], vectors(rng, 2), keys=["new", "new"])
    refused(store.update_fields, [1, 3], keys=["c", "c"])
    # A key freed in the same call is still held when the call starts.
    refused(store.update_fields, [1, 3], keys=["", "a"])
    store.update_fields([1], keys=[""])
    store.update_fields([3], keys=["a"])
    assert store.ids_of_keys(["a"]).tolist() == [3]
    # The same memory may be given its own key again.
    store.add([3], vectors(rng, 1), keys=["a"])
    store.update_fields([3], keys=["a"])
    # Removal frees a key.
    store.remove([3])
    assert store.ids_of_keys(["a"]).tolist() == [NO_ID]
    store.add([7], vectors(rng, 1), keys=["a"])
    assert store.ids_of_keys(["a", "b"]).tolist() == [7, 2]
    with pytest.raises(TypeError):
        store.ids_of_keys("a")
    with pytest.raises(TypeError):
        store.ids_of_keys([1])
    with pytest.raises(ValueError, match="NUL"):
        store.ids_of_keys(["a\0b"])


def test_limits(cpu_rt, rng) -> None:
    """Every limit of mnemo.h: at the limit accepted, past it refused with
    nothing written. Bytes count, not characters ("é" is two)."""
    store = mnemo.Store(cpu_rt, DIM)
    store.add([1], vectors(rng, 1), keys=["k1"], tags=[["t"]])
    before = store.read([1])
    ok = {
        "keys": ["é" * 512],
        "namespaces": [tuple(["é" * 512] * 32)],
        "tags": [[f"t{i}" for i in range(1023)] + ["é" * 512]],
        "attributes": [dict({f"a{i}": i for i in range(255)}, **{"é" * 512: "é" * 512})],
        "payloads": [b"\x01" * _cdefs.MAX_PAYLOAD_BYTES],
    }
    over = {
        "keys": ["é" * 512 + "x"],
        "namespaces": [tuple(["p"] * 33)],
        "tags": [[f"t{i}" for i in range(1025)]],
        "attributes": [{f"a{i}": i for i in range(257)}],
        "payloads": [b"\x01" * (_cdefs.MAX_PAYLOAD_BYTES + 1)],
    }
    too_long = {
        "namespaces": [("ok", "é" * 512 + "x")],
        "tags": [["é" * 512 + "x"]],
        "attributes": [{"é" * 512 + "x": 1}],
    }
    too_long_value = {"attributes": [{"name": "é" * 512 + "x"}]}
    for name, value in ok.items():
        store.add([2], vectors(rng, 1), **{name: value})
        store.remove([2])
    for bad in (over, too_long, too_long_value):
        for name, value in bad.items():
            with pytest.raises(ValueError) as exc:
                store.add([2], vectors(rng, 1), **{name: value})
            assert exc.value.status == Status.E_INVALID_ARGUMENT, name
            with pytest.raises(ValueError):
                store.update_fields([1], **{name: value})
            assert store.read([1, 2]) == before + [None], name


def test_the_library_checks_the_limits_too(cpu_rt, rng) -> None:
    """The same limits as the library enforces them, past the package's
    own checks (a mnemo_memory_fields written here by hand)."""
    store = mnemo.Store(cpu_rt, DIM)
    ids = mnemo.aligned_array([5], np.uint64)
    v = mnemo.aligned_array(vectors(rng, 1), np.float32)

    def call(**fields: Any) -> int:
        f = lib.mnemo_memory_fields_default()
        for k, val in fields.items():
            setattr(f, k, val)
        return lib.mnemo_store_add_with_fields(store.handle, ids.ctypes.data, v.ctypes.data,
                                               mnemo.DType.F32, 1, None, None, ctypes.byref(f))

    parts = (ctypes.c_char_p * 33)(*([b"p"] * 33))
    tags = (ctypes.c_char_p * 1025)(*[f"t{i}".encode() for i in range(1025)])
    attrs = (_cdefs.Attribute * 257)()
    for i, a in enumerate(attrs):
        a.name = f"a{i}".encode()
        a.value.type = _cdefs.VALUE_INT
    nan = (_cdefs.Attribute * 1)()
    nan[0].name = b"x"
    nan[0].value.type, nan[0].value.d = _cdefs.VALUE_DOUBLE, math.nan
    bad_bool = (_cdefs.Attribute * 1)()
    bad_bool[0].name = b"x"
    bad_bool[0].value.type, bad_bool[0].value.i = _cdefs.VALUE_BOOL, 2
    empty = (ctypes.c_char_p * 1)(b"")
    cases = [dict(set=_cdefs.FIELD_KEY, key=b"k" * 1025),
             dict(set=_cdefs.FIELD_NAMESPACE, namespace_parts=parts, namespace_depth=33),
             dict(set=_cdefs.FIELD_TAGS, tags=tags, tag_count=1025),
             dict(set=_cdefs.FIELD_TAGS, tags=empty, tag_count=1),
             dict(set=_cdefs.FIELD_ATTRIBUTES, attributes=attrs, attribute_count=257),
             dict(set=_cdefs.FIELD_ATTRIBUTES, attributes=nan, attribute_count=1),
             dict(set=_cdefs.FIELD_ATTRIBUTES, attributes=bad_bool, attribute_count=1),
             dict(set=_cdefs.FIELD_PAYLOAD, payload=1, payload_bytes=_cdefs.MAX_PAYLOAD_BYTES + 1),
             dict(set=64),
             dict(struct_size=8)]
    for case in cases:
        assert call(**case) == Status.E_INVALID_ARGUMENT, case
        assert store.count() == 0
    assert call(set=_cdefs.FIELD_KEY, key=b"k" * 1024) == Status.OK
    assert store.read(5)[0].key == "k" * 1024


def test_argument_errors(cpu_rt, rng) -> None:
    store = mnemo.Store(cpu_rt, DIM)
    store.add([1], vectors(rng, 1))
    v = vectors(rng, 2)
    type_errors = [
        dict(namespaces=["users/42", None]),
        dict(namespaces=[("a", 1), None]),
        dict(namespaces=[{"a": 1}, None]),
        dict(tags=["red", None]),
        dict(tags=[[1], None]),
        dict(tags=[5, None]),
        dict(attributes=[{"a": [1]}, None]),
        dict(attributes=[{"a": None}, None]),
        dict(attributes=[{"a": b"x"}, None]),
        dict(attributes=[{1: 1}, None]),
        dict(attributes=[[("a", 1)], None]),
        dict(payloads=[5, None]),
        dict(keys=[5, None]),
        dict(keys="ab"),
        dict(payloads=b"ab"),
        dict(attributes={"a": 1}),
        dict(tags=7),
    ]
    value_errors = [
        dict(keys=["a"]),                      # one entry for two ids
        dict(tags=[["a"], ["b"], ["c"]]),
        dict(attributes=[{"a": math.nan}, None]),
        dict(attributes=[{"a": math.inf}, None]),
        dict(attributes=[{"a": 2**63}, None]),
        dict(attributes=[{"a": -(2**63) - 1}, None]),
        dict(attributes=[{"": 1}, None]),
        dict(attributes=[{"a\0": 1}, None]),
        dict(attributes=[{"a": "x\0"}, None]),
        dict(keys=["a\0b", None]),
        dict(tags=[[""], None]),
        dict(tags=[["a\0"], None]),
        dict(namespaces=[("a", ""), None]),
    ]
    for kw in type_errors:
        with pytest.raises(TypeError):
            store.add([2, 3], v, **kw)
        with pytest.raises(TypeError):
            store.update_fields([1, 1], **kw)
    for kw in value_errors:
        with pytest.raises(ValueError):
            store.add([2, 3], v, **kw)
        with pytest.raises(ValueError):
            store.update_fields([1, 1], **kw)
    assert store.count() == 1 and store.read(1)[0].attributes == {}


def test_read(cpu_rt, rng) -> None:
    store = mnemo.Store(cpu_rt, DIM)
    store.add([10, 20], vectors(rng, 2), keys=["x", "y"], importance=[0.1, 0.2])
    got = store.read([20, 5, 10, 20])
    assert [None if m is None else m.id for m in got] == [20, None, 10, 20]
    assert got[0].importance == float(np.float32(0.2))
    assert store.read([]) == [] and store.read(np.array([10], np.int64))[0].key == "x"
    assert store.read(5) == [None]
    with pytest.raises(ValueError):
        store.read([-1])


def test_fields_follow_layouts_and_compaction(cpu_rt, rng) -> None:
    """Index builds move slots, removals leave tombstones that compaction
    drops: the fields stay with their memories."""
    store = mnemo.Store(cpu_rt, DIM)
    model = FieldModel()
    ids = list(range(1, 801))
    cols = random_columns(rng, ids, p_given=1.0)
    store.add(ids, vectors(rng, len(ids)), **cols)
    model.add(ids, None, cols)
    store.build_index(nlist=8, seed=int(rng.integers(1, 2**31)), background=False)
    model.check(store)
    gone = [int(i) for i in rng.choice(ids, 600, replace=False)]
    gone_keys = [model.mem[i]["key"] for i in gone if model.mem[i]["key"]]
    store.remove(gone)
    for i in gone:
        del model.mem[i]
    model.check(store, gone[:5], gone_keys)
    more = list(range(1000, 1300))
    cols = random_columns(rng, more, p_given=1.0)
    store.add(more, vectors(rng, len(more)), **cols)
    model.add(more, None, cols)
    store.build_index(nlist=8, seed=int(rng.integers(1, 2**31)), background=False)
    model.check(store, [], gone_keys)


def test_durable_store_replays_fields(cpu_rt, rng, tmp_path: Path) -> None:
    """A durable store journals field writes: reopened (from its journal,
    no checkpoint taken) it holds what it held."""
    path = tmp_path / "fields.mnemo"
    model = FieldModel()
    store = mnemo.open_durable(cpu_rt, path, dim=DIM)
    ids = list(range(100, 160))
    cols = random_columns(rng, ids, p_given=1.0)
    store.add(ids, vectors(rng, len(ids)), **cols)
    model.add(ids, None, cols)
    upd = [int(i) for i in rng.choice(ids, 20, replace=False)]
    cols = random_columns(rng, upd, p_given=1.0)
    store.update_fields(upd, **cols)
    model.update(upd, cols)
    gone = [int(i) for i in rng.choice(ids, 10, replace=False)]
    gone_keys = [model.mem[i]["key"] for i in gone if model.mem[i]["key"]]
    store.remove(gone)
    for i in gone:
        del model.mem[i]
    model.check(store, [], gone_keys)
    store.close()
    with mnemo.open_durable(cpu_rt, path) as again:
        model.check(again, gone[:3], gone_keys)


def test_packed_fields_match_the_python_packing(cpu_rt, rng, monkeypatch) -> None:
    """Store.add's fields packed by the extension in one pass and by
    FieldRows in Python (used for what the extension does not pack: numpy
    scalars, sets, str subclasses, ...) store the same memories."""
    from mnemo import _native, fields

    count = 200
    words = ["a", "é", "日本", "x" * 1024, ""]
    cols: Dict[str, List[Any]] = {"keys": [], "namespaces": [], "tags": [], "attributes": [],
                                  "payloads": []}
    for i in range(count):
        pick = int(rng.integers(0, 6))
        cols["keys"].append(None if pick == 0 else f"k{i}" + words[pick % 5][:8])
        cols["namespaces"].append(None if pick == 1 else tuple(w or "p" for w in words[:pick]))
        cols["tags"].append(None if pick == 2 else [w for w in words[:pick] if w])
        cols["attributes"].append(None if pick == 3 else {
            "i": i - 100, "f": i / 7, "b": bool(i % 2), "s": words[pick % 5], "big": 2**63 - 1,
            "neg": -(2**63)})
        cols["payloads"].append(None if pick == 4 else (words[pick % 5] if i % 2 else
                                                         words[pick % 5].encode()))
    ids = np.arange(count, dtype=np.uint64)
    v = vectors(rng, count)
    fast = mnemo.Store(cpu_rt, DIM)
    fast.add(ids, v, **cols)
    assert _native.ext.pack_fields(count, *cols.values()) is not None
    monkeypatch.setattr(_native, "AVAILABLE", False)
    slow = mnemo.Store(cpu_rt, DIM)
    slow.add(ids, v, **cols)
    assert fast.read(ids) == slow.read(ids)
    # Updates the same way, clearing with empty values.
    clear = {"keys": [""] * count, "namespaces": [()] * count, "tags": [[]] * count,
             "attributes": [{}] * count, "payloads": [b""] * count}
    slow.update_fields(ids, **clear)
    monkeypatch.setattr(_native, "AVAILABLE", True)
    fast.update_fields(ids, **clear)
    assert fast.read(ids) == slow.read(ids)
    assert fast.read([0])[0].tags == () and fast.read([0])[0].key is None
    # Entries the extension leaves to FieldRows: still stored as FieldRows packs them.
    odd = {"attributes": [{"n": np.int64(3), "x": np.float32(0.5)}], "tags": [{"s", "t"}],
           "keys": [type("S", (str,), {})("sub")], "payloads": [bytearray(b"ba")]}
    for name, value in odd.items():
        assert _native.ext.pack_fields(1, *(value if n == name else None for n in clear)) is None
    fast.add([500], vectors(rng, 1), **odd)
    got = fast.read([500])[0]
    assert (got.attributes, got.tags, got.key, got.payload) == \
        ({"n": 3, "x": 0.5}, ("s", "t"), "sub", b"ba")
    # Refusals come from FieldRows, with its messages.
    with pytest.raises(ValueError, match="NUL"):
        fast.add([501], vectors(rng, 1), keys=["a\0b"])
    assert fields.pack_rows(1, keys=["a"]).address != 0
