"""mem0: a vector store provider "mnemo" for mem0's Memory.

    import mnemo.integrations.mem0            # registers the provider
    from mem0 import Memory
    memory = Memory.from_config({
        "vector_store": {"provider": "mnemo",
                         "config": {"collection_name": "mem0", "embedding_model_dims": 384}},
        "embedder": {"provider": "langchain", "config": {"model": my_embeddings}},
        "llm": {"provider": "langchain", "config": {"model": my_chat_model}},
        "history_db_path": "/tmp/history.db"})
    memory.add("I like tea", user_id="alice", infer=False)
    memory.search("drinks", filters={"user_id": "alice"})

mem0 names its vector stores in a fixed table and reads their config
classes from mem0.configs.vector_stores.<name>: importing this module
adds "mnemo" to both (register()), which mem0 has no public call for.
A provider of our own rather than mem0's "langchain" provider, because
that one lists memories only from Chroma (list() and so get_all and
delete_all find nothing on any other store) and updates by delete and
insert.

Each mem0 memory is one mnemo memory: the mem0 id (namespaced by the
collection) its key, the payload its payload (JSON), and the payload's
fields its attributes for filters, except the free texts "data" and
"text_lemmatized" and the text's "hash" (kept in the payload, not
filterable). Collections are
namespaces of one mnemo store per (path or store_name, dimension), so
mem0's entity collection lives beside its memories. Filters (user_id,
agent_id, run_id and the other fields; eq ne gt gte lt lte in nin contains
icontains, "*", AND OR NOT, $or $not) are mnemo filters run inside the
search; a memory without user_id is never in a search scoped by one.
contains / icontains are substring tests, which mnemo lacks: they are
checked on the memories the store returns (mnemo.integrations._common).
"""

from __future__ import annotations

import sys
import threading
import uuid
from typing import Any, Dict, List, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field

from mem0.vector_stores.base import VectorStoreBase

from ..filters import Filter
from ..store import NO_ID
from . import _common as c

__all__ = ["MnemoConfig", "MnemoVectorStore", "OutputData", "register", "translate_filters"]

# Payload fields held only in the payload: free text and the text's md5,
# never filter fields (each would add a unique string to the store's pool).
_UNFILTERED = ("data", "text_lemmatized", "hash")


class OutputData(BaseModel):
    id: Optional[str]
    score: Optional[float]
    payload: Optional[Dict]


# OutputData of the memories read back, made as pydantic's model_construct
# makes a model of values known to be valid: a str id, a float score (or
# None) and a dict payload are what its validation keeps as they are, so
# the state is the constructor's without the validation, whose code is
# mostly out of the caches after the scan of a large store. Anything else,
# or a pydantic that the check below finds making it differently, goes
# through the constructor.
_OUTPUT_FIELDS = frozenset(("id", "score", "payload"))


def _constructed(id: str, score: Optional[float], payload: Dict[str, Any]) -> OutputData:
    return c.constructed(OutputData, {"id": id, "score": score, "payload": payload}, _OUTPUT_FIELDS)


_CONSTRUCTED = c.same_as_constructor(
    OutputData, _constructed, [dict(id="i", score=score, payload={"p": [1]}) for score in (0.5, None)])


def _output_data(id: Any, score: Optional[float], payload: Any) -> OutputData:
    """OutputData(id=id, score=score, payload=payload)."""
    if (_CONSTRUCTED and type(id) is str and type(payload) is dict
            and (score is None or type(score) is float)):
        return _constructed(id, score, payload)
    return OutputData(id=id, score=score, payload=payload)


class MnemoConfig(BaseModel):
    """The "mnemo" provider's config in mem0's vector_store section."""

    collection_name: str = Field("mem0", description="Collection: a namespace of the store")
    embedding_model_dims: Optional[int] = Field(
        None, description="Vector dimension (default: that of the first vectors written)")
    path: Optional[str] = Field(None, description="A durable mnemo store file (none: in memory)")
    store_name: str = Field("default", description="Name of an in-memory store in this process")
    metric: str = Field("cosine", description="cosine, dot or l2sq")

    model_config = ConfigDict(extra="forbid")


# Collections share a store: one per (path or in-memory name, dimension).
_stores: Dict[Tuple[str, Optional[int]], c.Backing] = {}
_stores_lock = threading.Lock()


def _backing(path: Optional[str], name: str, dims: Optional[int], metric: str) -> c.Backing:
    key = ("path:" + path if path else "memory:" + name, None if path else dims)
    with _stores_lock:
        found = _stores.get(key)
        if found is None:
            found = _stores[key] = c.Backing(path=path, dim=dims, metric=metric)
        return found


# Filters.

_OPS = {"eq": "$eq", "ne": "$ne", "gt": "$gt", "gte": "$gte", "lt": "$lt", "lte": "$lte",
        "in": "$in", "nin": "$nin", "contains": "contains", "icontains": "icontains"}


