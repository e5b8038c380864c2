"""LlamaIndex: a vector store (llama-index-core BasePydanticVectorStore)
over a mnemo store.

    from llama_index.core import StorageContext, VectorStoreIndex
    from mnemo.integrations.llama_index import MnemoVectorStore
    vector_store = MnemoVectorStore()
    index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(
        vector_store=vector_store), embed_model=my_embed_model)

A node is one memory: its node id the memory's key, the node itself
(without its embedding) the payload as JSON, and the metadata a
SimpleVectorStore filters on (the node's metadata, "_node_type",
"document_id", "doc_id", "ref_doc_id") its attributes and tags
(mnemo.integrations._common). MetadataFilters become mnemo filters run
inside the search: EQ NE GT GTE LT LTE IN NIN, ANY ALL CONTAINS on lists
(tags), IS_EMPTY, AND OR NOT and nested MetadataFilters, with
SimpleVectorStore's rules for absent values (only NE and NIN hold for
them). mnemo has no substring predicate: TEXT_MATCH,
TEXT_MATCH_INSENSITIVE and CONTAINS / ANY / ALL on a string value are
run as the store's filter with those tests widened to "has the field",
and the memories it returns are tested here (all of them when at most
4,096 match, else growing searches until similarity_top_k pass), so a
query still gets min(k, matches) nodes. docs/integrations.md has the
whole mapping.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple

import numpy as np
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import (BaseNode, Document, ImageDocument, ImageNode, IndexNode,
                                     Node, NodeRelationship, ObjectType, RelatedNodeInfo,
                                     TextNode)
from llama_index.core.vector_stores.types import (BasePydanticVectorStore, FilterCondition,
                                                  FilterOperator, MetadataFilter, MetadataFilters,
                                                  VectorStoreQuery, VectorStoreQueryMode,
                                                  VectorStoreQueryResult)

from ..filters import Filter
from ..store import NO_ID, Store
from . import _common as c

__all__ = ["MnemoVectorStore", "translate_filters"]

# The node classes by the bytes of their class name in a payload.
_NODE_TYPES = {cls.class_name().encode(): cls
               for cls in (TextNode, Node, ImageNode, IndexNode, Document, ImageDocument)}
_CLASS_MARK = b'"class_name":"'
# The modes, read once (an enum member read runs Python code).
_DEFAULT = VectorStoreQueryMode.DEFAULT
_MODES = (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.MMR)


def _contains(n: str, v: Any) -> c.Cond:
    """`v in value`: an element of a list, or (for a str) a substring."""
    parts = [c.tags("any", [c.element_tag(n, v)])] if c.scalar(v) else []
    if isinstance(v, str):
        parts.append(c.substring(n, v))
    return c.or_(*parts)


# SimpleVectorStore's metadata holds the node's document id three times
# (for Chroma, Pinecone and Weaviate); here it is one attribute.
_DOC_ID_ALIASES = {"doc_id": "ref_doc_id", "document_id": "ref_doc_id"}


def _leaf(f: MetadataFilter) -> c.Cond:
    n = c.esc(_DOC_ID_ALIASES.get(f.key, f.key))
    op, v = f.operator, f.value
    if op == FilterOperator.IS_EMPTY:
        return c.or_(c.not_(c.present(n)), c.attr(n, "$eq", ""),
                     c.attr(n + c.LIST_SUFFIX, "$eq", "[]"))
    if op in (FilterOperator.EQ, FilterOperator.NE):
        if v is None:
            eq = c.FALSE  # an absent value satisfies only NE and NIN
        elif isinstance(v, list):
            eq = c.attr(n + c.LIST_SUFFIX, "$eq", c.canon(v))
        else:
            eq = c.attr(n, "$eq", v) if c.scalar(v) else c.FALSE
        return eq if op == FilterOperator.EQ else c.not_(eq)
    if op in (FilterOperator.GT, FilterOperator.GTE, FilterOperator.LT, FilterOperator.LTE):
        if v is None or isinstance(v, list):
            raise ValueError(f"{op.value} on {f.key!r} takes one number or string, not {v!r}")
        mop = {FilterOperator.GT: "$gt", FilterOperator.GTE: "$gte",
               FilterOperator.LT: "$lt", FilterOperator.LTE: "$lte"}[op]
        return c.attr(n, mop, v)
    if op in (FilterOperator.IN, FilterOperator.NIN):
        if not isinstance(v, list):
            raise ValueError(f"{op.value} on {f.key!r} takes a list, not {v!r}")
        values = [x for x in v if c.scalar(x)]
        inn = c.attr(n, "$in", *values) if values else c.FALSE
        return inn if op == FilterOperator.IN else c.not_(inn)
    if op == FilterOperator.CONTAINS:
        return _contains(n, v)
    if op in (FilterOperator.TEXT_MATCH, FilterOperator.TEXT_MATCH_INSENSITIVE):
        if not isinstance(v, str):
            raise ValueError(f"{op.value} on {f.key!r} takes a string, not {v!r}")
        return c.substring(n, v, fold=op == FilterOperator.TEXT_MATCH_INSENSITIVE)
    if op in (FilterOperator.ANY, FilterOperator.ALL):
        values = list(v) if isinstance(v, (list, str)) else [v]
        if not values:
            return c.FALSE if op == FilterOperator.ANY else c.present(n)
        each = [_contains(n, x) for x in values]
        return c.or_(*each) if op == FilterOperator.ANY else c.and_(*each)
    raise ValueError(f"unsupported filter operator {op!r}")


def translate_filters(filters: Optional[MetadataFilters]) -> c.Cond:
    """MetadataFilters (nested too) as a mnemo condition."""
    if filters is None or not filters.filters:
        return c.TRUE
    parts = [translate_filters(f) if isinstance(f, MetadataFilters) else _leaf(f)
             for f in filters.filters]
    cond = filters.condition or FilterCondition.AND
    if cond == FilterCondition.AND:
        return c.and_(*parts)
    if cond == FilterCondition.OR:
        return c.or_(*parts)
    if cond == FilterCondition.NOT:
        return c.not_(c.or_(*parts))
    raise ValueError(f"Invalid filter condition: {cond}")


_VALUE_TYPES = (str, int, float, bool, type(None))


def _filters_key(filters: MetadataFilters) -> Hashable:
    """A hashable form of MetadataFilters that tells values of each type
    apart (1, 1.0 and True are different filters): the condition and each
    filter's key, operator and typed value, read off the models (pydantic's
    JSON of them costs more than the search's own bookkeeping); the JSON
    for anything else."""
    parts: List[Any] = []
    for f in filters.filters:
        if type(f) is MetadataFilter:
            v = f.value
            t = type(v)
            if t is list:
                v = tuple((type(x), x) for x in v)
                if not all(e[0] in _VALUE_TYPES for e in v):
                    return filters.model_dump_json()
            elif t not in _VALUE_TYPES:
                return filters.model_dump_json()
            parts.append((f.key, f.operator, t, v))
        elif type(f) is MetadataFilters:
            parts.append(_filters_key(f))
        else:
            return filters.model_dump_json()
    return (filters.condition, tuple(parts))


def _node_metadata(node: BaseNode) -> Dict[str, Any]:
    """The metadata SimpleVectorStore filters on (node_to_metadata_dict's,
    without the node's JSON; its doc_id and document_id, which repeat
    ref_doc_id, are filtered as ref_doc_id)."""
    meta = dict(node.metadata)
    meta.pop("doc_id", None)
    meta.pop("document_id", None)
    meta["_node_type"] = node.class_name()
    meta["ref_doc_id"] = node.ref_doc_id or "None"  # doc_id and document_id: aliases
    return meta


# What _node_metadata replaces or drops of a node's own metadata.
_NODE_KEYS = ("doc_id", "document_id", "_node_type", "ref_doc_id")


def _project_nodes(nodes: Sequence[BaseNode]
                   ) -> Tuple[List[Dict[str, Any]], Optional[List[List[str]]]]:
    """c.project_many of each node's _node_metadata: flat metadata of plain
    values in one call of the extension, the node's own fields added after."""
    refs = [n.ref_doc_id or "None" for n in nodes]
    got = None
    if all(type(r) is str and c.scalar(r) for r in refs):
        got = c.project_plain([n.metadata for n in nodes], _NODE_KEYS)
    if got is None:
        return c.project_many([_node_metadata(n) for n in nodes], nested=False)
    for a, n, r in zip(got, nodes, refs):
        a["_node_type"] = n.class_name()
        a["ref_doc_id"] = r
    return got, None


