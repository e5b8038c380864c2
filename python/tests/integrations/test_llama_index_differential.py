"""MnemoVectorStore (LlamaIndex) against LlamaIndex's SimpleVectorStore on
generated nodes and filters: adds and upserts, delete by document,
delete_nodes by ids and filters, clear, and queries with MetadataFilters
over every operator (EQ NE GT GTE LT LTE IN NIN ANY ALL CONTAINS
TEXT_MATCH TEXT_MATCH_INSENSITIVE IS_EMPTY) under AND, OR and NOT; every
answer compared (ids, and similarities within 1e-5; equal similarities in
any order).

SimpleVectorStore refuses nested MetadataFilters; for those the reference
is its own filter function (build_metadata_filter_fn) applied level by
level with the same AND / OR / NOT rules, and its own query restricted to
the node ids that pass. Generated metadata keeps each field to one type
(SimpleVectorStore compares with Python's operators, which raise between
a str and an int, and hold True == 1 where mnemo keeps kinds apart), and
text operators name string fields (on others SimpleVectorStore raises).
"""

from __future__ import annotations

import math
import random
from typing import Any, Dict, List, Optional

import numpy as np
import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.simple import SimpleVectorStore
from llama_index.core.vector_stores.types import (FilterCondition, FilterOperator, MetadataFilter,
                                                  MetadataFilters, VectorStoreQuery)
from llama_index.core.vector_stores.utils import build_metadata_filter_fn

from mnemo.integrations.llama_index import MnemoVectorStore

DIM = 8
AUTHORS = ["ada", "bob", "cy", "dee"]
WORDS = ["alpha", "beta", "gamma", "delta", "Alpha", "omega"]
EPS = 1e-5


class Gen:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.np = np.random.default_rng(seed)
        self.ids = [f"n{i}" for i in range(40)]
        self.docs = [f"d{i}" for i in range(6)]

    def metadata(self) -> Dict[str, Any]:
        r = self.r
        m: Dict[str, Any] = {}
        if r.random() < 0.8:
            m["author"] = r.choice(AUTHORS + [None]) if r.random() < 0.9 else ""
        if r.random() < 0.8:
            m["year"] = r.randint(2000, 2010)
        if r.random() < 0.7:
            m["score"] = round(r.uniform(0, 1), 2)
        if r.random() < 0.6:
            m["tags"] = r.sample(WORDS, r.randint(0, 3))
        if r.random() < 0.7:
            m["title"] = " ".join(r.sample(WORDS, r.randint(1, 3)))
        if r.random() < 0.3:
            m["note"] = r.choice([None, "", "x"])
        return m

    def node(self) -> TextNode:
        r = self.r
        emb = self.np.standard_normal(DIM).round(3).tolist()
        rel = {}
        if r.random() < 0.85:
            rel[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=r.choice(self.docs))
        return TextNode(id_=r.choice(self.ids), text=" ".join(r.sample(WORDS, 2)),
                        metadata=self.metadata(), embedding=emb, relationships=rel)

    def leaf(self) -> MetadataFilter:
        r = self.r
        pick = r.randrange(13)
        if pick == 0:
            return MetadataFilter(key="author", value=r.choice(AUTHORS),
                                  operator=r.choice([FilterOperator.EQ, FilterOperator.NE]))
        if pick == 1:
            return MetadataFilter(key="year", value=r.randint(2000, 2010),
                                  operator=r.choice([FilterOperator.GT, FilterOperator.GTE,
                                                     FilterOperator.LT, FilterOperator.LTE,
                                                     FilterOperator.EQ, FilterOperator.NE]))
        if pick == 2:
            return MetadataFilter(key="score", value=round(r.uniform(0, 1), 2),
                                  operator=r.choice([FilterOperator.GT, FilterOperator.LTE]))
        if pick == 3:
            return MetadataFilter(key="author", value=r.sample(AUTHORS, r.randint(1, 3)),
                                  operator=r.choice([FilterOperator.IN, FilterOperator.NIN]))
        if pick == 4:
            return MetadataFilter(key="year", value=[r.randint(2000, 2010) for _ in range(3)],
                                  operator=r.choice([FilterOperator.IN, FilterOperator.NIN]))
        if pick == 5:
            return MetadataFilter(key=r.choice(["tags", "title"]),
                                  value=r.sample(WORDS, r.randint(1, 2)),
                                  operator=r.choice([FilterOperator.ANY, FilterOperator.ALL]))
        if pick == 6:
            return MetadataFilter(key=r.choice(["tags", "title"]), value=r.choice(WORDS),
                                  operator=FilterOperator.CONTAINS)
        if pick == 7:
            return MetadataFilter(key=r.choice(["title", "author"]),
                                  value=r.choice(["alp", "eta", "a", "mega", "ALPHA", "d"]),
                                  operator=r.choice([FilterOperator.TEXT_MATCH,
                                                     FilterOperator.TEXT_MATCH_INSENSITIVE]))
        if pick == 8:
            return MetadataFilter(key=r.choice(["author", "tags", "note", "title"]), value=None,
                                  operator=FilterOperator.IS_EMPTY)
        if pick == 9:
            return MetadataFilter(key="author", value=r.choice(AUTHORS),
                                  operator=r.choice([FilterOperator.GT, FilterOperator.LTE]))
        if pick == 10:
            return MetadataFilter(key=r.choice(["ref_doc_id", "doc_id", "document_id"]),
                                  value=r.choice(self.docs + ["None"]),
                                  operator=r.choice([FilterOperator.EQ, FilterOperator.NE]))
        if pick == 11:
            return MetadataFilter(key="tags", value=r.sample(WORDS, r.randint(0, 2)),
                                  operator=FilterOperator.EQ)
        return MetadataFilter(key="_node_type", value="TextNode",
                              operator=r.choice([FilterOperator.EQ, FilterOperator.NE]))

    def filters(self, depth: int = 0, nested: bool = False) -> Optional[MetadataFilters]:
        r = self.r
        if depth == 0 and r.random() < 0.15:
            return None
        parts: List[Any] = []
        for _ in range(r.choice([1, 1, 2, 3])):
            if nested and depth < 2 and r.random() < 0.3:
                parts.append(self.filters(depth + 1, nested))
            else:
                parts.append(self.leaf())
        cond = r.choice([FilterCondition.AND, FilterCondition.OR, FilterCondition.NOT])
        return MetadataFilters(filters=parts, condition=cond)