def _field(key: str, value: Any) -> c.Cond:
    n = c.esc(key)
    if not isinstance(value, dict):
        if isinstance(value, str) and value == "*":
            return c.present(n)  # any value
        if isinstance(value, (list, tuple)):
            return c.attr(n, "$in", *value) if value else c.FALSE
        return c.attr(n, "$eq", value) if c.scalar(value) else c.FALSE
    parts = []
    for op, v in value.items():
        mop = _OPS.get(op.lstrip("$"))
        if mop is None:
            raise ValueError(f"Unsupported metadata filter operator: {op}")
        if mop in ("contains", "icontains"):
            if not isinstance(v, str):
                raise ValueError(f"{op} on {key!r} takes a string, not {v!r}")
            parts.append(c.substring(n, v, fold=mop == "icontains"))
        elif mop in ("$in", "$nin"):
            values = list(v) if isinstance(v, (list, tuple)) else [v]
            inn = c.attr(n, "$in", *values) if values else c.FALSE
            parts.append(inn if mop == "$in" else c.not_(inn))
        elif mop == "$ne":
            parts.append(c.not_(c.attr(n, "$eq", v)))
        else:
            parts.append(c.attr(n, mop, v))
    return c.and_(*parts)


def translate_filters(filters: Optional[Dict[str, Any]]) -> c.Cond:
    """mem0's filters as a mnemo condition: fields ANDed, AND / $and each,
    OR / $or at least one, NOT / $not none."""
    if not filters:
        return c.TRUE
    parts = []
    seen = set()
    for key, value in filters.items():
        kind = {"$and": "AND", "$or": "OR", "$not": "NOT"}.get(key, key)
        if kind in ("AND", "OR", "NOT"):
            if kind in seen:
                continue  # mem0 passes both OR and the $or made from it
            seen.add(kind)
            if not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
                raise ValueError(f"{key} filter value must be a list of filter dicts")
            subs = [translate_filters(x) for x in value]
            if kind == "AND":
                parts.append(c.and_(*subs))
            elif kind == "OR":
                parts.append(c.or_(*subs))
            else:
                parts.append(c.and_(*(c.not_(s) for s in subs)))
        else:
            parts.append(_field(key, value))
    return c.and_(*parts)


