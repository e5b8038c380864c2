"""LangChain: a langchain-core VectorStore over a mnemo store.

    from mnemo.integrations.langchain import MnemoVectorStore
    vs = MnemoVectorStore(embedding=my_embeddings)
    vs.add_texts(["..."], metadatas=[{"source": "notes", "year": 2024}], ids=["n1"])
    vs.similarity_search("...", k=4, filter={"year": {"$gte": 2020}})

Each document is one memory: its id is the memory's key (an upsert when
the id is there already), its text and metadata the payload (JSON,
returned exactly), its top-level metadata values attributes for filters
(mnemo.integrations._common: scalars, and lists as "name=value" tags).
`filter=` takes the dictionary form of Chroma, PGVector and Pinecone:
{"field": value}, {"field": {"$eq" | "$ne" | "$lt" | "$lte" | "$gt" | "$gte":
v, "$in" | "$nin": [...], "$between": [lo, hi], "$exists": bool,
"$contains": v}}, "$and" / "$or": [...], "$not": {...}; it becomes one
mnemo filter run inside the search, never a pass over results. A callable
filter (InMemoryVectorStore's) is refused: it could only run after the
search. As in mnemo (and PGVector), "$ne" and "$nin" need the field.
A `namespace` keeps this vector store's documents apart from others in
the same mnemo store. docs/integrations.md has the whole mapping.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from ..filters import Filter
from ..store import NO_ID, Store
from . import _common as c

__all__ = ["MnemoVectorStore", "translate_filter"]

_OPS = ("$eq", "$ne", "$lt", "$lte", "$gt", "$gte")


def _field(name: str, cond: Any) -> c.Cond:
    n = c.esc(name)
    if not isinstance(cond, dict):
        if cond is None:
            return c.not_(c.present(n))
        if isinstance(cond, (list, tuple, set)):
            raise ValueError(f"filter on {name!r}: a list is no value; write "
                             "{'$in': [...]} for any of several values")
        return c.attr(n, "$eq", cond)
    parts = []
    for op, v in cond.items():
        if op in _OPS:
            if isinstance(v, (list, tuple)) and op in ("$eq", "$ne"):
                eq = c.attr(n + c.LIST_SUFFIX, "$eq", c.canon(v))
                parts.append(eq if op == "$eq" else c.and_(c.present(n), c.not_(eq)))
            elif v is None and op in ("$eq", "$ne"):
                p = c.present(n)
                parts.append(c.not_(p) if op == "$eq" else p)
            else:
                parts.append(c.attr(n, op, v))
        elif op in ("$in", "$nin"):
            if not isinstance(v, (list, tuple, set)):
                raise ValueError(f"filter on {name!r}: {op} takes a list, not {v!r}")
            parts.append(c.attr(n, op, *v) if v or op == "$nin"
                         else c.FALSE)
        elif op == "$between":
            if not isinstance(v, (list, tuple)) or len(v) != 2:
                raise ValueError(f"filter on {name!r}: $between takes [lo, hi], not {v!r}")
            parts.append(c.attr(n, "$between", *v))
        elif op == "$exists":
            parts.append(c.present(n) if v else c.not_(c.present(n)))
        elif op == "$contains":
            parts.append(c.tags("any", [c.element_tag(n, v)]))
        elif op == "$not":
            parts.append(c.not_(_field(name, v)))
        else:
            raise ValueError(f"filter on {name!r}: unsupported operator {op!r}; mnemo takes "
                             + ", ".join(_OPS + ("$in", "$nin", "$between", "$exists",
                                                 "$contains", "$not")))
    return c.and_(*parts) if parts else c.TRUE


def translate_filter(f: Optional[dict]) -> c.Cond:
    """A LangChain dictionary filter as a mnemo condition (exact: evaluated
    by the store)."""
    if f is None:
        return c.TRUE
    if callable(f):
        raise TypeError("MnemoVectorStore takes a dictionary filter (evaluated inside the "
                        "search), not a callable, which could only run after it")
    if not isinstance(f, dict):
        raise TypeError(f"filter must be a dict, not {type(f).__name__}")
    parts = []
    for key, cond in f.items():
        if key in ("$and", "$or"):
            if not isinstance(cond, (list, tuple)):
                raise ValueError(f"{key} takes a list of filters, not {cond!r}")
            subs = [translate_filter(x) for x in cond]
            parts.append(c.and_(*subs) if key == "$and" else c.or_(*subs))
        elif key == "$not":
            if isinstance(cond, (list, tuple)):
                parts.append(c.not_(c.or_(*(translate_filter(x) for x in cond))))
            else:
                parts.append(c.not_(translate_filter(cond)))
        elif key.startswith("$"):
            raise ValueError(f"unsupported filter operator {key!r}; expected $and, $or, $not "
                             "or a metadata field")
        else:
            parts.append(_field(key, cond))
    return c.and_(*parts)


# Documents of the payloads read back, made as pydantic's model_construct
# makes a model of values known to be valid: a str id (or None), a str text
# and a dict of metadata from the payload's JSON are what Document's
# validation keeps as they are, so the state is the constructor's without
# its validation (4 Documents validated: 7.5 of the search's 17.5 us of its
# own work warm, and more after the scan of a large store, when little of
# pydantic's code is still in the caches).
# Anything else, or a langchain-core whose Document the check below finds
# made differently, goes through the constructor.
_FIELDS_SET = frozenset(("id", "metadata", "page_content"))


def _constructed(doc_id: Optional[str], text: str, metadata: dict) -> Document:
    return c.constructed(Document, {"id": doc_id, "metadata": metadata, "page_content": text,
                                    "type": "Document"}, _FIELDS_SET)


_CONSTRUCTED = c.same_as_constructor(
    Document, lambda id, page_content, metadata: _constructed(id, page_content, metadata),
    [dict(id=doc_id, page_content="t", metadata={"m": [1]}) for doc_id in ("i", None)])


def _document(doc_id: Optional[str], text: Any, metadata: Any) -> Document:
    """Document(id=doc_id, page_content=text, metadata=metadata)."""
    if (_CONSTRUCTED and type(text) is str and type(metadata) is dict
            and (doc_id is None or type(doc_id) is str)):
        return _constructed(doc_id, text, metadata)
    return Document(id=doc_id, page_content=text, metadata=metadata)


class MnemoVectorStore(VectorStore):
    """A LangChain vector store on a mnemo store.

    Args:
        embedding: the Embeddings that turn texts and queries into vectors.
        store: a mnemo.Store to use (its dimension must match the
            embeddings'); None: one is made on the first add (or opened
            from `path`).
        runtime: the mnemo.Runtime of a store made here (default: one
            shared runtime, backend auto).
        path: a durable store file (mnemo.open_durable): reopened when it
            exists, else created on the first add.
        namespace: a tuple of str; this vector store then reads, searches,
            lists and deletes only its own documents in a shared store.
        metric: "cosine" (default), "dot" or "l2sq" for a store made here.

    Scores are those of the metric: cosine or dot similarity (higher is
    closer), or the squared L2 distance (lower is closer).
    """

    def __init__(self, embedding: Embeddings, *, store: Optional[Store] = None,
                 runtime: Any = None, path: Optional[str] = None,
                 namespace: Optional[Sequence[str]] = None, metric: str = "cosine") -> None:
        self.embedding = embedding
        self._backing = c.Backing(store, runtime=runtime, path=path, metric=metric)
        self._ns = tuple(namespace) if namespace else None
        self._scope = Filter.namespace(self._ns) if self._ns else None
        self._metric = metric if store is None else getattr(store.metric, "name", "").lower()
        self._plans = c.FilterCache()

    @property
    def embeddings(self) -> Embeddings:
        return self.embedding

    @property
    def store(self) -> Optional[Store]:
        """The mnemo store (None until the first add when none was given)."""
        return self._backing.store

    # Keys and documents.

    def _key(self, doc_id: str) -> str:
        return doc_id if self._ns is None else c.canon_strs([*self._ns, doc_id])

    def _doc_id(self, key: str) -> str:
        return key if self._ns is None else c.loads(key)[-1]

    def _document(self, m: Any) -> Document:
        body = c.loads(m.payload)
        return _document(self._doc_id(m.key), body["text"], body["metadata"])

    # Writes.

    def add_texts(self, texts: Iterable[str], metadatas: Optional[List[dict]] = None, *,
                  ids: Optional[List[Optional[str]]] = None, **kwargs: Any) -> List[str]:
        texts = list(texts)
        self._check_lengths(len(texts), metadatas, ids)
        if not texts:
            return []
        vectors = self.embedding.embed_documents(texts)
        return self.add_embeddings(texts, vectors, metadatas, ids=ids)

    def add_embeddings(self, texts: Sequence[str], embeddings: Any,
                       metadatas: Optional[Sequence[Optional[dict]]] = None, *,
                       ids: Optional[Sequence[Optional[str]]] = None,
                       **kwargs: Any) -> List[str]:
        """add_texts with the vectors given (no embedding call)."""
        texts = list(texts)
        n = len(texts)
        self._check_lengths(n, metadatas, ids)
        if n == 0:
            return []
        doc_ids = [i if i else str(uuid.uuid4()) for i in ids] if ids else \
            [str(uuid.uuid4()) for _ in range(n)]
        vectors = c.as_matrix(embeddings, n)
        metas = list(metadatas) if metadatas else [None] * n
        payloads = [c.dumps({"text": t, "metadata": m if m is not None else {}})
                    for t, m in zip(texts, metas)]
        attrs_all, tags_all = c.project_many(metas, nested=False)
        keys = doc_ids if self._ns is None else [self._key(i) for i in doc_ids]
        store = self._backing.ensure(vectors.shape[1])
        namespaces = None if self._ns is None else [self._ns] * n
        with self._backing.lock:
            for part in c.chunks(n, 16384):
                mids, existed = self._backing.assign(keys[part])
                was = existed.tolist()
                # None leaves a new memory without the field; an upsert clears it.
                attrs = [a if a else ({} if e else None) for a, e in zip(attrs_all[part], was)]
                tag_rows = None
                if (tags_all is not None and any(tags_all[part])) or existed.any():
                    tl = tags_all[part] if tags_all is not None else [[]] * len(was)
                    tag_rows = [t if t or e else None for t, e in zip(tl, was)]
                store.add(mids, vectors[part], keys=keys[part], attributes=attrs, tags=tag_rows,
                          payloads=payloads[part],
                          namespaces=None if namespaces is None else namespaces[part])
        return doc_ids

    @staticmethod
    def _check_lengths(n: int, metadatas: Any, ids: Any) -> None:
        if metadatas is not None and len(metadatas) != n:
            raise ValueError(f"{len(metadatas)} metadatas for {n} texts")
        if ids is not None and len(ids) != n:
            raise ValueError(f"{len(ids)} ids for {n} texts")

    def delete(self, ids: Optional[Sequence[str]] = None, **kwargs: Any) -> Optional[bool]:
        """Deletes these ids (missing ones ignored); None: every document
        of this vector store."""
        store = self._backing.store
        if store is None:
            return True
        with self._backing.lock:
            if ids is None:
                found = store.select(self._scope)
            else:
                found = self._backing.ids_of([self._key(i) for i in ids])
                found = found[found != NO_ID]
            if found.size:
                store.remove(found)
        return True

    # Reads.

    def get_by_ids(self, ids: Sequence[str], /) -> List[Document]:
        store = self._backing.store
        if store is None or not ids:
            return []
        wanted = list(dict.fromkeys(ids))
        found = self._backing.ids_of([self._key(i) for i in wanted])
        found = found[found != NO_ID]
        return [self._document(m) for m in c.read_rows(store, found) if m is not None]

    def _plan(self, filter: Optional[dict]) -> c.Plan:
        if filter is None and self._scope is None:
            return _NO_FILTER
        if callable(filter):
            translate_filter(filter)  # raises
        return self._plans.get(c.filter_key(filter),
                               lambda: c.Plan(self._scope, translate_filter(filter)))

    def _search(self, embedding: Any, k: int, filter: Optional[dict]) -> List[Tuple[int, float, Any]]:
        store = self._backing.store
        if store is None or k <= 0:
            return []
        return c.run_search(store, c.as_query(embedding), k, self._plan(filter))

    def similarity_search_with_score_by_vector(self, embedding: List[float], k: int = 4,
                                               filter: Optional[dict] = None,
                                               **kwargs: Any) -> List[Tuple[Document, float]]:
        # The search's steps in this one frame: after a search over a large
        # store little of this code is still in the caches, and each
        # further function adds its misses.
        store = self._backing.store
        if store is None or k <= 0:
            return []
        plan = None
        if type(filter) is dict:
            plan = self._plans.find(c.filter_key(filter))
        if plan is None:
            plan = self._plan(filter)
        loads, made = c.loads, c.constructed
        ns = self._ns
        out = []
        for _, s, m in c.run_search(store, embedding, k, plan):
            body = loads(m.payload)
            doc_id, text, meta = m.key if ns is None else loads(m.key)[-1], body["text"], \
                body["metadata"]
            if _CONSTRUCTED and type(text) is str and type(meta) is dict and type(doc_id) is str:
                # _document's fast case, without its two calls a hit.
                doc = made(Document, {"id": doc_id, "metadata": meta, "page_content": text,
                                      "type": "Document"}, _FIELDS_SET)
            else:
                doc = _document(doc_id, text, meta)
            out.append((doc, s))
        return out

    def similarity_search_by_vector(self, embedding: List[float], k: int = 4,
                                    filter: Optional[dict] = None,
                                    **kwargs: Any) -> List[Document]:
        return [d for d, _ in self.similarity_search_with_score_by_vector(embedding, k, filter)]

    def similarity_search_with_score(self, query: str, k: int = 4,
                                     filter: Optional[dict] = None,
                                     **kwargs: Any) -> List[Tuple[Document, float]]:
        return self.similarity_search_with_score_by_vector(self.embedding.embed_query(query), k,
                                                           filter)

    def similarity_search(self, query: str, k: int = 4, filter: Optional[dict] = None,
                          **kwargs: Any) -> List[Document]:
        return self.similarity_search_by_vector(self.embedding.embed_query(query), k, filter)

    def max_marginal_relevance_search_by_vector(self, embedding: List[float], k: int = 4,
                                                fetch_k: int = 20, lambda_mult: float = 0.5,
                                                filter: Optional[dict] = None,
                                                **kwargs: Any) -> List[Document]:
        hits = self._search(embedding, max(fetch_k, k), filter)
        if not hits:
            return []
        store = self._backing.store
        assert store is not None
        vectors = np.stack([store.get(i) for i, _, _ in hits])
        chosen = maximal_marginal_relevance(np.asarray(embedding, dtype=np.float32), vectors,
                                            k=k, lambda_mult=lambda_mult)
        return [self._document(hits[i][2]) for i in chosen]

    def max_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20,
                                      lambda_mult: float = 0.5, filter: Optional[dict] = None,
                                      **kwargs: Any) -> List[Document]:
        return self.max_marginal_relevance_search_by_vector(
            self.embedding.embed_query(query), k, fetch_k, lambda_mult, filter)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # Cosine and dot scores are similarities already (as 1 - distance
        # is in stores that return distances); l2sq gives squared distances.
        if self._metric == "l2sq":
            return lambda d: self._euclidean_relevance_score_fn(float(np.sqrt(max(d, 0.0))))
        return lambda s: s

    @classmethod
    def from_texts(cls, texts: List[str], embedding: Embeddings,
                   metadatas: Optional[List[dict]] = None, *,
                   ids: Optional[List[str]] = None, **kwargs: Any) -> "MnemoVectorStore":
        vs = cls(embedding, **kwargs)
        vs.add_texts(texts, metadatas, ids=ids)
        return vs


_NO_FILTER = c.Plan(None, c.TRUE)