def ref_match(md: Dict[str, Any], f: Optional[MetadataFilters]) -> bool:
    """SimpleVectorStore's filter semantics, level by level (it refuses
    nested MetadataFilters itself)."""
    if f is None or not f.filters:
        return True
    results = []
    for sub in f.filters:
        if isinstance(sub, MetadataFilters):
            results.append(ref_match(md, sub))
        else:
            results.append(build_metadata_filter_fn(lambda _: md, MetadataFilters(
                filters=[sub]))("x"))
    cond = f.condition or FilterCondition.AND
    if cond == FilterCondition.AND:
        return all(results)
    if cond == FilterCondition.OR:
        return any(results)
    return not any(results)


def nested(f: Optional[MetadataFilters]) -> bool:
    return f is not None and any(isinstance(x, MetadataFilters) for x in f.filters)


def reference_query(ref: SimpleVectorStore, q: List[float], f: Optional[MetadataFilters],
                    node_ids: Optional[List[str]]) -> Any:
    """The reference's whole ranking for a query (every node that passes)."""
    if nested(f):
        passing = [i for i, md in ref.data.metadata_dict.items() if ref_match(md, f)]
        if node_ids is not None:
            passing = [i for i in passing if i in set(node_ids)]
        return ref.query(VectorStoreQuery(query_embedding=q, similarity_top_k=10**6,
                                          node_ids=passing))
    return ref.query(VectorStoreQuery(query_embedding=q, similarity_top_k=10**6, filters=f,
                                      node_ids=node_ids))


def check_query(res: Any, full: Any, k: int, nodes: Dict[str, TextNode]) -> None:
    window_ids, window_sims = full.ids[:k], full.similarities[:k]
    assert len(res.ids) == len(window_ids), (res.ids, window_ids)
    assert len(set(res.ids)) == len(res.ids)
    sim_of = dict(zip(full.ids, full.similarities))
    for i, s, want in zip(res.ids, res.similarities, window_sims):
        assert math.isclose(s, want, abs_tol=EPS), (s, want)
        assert i in sim_of and math.isclose(s, sim_of[i], abs_tol=EPS), (i, s, sim_of.get(i))
    for node, i in zip(res.nodes, res.ids):
        want = nodes[i]
        assert node.node_id == i and node.text == want.text and node.metadata == want.metadata
        assert node.ref_doc_id == want.ref_doc_id


def check_same_nodes(ours: MnemoVectorStore, ref: SimpleVectorStore,
                     nodes: Dict[str, TextNode]) -> None:
    assert set(ref.data.embedding_dict) == set(nodes)
    got = ours.get_nodes()
    assert sorted(n.node_id for n in got) == sorted(nodes)
    for n in got:
        assert n.text == nodes[n.node_id].text and n.metadata == nodes[n.node_id].metadata


