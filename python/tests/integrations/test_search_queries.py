"""Query embeddings in every form the adapters take, now that an exact
float32 [dim] numpy array goes to the extension without as_query first:
each form gives the results as_query's array gives, and what as_query
refuses is refused as before."""

from __future__ import annotations

from typing import Any, List

import numpy as np
import pytest

from mnemo.errors import MnemoError
from mnemo.integrations import _common as c
from mnemo.integrations.langchain import MnemoVectorStore
from mnemo.integrations.langgraph import MnemoStore

from .hash_embeddings import HashEmbeddings

DIM = 16
_H = HashEmbeddings(DIM)


def forms(v: List[float]) -> List[Any]:
    """The query as a list, float32 (aligned and not, strided, a subclass)
    and float64 arrays."""
    q = np.asarray(v, dtype=np.float32)
    raw = np.zeros(DIM + 1, dtype=np.float32)
    offset = raw[1:] if raw.ctypes.data % 16 == 0 else raw[:DIM]
    offset[:] = q
    assert offset.ctypes.data % 16 != 0
    wide = np.zeros(2 * DIM, dtype=np.float32)
    wide[::2] = q
    sub = q.view(type("Sub", (np.ndarray,), {}))
    return [list(v), q, offset, wide[::2], sub, q.astype(np.float64)]


def test_run_search_takes_every_form_as_as_query_gives_it() -> None:
    vs = MnemoVectorStore(_H)
    words = ["tea", "coffee", "rain", "sun", "tokyo", "paris", "cat", "dog"]
    vs.add_texts(words, metadatas=[{"n": i % 3} for i in range(len(words))])
    store = vs.store
    assert store is not None
    plans = [c.Plan.exact(None), vs._plan({"n": 1}), c.Plan(None, c.substring("x", "a"))]
    for word in ("tea", "dog"):
        v = _H.embed_query(word)
        for plan in plans:
            want = c.run_search(store, c.as_query(v), 3, plan)
            for q in forms(v):
                assert c.run_search(store, q, 3, plan) == want
            assert c.run_search(store, c.as_query(v), 3, plan, False) == \
                [(i, s, None) for i, s, _ in want]
        docs = vs.similarity_search_with_score_by_vector(v, k=3, filter={"n": 1})
        for q in forms(v):
            assert vs.similarity_search_with_score_by_vector(q, k=3, filter={"n": 1}) == docs


def test_lists_the_extension_declines_convert_as_before() -> None:
    vs = MnemoVectorStore(_H)
    vs.add_texts(["tea", "coffee", "rain", "sun"])
    store = vs.store
    assert store is not None
    v = _H.embed_query("rain")
    w: List[Any] = list(v)
    w[3] = 1  # an int among the floats: numpy converts the list instead
    want = c.run_search(store, c.as_query([float(x) for x in w]), 3, c.Plan.exact(None))
    assert c.run_search(store, w, 3, c.Plan.exact(None)) == want
    assert c.run_search(store, np.asarray(w, dtype=np.float32), 3, c.Plan.exact(None)) == want
    with pytest.raises(MnemoError):
        c.run_search(store, list(v)[:-1], 3, c.Plan.exact(None))
    with pytest.raises(MnemoError):
        c.run_search(store, [float("nan")] * DIM, 3, c.Plan.exact(None))


def test_queries_refused_as_before() -> None:
    vs = MnemoVectorStore(_H)
    vs.add_texts(["tea", "coffee"])
    v = np.asarray(_H.embed_query("tea"), dtype=np.float32)
    with pytest.raises(ValueError, match="one embedding"):
        vs.similarity_search_by_vector(v.reshape(1, DIM))
    with pytest.raises(MnemoError):
        vs.similarity_search_by_vector(v[:8])
    with pytest.raises(MnemoError):
        vs.similarity_search_by_vector(np.full(DIM, np.nan, dtype=np.float32))


class _Fixed:
    """Embeddings returning one given vector for any query."""

    def __init__(self, vector: Any) -> None:
        self.vector = vector

    def embed_query(self, text: str) -> Any:
        return self.vector

    def embed_documents(self, texts: List[str]) -> List[List[float]]:
        return [_H.embed_query(t) for t in texts]


def test_langgraph_search_takes_every_form() -> None:
    store = MnemoStore(index={"dims": DIM, "embed": _H, "fields": ["text"]})
    for i, word in enumerate(["tea", "coffee", "rain", "sun", "tokyo"]):
        store.put(("d",), word, {"text": word, "n": i % 2})
    v = _H.embed_query("tea")
    want = [(i.key, i.score) for i in store.search(("d",), query="tea", filter={"n": 0}, limit=3)]
    for q in forms(v):
        store.embeddings = _Fixed(q)
        got = store.search(("d",), query="tea", filter={"n": 0}, limit=3)
        assert [(i.key, i.score) for i in got] == want
    store.embeddings = _Fixed(np.asarray(v, dtype=np.float32).reshape(1, DIM))
    with pytest.raises(ValueError, match="one embedding"):
        store.search(("d",), query="tea")