# TextNodes of payloads this adapter wrote, made as pydantic's
# model_construct makes a model of values known to be valid: the JSON of a
# TextNode (model_dump_json without the embedding) holds the fields below,
# in this order, of types that its validation keeps as they are (str, None,
# int, dicts and lists from the JSON) except the relationships' keys, which
# become NodeRelationship members, and their values, RelatedNodeInfo models
# made the same way. Validating 4 nodes took most of a search's own work
# (about 4.5 us a node warm, several times that after a large scan). A
# payload of any other form, or a llama-index whose TextNode the check
# below finds validated differently, goes through model_validate_json.
_TEXT_KEYS = ("id_", "metadata", "excluded_embed_metadata_keys", "excluded_llm_metadata_keys",
              "relationships", "metadata_template", "metadata_separator", "text", "mimetype",
              "start_char_idx", "end_char_idx", "text_template", "class_name")
_TEXT_SET = frozenset(_TEXT_KEYS[:-1])
_REL_KEYS = ("node_id", "node_type", "metadata", "hash", "class_name")
_REL_SET = frozenset(_REL_KEYS[:-1])
_RELATIONS = {r.value: r for r in NodeRelationship}


def _related(d: Any) -> Optional[RelatedNodeInfo]:
    """RelatedNodeInfo of its JSON dict, or None when not of the plain form."""
    if (type(d) is not dict or tuple(d) != _REL_KEYS or d["class_name"] != "RelatedNodeInfo"
            or type(d["node_id"]) is not str or type(d["metadata"]) is not dict):
        return None
    node_type, digest = d["node_type"], d["hash"]
    if (node_type is not None and type(node_type) is not str) or \
            (digest is not None and type(digest) is not str):
        return None
    return c.constructed(RelatedNodeInfo, {"node_id": d["node_id"], "node_type": node_type,
                                           "metadata": d["metadata"], "hash": digest}, _REL_SET)


