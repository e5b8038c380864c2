"""MnemoVectorStore beyond the standard suite: its dictionary filters
(against LangChain's InMemoryVectorStore given a Python function with the
semantics docs/integrations.md states), that they run inside the search
(k results where a post-filter would find fewer), metadata round trips,
namespaces, MMR, relevance scores, retrievers and the async forms."""

from __future__ import annotations

import asyncio
import math
import random
from typing import Any, Callable, Dict, Optional

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore

from .hash_embeddings import HashEmbeddings
from mnemo.integrations.langchain import MnemoVectorStore

WORDS = ["tea", "coffee", "rain", "sun", "tokyo", "paris", "cat", "dog"]
SOURCES = ["web", "pdf", "notes", "mail"]


def kind(v: Any) -> str:
    return "b" if isinstance(v, bool) else ("s" if isinstance(v, str) else "n")


def scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool))


def same(a: Any, b: Any) -> bool:
    return scalar(a) and scalar(b) and kind(a) == kind(b) and a == b


def field_test(name: str, cond: Any) -> Callable[[Dict[str, Any]], bool]:
    """The documented meaning of one field's condition."""
    def present(md: Dict[str, Any]) -> bool:
        return md.get(name) is not None

    if not isinstance(cond, dict):
        if cond is None:
            return lambda md: not present(md)
        return lambda md: same(md.get(name), cond)
    tests = []
    for op, v in cond.items():
        if op == "$eq":
            tests.append(lambda md, v=v: same(md.get(name), v))
        elif op == "$ne":
            tests.append(lambda md, v=v: scalar(md.get(name)) and not same(md.get(name), v))
        elif op in ("$lt", "$lte", "$gt", "$gte"):
            cmp = {"$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b,
                   "$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b}[op]
            tests.append(lambda md, v=v, cmp=cmp: scalar(md.get(name)) and kind(md[name]) == kind(v)
                         and kind(v) != "b" and cmp(md[name], v))
        elif op == "$in":
            tests.append(lambda md, v=v: any(same(md.get(name), x) for x in v))
        elif op == "$nin":
            tests.append(lambda md, v=v: scalar(md.get(name))
                         and not any(same(md.get(name), x) for x in v))
        elif op == "$between":
            tests.append(lambda md, v=v: scalar(md.get(name)) and kind(md[name]) == kind(v[0])
                         and v[0] <= md[name] <= v[1])
        elif op == "$exists":
            tests.append(lambda md, v=v: present(md) == v)
        elif op == "$contains":
            tests.append(lambda md, v=v: isinstance(md.get(name), list)
                         and any(same(x, v) for x in md[name]))
        else:
            raise AssertionError(op)
    return lambda md: all(t(md) for t in tests)


def reference(f: Optional[Dict[str, Any]]) -> Callable[[Dict[str, Any]], bool]:
    if f is None:
        return lambda md: True
    tests = []
    for key, cond in f.items():
        if key == "$and":
            subs = [reference(x) for x in cond]
            tests.append(lambda md, subs=subs: all(s(md) for s in subs))
        elif key == "$or":
            subs = [reference(x) for x in cond]
            tests.append(lambda md, subs=subs: any(s(md) for s in subs))
        elif key == "$not":
            sub = reference(cond)
            tests.append(lambda md, sub=sub: not sub(md))
        else:
            tests.append(field_test(key, cond))
    return lambda md: all(t(md) for t in tests)


class Gen:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def metadata(self) -> Dict[str, Any]:
        r = self.r
        md: Dict[str, Any] = {}
        if r.random() < 0.85:
            md["source"] = r.choice(SOURCES)
        if r.random() < 0.8:
            md["year"] = r.randint(2015, 2025)
        if r.random() < 0.6:
            md["rating"] = round(r.uniform(0, 5), 1)
        if r.random() < 0.4:
            md["public"] = r.random() < 0.5
        if r.random() < 0.5:
            md["tags"] = r.sample(WORDS, r.randint(0, 3))
        if r.random() < 0.2:
            md["extra"] = r.choice([None, {"a": 1}, [1, 2], "x"])
        return md

    def field(self) -> Dict[str, Any]:
        r = self.r
        pick = r.randrange(12)
        if pick == 0:
            return {"source": r.choice(SOURCES)}
        if pick == 1:
            return {"source": {r.choice(["$eq", "$ne"]): r.choice(SOURCES)}}
        if pick == 2:
            return {"year": {r.choice(["$lt", "$lte", "$gt", "$gte"]): r.randint(2015, 2025)}}
        if pick == 3:
            return {"year": {"$between": sorted([r.randint(2015, 2025), r.randint(2015, 2025)])}}
        if pick == 4:
            return {"source": {r.choice(["$in", "$nin"]): r.sample(SOURCES, r.randint(0, 3))}}
        if pick == 5:
            return {"rating": {r.choice(["$gt", "$lte"]): round(r.uniform(0, 5), 1)}}
        if pick == 6:
            return {"public": r.random() < 0.5}
        if pick == 7:
            return {r.choice(["extra", "tags", "rating"]): {"$exists": r.random() < 0.5}}
        if pick == 8:
            return {"tags": {"$contains": r.choice(WORDS)}}
        if pick == 9:
            return {"year": r.randint(2015, 2025)}
        if pick == 10:
            return {"extra": None}
        return {"year": {"$gte": 2018, "$lt": r.randint(2019, 2026)}}

    def filter(self, depth: int = 0) -> Optional[Dict[str, Any]]:
        r = self.r
        if depth == 0 and r.random() < 0.1:
            return None
        x = r.random()
        if depth < 2 and x < 0.15:
            return {"$or": [self.filter(depth + 1) or {} for _ in range(r.randint(1, 3))]}
        if depth < 2 and x < 0.25:
            return {"$and": [self.filter(depth + 1) or {} for _ in range(r.randint(1, 3))]}
        if depth < 2 and x < 0.32:
            return {"$not": self.filter(depth + 1) or {}}
        f: Dict[str, Any] = {}
        for _ in range(r.choice([1, 1, 2])):
            f.update(self.field())
        return f


def test_filters_match_their_documented_meaning() -> None:
    g = Gen(21)
    emb = DeterministicFakeEmbedding(size=16)
    texts = [" ".join(g.r.sample(WORDS, 3)) + f" {i}" for i in range(400)]
    metas = [g.metadata() for _ in texts]
    ids = [f"d{i}" for i in range(len(texts))]
    ours = MnemoVectorStore(embedding=emb)
    ref = InMemoryVectorStore(embedding=emb)
    ours.add_texts(texts, metas, ids=ids)
    ref.add_texts(texts, metas, ids=ids)
    checked = nonempty = 0
    for _ in range(400):
        f = g.filter()
        q = emb.embed_query(g.r.choice(WORDS))
        k = g.r.choice([1, 4, 10, 1000])
        test = reference(f)
        want = ref.similarity_search_with_score_by_vector(q, k, filter=lambda d: test(d.metadata))
        got = ours.similarity_search_with_score_by_vector(q, k, filter=f)
        assert len(got) == len(want), (f, len(got), len(want))
        score_of = {d.id: s for d, s in ref.similarity_search_with_score_by_vector(
            q, 1000, filter=lambda d: test(d.metadata))}
        for (d, s), (_, ws) in zip(got, want):
            assert math.isclose(s, ws, abs_tol=1e-5) and math.isclose(s, score_of[d.id],
                                                                        abs_tol=1e-5)
            assert d.metadata == metas[int(d.id[1:])] and d.page_content == texts[int(d.id[1:])]
        checked += 1
        nonempty += bool(got)
    assert checked == 400 and nonempty > 250


def test_filter_runs_in_the_store() -> None:
    """One document in 1,000 matches: a search that filtered its results
    afterwards would find none of the k = 4 best; the store finds all."""
    emb = DeterministicFakeEmbedding(size=16)
    vs = MnemoVectorStore(embedding=emb)
    texts = [f"text {i}" for i in range(4000)]
    vs.add_texts(texts, [{"rare": i % 1000 == 0} for i in range(4000)])
    got = vs.similarity_search("text 1", k=4, filter={"rare": True})
    assert sorted(d.page_content for d in got) == ["text 0", "text 1000", "text 2000", "text 3000"]
    with pytest.raises(TypeError):
        vs.similarity_search("x", filter=lambda d: True)
    with pytest.raises(ValueError):
        vs.similarity_search("x", filter={"year": {"$regex": "x"}})


def test_metadata_round_trip_and_upsert() -> None:
    vs = MnemoVectorStore(embedding=DeterministicFakeEmbedding(size=8))
    md = {"n": 1, "f": 1.0, "b": True, "s": "é", "none": None, "list": [1, "a", None],
          "obj": {"x": [1, {"y": 2}]}, "big": 2**70, "long": "x" * 5000}
    vs.add_texts(["hello"], [md], ids=["a"])
    (doc,) = vs.get_by_ids(["a"])
    assert doc.metadata == md and type(doc.metadata["f"]) is float
    assert vs.similarity_search("hello", k=1, filter={"long": {"$exists": True}}) == []
    vs.add_texts(["bye"], [{"n": 2}], ids=["a"])
    assert vs.get_by_ids(["a"])[0].metadata == {"n": 2}
    assert vs.similarity_search("bye", k=5, filter={"b": True}) == []   # old fields gone
    assert vs.store.count() == 1


def test_namespaces_keep_stores_apart() -> None:
    emb = DeterministicFakeEmbedding(size=8)
    a = MnemoVectorStore(embedding=emb, namespace=("tenant", "a"))
    a.add_texts(["x"], ids=["same"])
    b = MnemoVectorStore(embedding=emb, store=a.store, namespace=("tenant", "b"))
    b.add_texts(["y"], ids=["same"])
    assert a.get_by_ids(["same"])[0].page_content == "x"
    assert b.get_by_ids(["same"])[0].page_content == "y"
    assert [d.page_content for d in a.similarity_search("y", k=10)] == ["x"]
    b.delete()
    assert b.similarity_search("y", k=10) == [] and a.store.count() == 1


def test_mmr_relevance_retriever_and_async() -> None:
    emb = HashEmbeddings(32)
    vs = MnemoVectorStore.from_texts(
        ["green tea", "green tea leaves", "black coffee", "tokyo rain"], emb,
        [{"i": i} for i in range(4)], ids=["a", "b", "c", "d"])
    sim = [d.id for d in vs.similarity_search("green tea", k=2)]
    assert sim == ["a", "b"]
    mmr = [d.id for d in vs.max_marginal_relevance_search("green tea", k=2, fetch_k=4,
                                                          lambda_mult=0.1)]
    assert mmr[0] == "a" and mmr[1] != "b"
    rel = vs.similarity_search_with_relevance_scores("green tea", k=4)
    assert rel[0][1] == pytest.approx(1.0, abs=1e-5) and all(0 <= s <= 1 for _, s in rel)
    retriever = vs.as_retriever(search_kwargs={"k": 1, "filter": {"i": {"$gte": 2}}})
    assert [d.id for d in retriever.invoke("tokyo rain")] == ["d"]

    async def go() -> None:
        assert [d.id for d in await vs.asimilarity_search("black coffee", k=1)] == ["c"]
        assert [d.id for d in await vs.amax_marginal_relevance_search("black coffee", k=1)] == ["c"]
        assert [d.id for d in await retriever.ainvoke("tokyo rain")] == ["d"]
        await vs.adelete(["d"])
        assert await vs.aget_by_ids(["d"]) == []
        other = await MnemoVectorStore.afrom_texts(["x"], emb)
        assert len(await other.asimilarity_search_with_score("x", k=3)) == 1

    asyncio.run(go())


def test_vectors_given_and_durable(tmp_path: Any) -> None:
    path = str(tmp_path / "lc.mnemo")
    vs = MnemoVectorStore(embedding=DeterministicFakeEmbedding(size=8), path=path)
    vecs = np.eye(8, dtype=np.float32)[:3]
    assert vs.add_embeddings(["a", "b", "c"], vecs, [{"k": i} for i in range(3)],
                             ids=["1", "2", "3"]) == ["1", "2", "3"]
    vs.store.close()
    again = MnemoVectorStore(embedding=DeterministicFakeEmbedding(size=8), path=path)
    got = again.similarity_search_by_vector(vecs[1].tolist(), k=1, filter={"k": 1})
    assert [(d.id, d.page_content) for d in got] == [("2", "b")]
    again.add_embeddings(["d"], vecs[:1], ids=["4"])
    assert again.store.count() == 4


def test_documents_read_back_are_the_constructors() -> None:
    from langchain_core.documents import Document
    import mnemo.integrations.langchain as lc
    assert lc._CONSTRUCTED  # the pinned langchain-core: searches make Documents without validation
    vs = MnemoVectorStore(embedding=DeterministicFakeEmbedding(size=8))
    md = {"n": 1, "s": "é", "list": [1, "a", None], "obj": {"x": 1.5}}
    vs.add_texts(["hello", "bye"], [md, {}], ids=["a", "b"])
    for doc, _ in vs.similarity_search_with_score("hello", k=2):
        made = Document(id=doc.id, page_content=doc.page_content, metadata=doc.metadata)
        assert doc == made and repr(doc) == repr(made)
        assert list(doc.__dict__.items()) == list(made.__dict__.items())
        assert doc.model_fields_set == made.model_fields_set
        assert doc.model_dump_json() == made.model_dump_json()
        assert doc.to_json() == made.to_json()
    # What validation would refuse or change still goes through the constructor.
    with pytest.raises(ValueError):
        lc._document("a", 5, {})
    assert lc._document(None, "t", {}) == Document(id=None, page_content="t", metadata={})
