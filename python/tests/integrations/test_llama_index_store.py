"""MnemoVectorStore (LlamaIndex) as LlamaIndex uses it: under a
VectorStoreIndex (its retriever passes an empty node_ids list), with
delete_ref_doc, the async forms, MMR, doc_ids and a durable store."""

from __future__ import annotations

import asyncio
from typing import Any, List

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (FilterOperator, MetadataFilter, MetadataFilters,
                                                  VectorStoreQuery, VectorStoreQueryMode)

from .hash_embeddings import HashEmbeddings
from mnemo.integrations.llama_index import MnemoVectorStore

_H = HashEmbeddings(64)


class Embed(BaseEmbedding):
    def _get_text_embedding(self, text: str) -> List[float]:
        return _H.embed_query(text)

    def _get_query_embedding(self, query: str) -> List[float]:
        return _H.embed_query(query)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return _H.embed_query(query)


def test_vector_store_index_end_to_end() -> None:
    docs = [Document(text="green tea and jasmine", metadata={"kind": "tea"}, doc_id="d1"),
            Document(text="black coffee beans", metadata={"kind": "coffee"}, doc_id="d2"),
            Document(text="green tea ceremony", metadata={"kind": "tea"}, doc_id="d3")]
    vs = MnemoVectorStore()
    index = VectorStoreIndex.from_documents(
        docs, storage_context=StorageContext.from_defaults(vector_store=vs), embed_model=Embed())
    hits = index.as_retriever(similarity_top_k=2).retrieve("green tea")
    assert {h.node.ref_doc_id for h in hits} == {"d1", "d3"}
    only = MetadataFilters(filters=[MetadataFilter(key="kind", value="coffee")])
    hits = index.as_retriever(similarity_top_k=2, filters=only).retrieve("green tea")
    assert [h.node.ref_doc_id for h in hits] == ["d2"]
    index.delete_ref_doc("d1")
    hits = index.as_retriever(similarity_top_k=5).retrieve("green tea")
    assert {h.node.ref_doc_id for h in hits} == {"d2", "d3"}


def nodes() -> List[TextNode]:
    texts = ["green tea", "green tea leaves", "black coffee", "tokyo rain"]
    out = []
    for i, t in enumerate(texts):
        n = TextNode(id_=f"n{i}", text=t, metadata={"i": i}, embedding=_H.embed_query(t))
        n.relationships = {}
        out.append(n)
    return out


def test_async_mmr_doc_ids_and_reopen(tmp_path: Any) -> None:
    path = str(tmp_path / "li.mnemo")
    vs = MnemoVectorStore(path=path)
    q = _H.embed_query("green tea")

    async def go() -> None:
        assert await vs.async_add(nodes()) == ["n0", "n1", "n2", "n3"]
        res = await vs.aquery(VectorStoreQuery(query_embedding=q, similarity_top_k=2))
        assert res.ids == ["n0", "n1"] and res.nodes[0].text == "green tea"
        await vs.adelete_nodes(["n3"])
        assert [n.node_id for n in await vs.aget_nodes()] == ["n0", "n1", "n2"]

    asyncio.run(go())
    mmr = vs.query(VectorStoreQuery(query_embedding=q, similarity_top_k=2,
                                    mode=VectorStoreQueryMode.MMR), mmr_threshold=0.1)
    assert mmr.ids[0] == "n0" and mmr.ids[1] == "n2"
    none = vs.query(VectorStoreQuery(query_embedding=q, similarity_top_k=3, doc_ids=["nope"]))
    assert none.ids == []
    f = MetadataFilters(filters=[MetadataFilter(key="i", value=[0, 2], operator=FilterOperator.IN)])
    assert vs.query(VectorStoreQuery(query_embedding=q, similarity_top_k=3, filters=f)).ids == ["n0", "n2"]
    vs.client.close()
    again = MnemoVectorStore(path=path)
    assert again.query(VectorStoreQuery(query_embedding=q, similarity_top_k=1)).ids == ["n0"]
    again.clear()
    assert again.get_nodes() == []