def run_sequence(seed: int, steps: int) -> Dict[str, int]:
    g = Gen(seed)
    ref, ours = SimpleVectorStore(), MnemoVectorStore()
    nodes: Dict[str, TextNode] = {}
    counts: Dict[str, int] = {}

    def count(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    while counts.get("ops", 0) < steps:
        counts["ops"] = counts.get("ops", 0) + 1
        x = g.r.random()
        if x < 0.3 or len(nodes) < 5:
            batch = [g.node() for _ in range(g.r.randint(1, 6))]
            if g.r.random() < 0.1 and nodes:
                # A copy of a stored embedding: equal similarities.
                batch[0].embedding = list(ref.data.embedding_dict[g.r.choice(list(nodes))])
            assert ours.add(batch) == ref.add(batch)
            for n in batch:
                nodes[n.node_id] = n
            count("add")
        elif x < 0.35:
            doc = g.r.choice(g.docs + ["None"])
            ref.delete(doc)
            ours.delete(doc)
            for i in [i for i, n in nodes.items() if (n.ref_doc_id or "None") == doc]:
                del nodes[i]
            count("delete")
        elif x < 0.42:
            ids = g.r.sample(g.ids, g.r.randint(0, 5)) if g.r.random() < 0.7 else None
            f = g.filters()
            if ids is None and f is None:
                f = MetadataFilters(filters=[g.leaf()])
            ref.delete_nodes(ids, f)
            ours.delete_nodes(ids, f)
            for i in [i for i in nodes if i not in ref.data.embedding_dict]:
                del nodes[i]
            count("delete_nodes")
        elif x < 0.425:
            ref.clear()
            ours.clear()
            nodes.clear()
            count("clear")
        elif x < 0.5:
            f = g.filters(nested=g.r.random() < 0.5)
            ids = g.r.sample(g.ids, g.r.randint(1, 8)) if g.r.random() < 0.5 else None
            want = [i for i in (ids if ids is not None else sorted(nodes))
                    if i in nodes and ref_match(ref.data.metadata_dict[i], f)]
            got = ours.get_nodes(ids, f)
            if ids is None:
                assert sorted(n.node_id for n in got) == sorted(want)
            else:
                assert [n.node_id for n in got] == list(dict.fromkeys(want))
            count("get_nodes")
        else:
            q = g.np.standard_normal(DIM).round(3).tolist()
            k = g.r.choice([1, 2, 4, 10, 50])
            f = g.filters(nested=g.r.random() < 0.3)
            node_ids = g.r.sample(g.ids, g.r.randint(1, 20)) if g.r.random() < 0.15 else None
            full = reference_query(ref, q, f, node_ids)
            if not nested(f) and node_ids is None:
                # Flat filters: the reference's own answer for k as well.
                direct = ref.query(VectorStoreQuery(query_embedding=q, similarity_top_k=k,
                                                    filters=f))
                assert [round(s, 9) for s in direct.similarities] == \
                    [round(s, 9) for s in full.similarities[:k]]
            res = ours.query(VectorStoreQuery(query_embedding=q, similarity_top_k=k, filters=f,
                                              node_ids=node_ids))
            check_query(res, full, k, nodes)
            count("query_nested" if nested(f) else "query")
            counts["results"] = counts.get("results", 0) + len(res.ids)
        if g.r.random() < 0.03:
            check_same_nodes(ours, ref, nodes)
    check_same_nodes(ours, ref, nodes)
    return counts


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_against_simple_vector_store(seed: int) -> None:
    counts = run_sequence(seed, 1000)
    assert counts["ops"] >= 1000 and counts["query"] > 150 and counts["query_nested"] > 30


def test_text_match_with_many_candidates() -> None:
    """A substring filter over more candidates than are read at once
    (4,096): growing searches still return min(k, matches)."""
    rng = np.random.default_rng(5)
    nodes = [TextNode(id_=f"n{i}", text="t", embedding=rng.standard_normal(DIM).tolist(),
                      metadata={"title": "needle here" if i % 500 == 0 else "hay"})
             for i in range(6000)]
    ours, ref = MnemoVectorStore(), SimpleVectorStore()
    ours.add(nodes)
    ref.add(nodes)
    f = MetadataFilters(filters=[MetadataFilter(key="title", value="needle",
                                                operator=FilterOperator.TEXT_MATCH)])
    q = rng.standard_normal(DIM).tolist()
    for k in (1, 5, 12, 20):
        res = ours.query(VectorStoreQuery(query_embedding=q, similarity_top_k=k, filters=f))
        full = ref.query(VectorStoreQuery(query_embedding=q, similarity_top_k=k, filters=f))
        assert res.ids == full.ids and len(res.ids) == min(k, 12)