def _text_node(d: Any) -> Optional[TextNode]:
    """The TextNode of its JSON dict, or None when not of the plain form."""
    if type(d) is not dict or tuple(d) != _TEXT_KEYS:
        return None
    (id_, meta, ex_embed, ex_llm, rel, m_tmpl, m_sep, text, mime, start, end, t_tmpl,
     cls) = d.values()
    if not (cls == "TextNode" and type(id_) is str and type(text) is str
            and type(m_tmpl) is str and type(m_sep) is str and type(mime) is str
            and type(t_tmpl) is str and type(meta) is dict and type(rel) is dict
            and type(ex_embed) is list and type(ex_llm) is list
            and (start is None or type(start) is int) and (end is None or type(end) is int)):
        return None
    if (ex_embed and any(type(x) is not str for x in ex_embed)) or \
            (ex_llm and any(type(x) is not str for x in ex_llm)):
        return None
    relations: Dict[Any, Any] = {}
    for key, v in rel.items():
        kind = _RELATIONS.get(key)
        if kind is None:
            return None
        if type(v) is list:
            got = [_related(x) for x in v]
            if any(x is None for x in got):
                return None
            relations[kind] = got
        else:
            one = _related(v)
            if one is None:
                return None
            relations[kind] = one
    return c.constructed(TextNode, {
        "id_": id_, "embedding": None, "metadata": meta, "excluded_embed_metadata_keys": ex_embed,
        "excluded_llm_metadata_keys": ex_llm, "relationships": relations,
        "metadata_template": m_tmpl, "metadata_separator": m_sep, "text": text, "mimetype": mime,
        "start_char_idx": start, "end_char_idx": end, "text_template": t_tmpl}, _TEXT_SET)