class MnemoVectorStore(VectorStoreBase):
    """mem0's VectorStoreBase on a mnemo store (see the module's
    documentation); the arguments are MnemoConfig's fields."""

    def __init__(self, collection_name: str = "mem0", embedding_model_dims: Optional[int] = None,
                 path: Optional[str] = None, store_name: str = "default",
                 metric: str = "cosine") -> None:
        self.collection_name = collection_name
        self.embedding_model_dims = embedding_model_dims
        self._backing = _backing(path, store_name, embedding_model_dims, metric)
        self._scope = Filter.namespace((collection_name,))
        self._plans = c.FilterCache()
        self._prefix = c.key_prefix([collection_name]) + '"'

    # Keys and payloads.

    def _key(self, vector_id: Any) -> str:
        return c.canon_strs([self.collection_name, str(vector_id)])

    def _id(self, key: str) -> str:
        """The mem0 id of a key: the text between the quotes of its last
        part when nothing in it is escaped (no backslash), else the JSON
        decoded."""
        pre = self._prefix
        if key.startswith(pre) and "\\" not in key:
            return key[len(pre):-2]
        return c.loads(key)[-1]

    def _output(self, m: Any, score: Optional[float] = None) -> OutputData:
        return _output_data(self._id(m.key), score, c.loads(m.payload))

    @staticmethod
    def _project(payload: Dict[str, Any]) -> Tuple[Dict[str, Any], List[str]]:
        if any(f in payload for f in _UNFILTERED):
            payload = {k: v for k, v in payload.items() if k not in _UNFILTERED}
        return c.project(payload, nested=False)

    def _plan(self, filters: Optional[Dict[str, Any]]) -> c.Plan:
        return self._plans.get(c.filter_key(filters),
                               lambda: c.Plan(self._scope, translate_filters(filters)))

    # VectorStoreBase.

    def create_col(self, name: str, vector_size: Optional[int] = None, distance: Any = None) -> None:
        """Collections are namespaces: nothing to make beforehand."""
        self.collection_name = name
        self._scope = Filter.namespace((name,))
        self._plans = c.FilterCache()
        self._prefix = c.key_prefix([name]) + '"'

    def insert(self, vectors: List[List[float]], payloads: Optional[List[Dict]] = None,
               ids: Optional[List[str]] = None) -> None:
        n = len(vectors)
        if n == 0:
            return
        ids = [str(i) for i in ids] if ids else [str(uuid.uuid4()) for _ in range(n)]
        payloads = list(payloads) if payloads else [{} for _ in range(n)]
        if len(ids) != n or len(payloads) != n:
            raise ValueError(f"{n} vectors, {len(ids)} ids and {len(payloads)} payloads")
        vecs = c.as_matrix(vectors, n)
        pre = c.key_prefix([self.collection_name])
        keys = [pre + c.key_end(i) for i in ids]
        attrs, tags = c.project_many(payloads, nested=False, skip=_UNFILTERED)
        store = self._backing.ensure(vecs.shape[1])
        with self._backing.lock:
            mids, existed = self._backing.assign(keys)
            # Tags only when some memory has them or an upsert must clear them.
            tag_rows = tags if tags is not None else ([[]] * n if existed.any() else None)
            store.add(mids, vecs, keys=keys, namespaces=[(self.collection_name,)] * n,
                      payloads=[c.dumps(p) for p in payloads], attributes=attrs, tags=tag_rows)

    def search(self, query: str, vectors: List[float], top_k: int = 5,
               filters: Optional[Dict] = None) -> List[OutputData]:
        store = self._backing.store
        if store is None or top_k <= 0:
            return []
        plan = self._plans.find(c.filter_key(filters)) or self._plan(filters)
        # The embedding as it came (a list): run_search converts it.
        hits = c.run_search(store, vectors, int(top_k), plan)
        # _output's steps in this frame: after the scan of a large store
        # little of this code is in the caches, and each call adds misses.
        pre, loads, made = self._prefix, c.loads, c.constructed
        cut = len(pre)
        out = []
        for _, s, m in hits:
            key = m.key
            vid = key[cut:-2] if key.startswith(pre) and "\\" not in key else loads(key)[-1]
            payload = loads(m.payload)
            if _CONSTRUCTED and type(payload) is dict and type(vid) is str and type(s) is float:
                # _output_data's fast case, without its two calls a hit.
                out.append(made(OutputData, {"id": vid, "score": s, "payload": payload},
                                _OUTPUT_FIELDS))
            else:
                out.append(_output_data(vid, s, payload))
        return out

    def _id_of(self, vector_id: Any) -> Optional[int]:
        found = self._backing.ids_of([self._key(vector_id)])[0]
        return None if found == NO_ID else int(found)

    def delete(self, vector_id: Any) -> None:
        with self._backing.lock:
            mid = self._id_of(vector_id)
            if mid is not None:
                self._backing.store.remove([mid])  # type: ignore[union-attr]

    def update(self, vector_id: Any, vector: Optional[List[float]] = None,
               payload: Optional[Dict] = None) -> None:
        """New vector and / or payload of a memory (the other kept)."""
        with self._backing.lock:
            mid = self._id_of(vector_id)
            if mid is None:
                raise KeyError(f"no memory {vector_id!r} in collection {self.collection_name!r}")
            store = self._backing.store
            assert store is not None
            if vector is not None:
                if payload is None:
                    payload = c.loads(c.read_rows(store, [mid])[0].payload)
                a, t = self._project(payload)
                store.add([mid], c.as_matrix([vector], 1), payloads=[c.dumps(payload)],
                          attributes=[a], tags=[t])
            elif payload is not None:
                a, t = self._project(payload)
                store.update_fields([mid], payloads=[c.dumps(payload)], attributes=[a], tags=[t])

    def get(self, vector_id: Any) -> Optional[OutputData]:
        store = self._backing.store
        if store is None:
            return None
        mid = self._id_of(vector_id)
        if mid is None:
            return None
        m = c.read_rows(store, [mid])[0]
        return None if m is None else self._output(m)

    def list_cols(self) -> List[str]:
        store = self._backing.store
        if store is None:
            return []
        return sorted({ns[0] for ns, count in store.namespaces() if len(ns) == 1 and count})

    def delete_col(self) -> None:
        store = self._backing.store
        if store is None:
            return
        with self._backing.lock:
            found = store.select(self._scope)
            if found.size:
                store.remove(found)

    def col_info(self) -> Dict[str, Any]:
        store = self._backing.store
        return {"name": self.collection_name,
                "count": 0 if store is None else store.count_where(self._scope),
                "dims": None if store is None else store.dim}

    def list(self, filters: Optional[Dict] = None, top_k: Optional[int] = 100
             ) -> List[List[OutputData]]:
        """The memories `filters` allows, in the order they were written,
        at most top_k (None: all)."""
        store = self._backing.store
        if store is None:
            return [[]]
        ids = c.run_select(store, self._plan(filters), 0, top_k)
        return [[self._output(m) for m in c.read_rows(store, ids) if m is not None]]

    def reset(self) -> None:
        self.delete_col()


def register() -> None:
    """Makes "mnemo" a vector store provider of mem0's Memory (done when
    this module is imported; repeating it does nothing)."""
    from mem0.utils.factory import VectorStoreFactory
    from mem0.vector_stores.configs import VectorStoreConfig
    VectorStoreFactory.provider_to_class["mnemo"] = f"{__name__}.MnemoVectorStore"
    # VectorStoreConfig imports mem0.configs.vector_stores.<provider> for the
    # config class: this module stands in for it.
    sys.modules.setdefault("mem0.configs.vector_stores.mnemo", sys.modules[__name__])
    VectorStoreConfig.__private_attributes__["_provider_configs"].default["mnemo"] = "MnemoConfig"


register()