def test_nodes_read_back_are_those_pydantic_validates() -> None:
    """Query results and get_nodes give the nodes TextNode.model_validate_json
    gives of the payloads (the same state, nested relationships too), for
    TextNodes made without validation and for the other forms, which go
    through it."""
    from llama_index.core.schema import (ImageNode, IndexNode, NodeRelationship, ObjectType,
                                         RelatedNodeInfo)

    from mnemo.integrations import _common as c
    from mnemo.integrations import llama_index as li

    assert li._FAST_NODES
    src = RelatedNodeInfo(node_id="doc", node_type=ObjectType.DOCUMENT, metadata={"a": [1]},
                          hash="h0")
    nodes = [
        TextNode(id_="plain", text="green tea", metadata={"kind": "tea", "n": 2}),
        TextNode(id_="related", text="tea, then", start_char_idx=0, end_char_idx=9,
                 excluded_embed_metadata_keys=["kind"], metadata={"kind": "tea", "é": None},
                 relationships={NodeRelationship.SOURCE: src,
                                NodeRelationship.PREVIOUS: RelatedNodeInfo(node_id="plain"),
                                NodeRelationship.CHILD: [src]}),
        TextNode(id_="typed", text="x", relationships={
            NodeRelationship.PARENT: RelatedNodeInfo(node_id="p", node_type="custom")}),
        IndexNode(id_="index", text="an index node", index_id="other"),
        ImageNode(id_="image", text="an image", image="aGk=")]
    for n in nodes:
        n.embedding = _H.embed_query(n.get_content())
    vs = MnemoVectorStore()
    vs.add(nodes)
    by_id = {n.id_: n for n in nodes}
    got = vs.query(VectorStoreQuery(query_embedding=_H.embed_query("tea"), similarity_top_k=5))
    assert sorted(got.ids) == sorted(by_id)
    for node in got.nodes + vs.get_nodes(node_ids=list(by_id)):
        payload = by_id[node.id_].model_dump_json(exclude={"embedding"})
        want = type(node).model_validate_json(payload)
        assert li._same_model(want, node), node.id_
    # A TextNode payload of another form (a field more, a field of another
    # type, an unknown relationship) is left to pydantic.
    d = c.loads(nodes[1].model_dump_json(exclude={"embedding"}))
    assert li._text_node(d) is not None
    for change in ({"extra": 1}, {"start_char_idx": "0"}, {"start_char_idx": True},
                   {"excluded_llm_metadata_keys": [1]}, {"relationships": {"9": {}}},
                   {"relationships": {"1": {"node_id": 5}}}, {"text": None}):
        assert li._text_node({**d, **change}) is None


def test_text_node_payloads_told_by_their_end() -> None:
    """A payload ending in TextNode's class name is loaded as the search of
    it for the class name loads it: by _text_node when of the plain form,
    else by pydantic; other classes (their payloads end otherwise), and a
    TextNode mark that is not the payload's last, by the search."""
    import json

    from llama_index.core.schema import IndexNode

    from mnemo.integrations import _common as c
    from mnemo.integrations import llama_index as li

    assert li._RESULT_BY_POSITION  # query results made with the fields by position
    node = TextNode(id_="n", text="tea", metadata={"class_name": "TextNode", "n": 1})
    payload = node.model_dump_json(exclude={"embedding"}).encode()
    assert payload.endswith(li._TEXT_END)
    assert li._same_model(li._load_node(payload), TextNode.model_validate_json(payload))
    # Not of the plain form: a str index, which pydantic converts.
    d = c.loads(payload)
    d["start_char_idx"] = "3"
    d["class_name"] = d.pop("class_name")
    odd = json.dumps(d, separators=(",", ":")).encode()
    assert odd.endswith(li._TEXT_END) and li._text_node(c.loads(odd)) is None
    got = li._load_node(odd)
    assert got.start_char_idx == 3
    assert li._same_model(got, TextNode.model_validate_json(odd))
    # An IndexNode whose metadata holds TextNode's mark: its own class name
    # comes last.
    other = IndexNode(id_="i", text="x", index_id="o", metadata={"class_name": "TextNode"})
    payload = other.model_dump_json(exclude={"embedding"}).encode()
    assert not payload.endswith(li._TEXT_END)
    got = li._load_node(payload)
    assert type(got) is IndexNode
    assert li._same_model(got, IndexNode.model_validate_json(payload))