def _same_model(a: Any, b: Any) -> bool:
    """a and b: the same pydantic state, nested models, lists and dicts too."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_model(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_model(a[k], b[k]) for k in a)
    if hasattr(a, "__pydantic_fields_set__"):
        return (a.__pydantic_fields_set__ == b.__pydantic_fields_set__
                and a.__pydantic_extra__ == b.__pydantic_extra__
                and a.__pydantic_private__ == b.__pydantic_private__
                and _same_model(a.__dict__, b.__dict__) and a == b)
    return bool(a == b)


def _fast_nodes_agree() -> bool:
    """Whether _text_node gives what TextNode.model_validate_json gives, on
    the payloads of nodes of every relationship form."""
    src = RelatedNodeInfo(node_id="d", node_type=ObjectType.DOCUMENT, metadata={"k": [1]},
                          hash="h")
    samples = [TextNode(id_="a", text="t", metadata={"m": {"n": [1, 2.5, None]}}),
               TextNode(id_="b", text="", start_char_idx=3, end_char_idx=9,
                        excluded_llm_metadata_keys=["m"], metadata={"m": 1},
                        relationships={NodeRelationship.SOURCE: src,
                                       NodeRelationship.NEXT: RelatedNodeInfo(node_id="n"),
                                       NodeRelationship.CHILD: [src, RelatedNodeInfo(node_id="c")]})]
    try:
        for node in samples:
            payload = node.model_dump_json(exclude={"embedding"})
            fast = _text_node(c.loads(payload))
            if fast is None or not _same_model(TextNode.model_validate_json(payload), fast):
                return False
    except Exception:
        return False
    return True


_FAST_NODES = _fast_nodes_agree()

# Query results made with their fields by position (matching keyword
# arguments is code of its own, out of the caches after a large scan) where
# the dataclass's constructor takes them in this order.
_RESULT_BY_POSITION = [f.name for f in dataclasses.fields(VectorStoreQueryResult) if f.init][:3] \
    == ["nodes", "similarities", "ids"]

_NO_EMBEDDING = {"embedding"}


def _payload(node: BaseNode) -> Any:
    """A node's payload: the JSON of node.model_dump_json without the
    embedding, as the UTF-8 bytes the store keeps. The serializer's bytes
    are taken as they come where the node's class does not override
    model_dump_json (model_dump_json decodes them to a str, which the store
    would encode again: 1-2 us a node of an add); _FAST_PAYLOADS checks
    both give the same bytes."""
    if _FAST_PAYLOADS and type(node).model_dump_json is _PLAIN_DUMP:
        return node.__pydantic_serializer__.to_json(node, exclude=_NO_EMBEDDING)
    return node.model_dump_json(exclude=_NO_EMBEDDING)


_PLAIN_DUMP = TextNode.model_dump_json


def _fast_payloads_agree() -> bool:
    """Whether the serializer's bytes are model_dump_json's, encoded."""
    try:
        samples = [TextNode(id_="a", text="t\u00e9\u4e2d\"\n", metadata={"m": {"n": [1, 2.5, None]}},
                            embedding=[0.5, 1.0]),
                   TextNode(id_="b", text="", start_char_idx=3, end_char_idx=9,
                            relationships={NodeRelationship.NEXT: RelatedNodeInfo(node_id="n")})]
        return all(n.__pydantic_serializer__.to_json(n, exclude=_NO_EMBEDDING)
                   == n.model_dump_json(exclude=_NO_EMBEDDING).encode() for n in samples)
    except Exception:
        return False


_FAST_PAYLOADS = _fast_payloads_agree()


# The end of a TextNode's payload: the class name rfind finds below.
_TEXT_END = _CLASS_MARK + b'TextNode"}'


def _load_node(payload: bytes) -> BaseNode:
    # A TextNode's payload told by its last bytes (a search of the payload
    # for the class name, several us after a large scan, for the others).
    if _FAST_NODES and payload.endswith(_TEXT_END):
        node = _text_node(c.loads(payload))
        return node if node is not None else TextNode.model_validate_json(payload)
    # The class name found in the bytes, and the JSON parsed from them (no
    # str of the whole payload made first).
    at = payload.rfind(_CLASS_MARK)
    if at >= 0:
        at += len(_CLASS_MARK)
        cls = _NODE_TYPES.get(payload[at:payload.index(b'"', at)], TextNode)
    else:
        cls = TextNode
    if cls is TextNode and _FAST_NODES:
        node = _text_node(c.loads(payload))
        if node is not None:
            return node
    return cls.model_validate_json(payload)


class MnemoVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store on a mnemo store (stores_text: query
    results carry their nodes).

    Args:
        store: a mnemo.Store to use; None: one made on the first add
            (dimension of the first embedding), or opened from `path`.
        runtime: the mnemo.Runtime of a store made here.
        path: a durable store file, reopened or created.
        metric: "cosine" (default), "dot" or "l2sq" for a store made here.
    """

    stores_text: bool = True
    flat_metadata: bool = False

    _backing: Any = PrivateAttr()
    _plans: Any = PrivateAttr()

    def __init__(self, store: Optional[Store] = None, *, runtime: Any = None,
                 path: Optional[str] = None, metric: str = "cosine", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._backing = c.Backing(store, runtime=runtime, path=path, metric=metric)
        self._plans = c.FilterCache()

    @classmethod
    def class_name(cls) -> str:
        return "MnemoVectorStore"

    @property
    def client(self) -> Optional[Store]:
        """The mnemo store."""
        return self._backing.store

    # Writes.

    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> List[str]:
        nodes = list(nodes)
        if not nodes:
            return []
        vectors = c.as_matrix([n.get_embedding() for n in nodes], len(nodes))
        keys = [n.node_id for n in nodes]
        payloads = [_payload(n) for n in nodes]
        attrs, tags = _project_nodes(nodes)
        store = self._backing.ensure(vectors.shape[1])
        with self._backing.lock:
            for part in c.chunks(len(nodes), 16384):
                ids, existed = self._backing.assign(keys[part])
                tag_rows = None
                if (tags is not None and any(tags[part])) or existed.any():
                    tag_rows = tags[part] if tags is not None else [[]] * len(keys[part])
                store.add(ids, vectors[part], keys=keys[part], payloads=payloads[part],
                          attributes=attrs[part], tags=tag_rows)
        return keys

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Deletes the nodes of the document `ref_doc_id`."""
        store = self._backing.store
        if store is None:
            return
        with self._backing.lock:
            found = store.select(Filter.attribute("ref_doc_id", "$eq", ref_doc_id))
            if found.size:
                store.remove(found)

    def _plan(self, node_ids: Optional[Sequence[str]], filters: Optional[MetadataFilters],
              doc_ids: Optional[Sequence[str]] = None,
              filters_key: Optional[Hashable] = None) -> c.Plan:
        """The plan of a query's restrictions, made once per (filters,
        node_ids, doc_ids); filters_key: _filters_key(filters) when the
        caller has it already."""
        if filters_key is None and filters is not None:
            filters_key = _filters_key(filters)
        key = (filters_key, None if node_ids is None else tuple(node_ids),
               None if doc_ids is None else tuple(doc_ids))
        parts = []
        if node_ids is not None:
            parts.append(Filter.keys(list(node_ids)) if node_ids else Filter.nothing())
        if doc_ids is not None:
            parts.append(Filter.attribute("ref_doc_id", "$in", *doc_ids) if doc_ids
                         else Filter.nothing())
        scope = Filter.and_(*parts) if parts else None
        return self._plans.get(key, lambda: c.Plan(scope, translate_filters(filters)))

    def delete_nodes(self, node_ids: Optional[List[str]] = None,
                     filters: Optional[MetadataFilters] = None, **delete_kwargs: Any) -> None:
        """Deletes the nodes among node_ids (all when None) that match
        `filters` (all when None): with neither, every node."""
        store = self._backing.store
        if store is None:
            return
        with self._backing.lock:
            found = c.run_select(store, self._plan(node_ids, filters))
            if found.size:
                store.remove(found)

    def clear(self) -> None:
        store = self._backing.store
        if store is None:
            return
        with self._backing.lock:
            found = store.select(None)
            if found.size:
                store.remove(found)

    # Reads.

    def get_nodes(self, node_ids: Optional[List[str]] = None,
                  filters: Optional[MetadataFilters] = None) -> List[BaseNode]:
        """The nodes among node_ids (in their order; all nodes, in the order
        they were added, when None) that match `filters`."""
        store = self._backing.store
        if store is None:
            return []
        if node_ids is not None and filters is None:
            ids = self._backing.ids_of(list(node_ids))
            ids = ids[ids != NO_ID]
        else:
            ids = c.run_select(store, self._plan(node_ids, filters))
        mems = [m for m in c.read_rows(store, ids) if m is not None]
        if node_ids is not None and filters is not None:
            order = {k: i for i, k in enumerate(node_ids)}
            mems.sort(key=lambda m: order.get(m.key, 0))
        return [_load_node(m.payload) for m in mems]

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The similarity_top_k nodes nearest query.query_embedding among
        those the filters, node_ids and doc_ids (when not empty) allow
        (DEFAULT mode; MMR re-ranks the best max(4 k, 20) with LlamaIndex's
        own MMR)."""
        mode = query.mode
        if mode is not _DEFAULT and mode not in _MODES:
            raise NotImplementedError(f"MnemoVectorStore does not support query mode {mode}")
        if query.query_embedding is None:
            raise ValueError("MnemoVectorStore needs query.query_embedding")
        # The private attributes read from pydantic's table of them (an
        # attribute read of one goes through BaseModel.__getattr__).
        private = self.__pydantic_private__
        store = private["_backing"].store
        k = int(query.similarity_top_k)
        if store is None or k <= 0:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        # Empty node_ids / doc_ids restrict nothing, as in the vector stores
        # that keep text: VectorStoreIndex.as_retriever passes its (for them
        # empty) node table.
        node_ids, doc_ids, filters = query.node_ids or None, query.doc_ids or None, query.filters
        plan = None
        fkey = None if filters is None else _filters_key(filters)
        if node_ids is None and doc_ids is None:
            plan = private["_plans"].find((fkey, None, None))
        if plan is None:
            plan = self._plan(node_ids, filters, doc_ids, fkey)
        if mode is not _DEFAULT and mode == VectorStoreQueryMode.MMR:
            return self._mmr(store, c.as_query(query.query_embedding), k, plan,
                             kwargs.get("mmr_threshold", query.mmr_threshold))
        nodes, sims, ids = [], [], []
        # The embedding as it came (a list): run_search converts it.
        for _, s, m in c.run_search(store, query.query_embedding, k, plan):
            nodes.append(_load_node(m.payload))
            sims.append(s)
            ids.append(m.key)
        if _RESULT_BY_POSITION:
            return VectorStoreQueryResult(nodes, sims, ids)
        return VectorStoreQueryResult(nodes=nodes, similarities=sims, ids=ids)

    def _mmr(self, store: Store, q: np.ndarray, k: int, plan: c.Plan,
             threshold: Optional[float]) -> VectorStoreQueryResult:
        from llama_index.core.indices.query.embedding_utils import get_top_k_mmr_embeddings
        hits = c.run_search(store, q, max(4 * k, 20), plan)
        if not hits:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        vectors = [store.get(i).tolist() for i, _, _ in hits]
        sims, order = get_top_k_mmr_embeddings(q.tolist(), vectors, similarity_top_k=k,
                                               embedding_ids=list(range(len(hits))),
                                               mmr_threshold=threshold)
        return VectorStoreQueryResult(nodes=[_load_node(hits[i][2].payload) for i in order],
                                      similarities=list(sims),
                                      ids=[hits[i][2].key for i in order])
