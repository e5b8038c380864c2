"""mem0's Memory on the "mnemo" provider, offline: a local deterministic
embedder (mem0's "langchain" embedder with HashEmbeddings), a fake chat
model that is never asked (infer=False), memories scoped by user_id,
agent_id and run_id. The isolation test writes memories with every
combination of present and absent scope fields and checks that no
search, listing or deletion scoped by one reaches a memory outside it."""

from __future__ import annotations

import itertools
import random
from typing import Any, Dict, List

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from mem0 import Memory

from .hash_embeddings import HashEmbeddings
import mnemo.integrations.mem0 as provider
from mnemo.integrations.mem0 import MnemoVectorStore

DIM = 64
WORDS = ["tea", "coffee", "rain", "tokyo", "paris", "cats", "dogs", "jazz", "chess", "bikes"]


def memory(tmp_path: Any, name: str = "mem0", path: bool = True) -> Memory:
    return Memory.from_config({
        "vector_store": {"provider": "mnemo", "config": {
            "collection_name": name, "embedding_model_dims": DIM,
            "path": str(tmp_path / "mem0.mnemo") if path else None,
            "store_name": str(tmp_path)}},
        "embedder": {"provider": "langchain", "config": {"model": HashEmbeddings(DIM)}},
        "llm": {"provider": "langchain", "config": {"model": FakeListChatModel(responses=["{}"])}},
        "history_db_path": str(tmp_path / "history.db"),
    })


SCOPES = [dict(zip(("user_id", "agent_id", "run_id"), combo)) for combo in
          itertools.product(["u1", "u2", None], ["a1", "a2", None], ["r1", "r2", None])]
SCOPES = [{k: v for k, v in s.items() if v} for s in SCOPES]
SCOPES = [s for s in SCOPES if s]


@pytest.fixture()
def filled(tmp_path: Any) -> Any:
    m = memory(tmp_path)
    rng = random.Random(7)
    written: List[Dict[str, Any]] = []
    for i in range(120):
        scope = rng.choice(SCOPES)
        text = f"memory {i} about " + " ".join(rng.sample(WORDS, 2))
        out = m.add(text, infer=False, metadata={"n": i, "topic": rng.choice(WORDS)}, **scope)
        (added,) = out["results"]
        written.append({"id": added["id"], "text": text, "n": i, **scope})
    return m, written


def inside(w: Dict[str, Any], scope: Dict[str, str]) -> bool:
    return all(w.get(k) == v for k, v in scope.items())


def test_isolation_by_scope(filled: Any) -> None:
    m, written = filled
    searches = 0
    for scope in [{"user_id": "u1"}, {"user_id": "u2"}, {"agent_id": "a1"}, {"run_id": "r2"},
                  {"user_id": "u1", "agent_id": "a2"}, {"user_id": "u2", "run_id": "r1"},
                  {"agent_id": "a2", "run_id": "r1"}, {"user_id": "u1", "agent_id": "a1",
                                                       "run_id": "r1"}]:
        want = {w["id"] for w in written if inside(w, scope)}
        for query in ["tea", "rain paris", "memory about chess", "nothing alike"]:
            found = m.search(query, filters=dict(scope), top_k=200, threshold=0.0)["results"]
            ids = {r["id"] for r in found}
            assert ids <= want, (scope, ids - want)
            searches += 1
            for r in found:
                for k, v in scope.items():
                    assert r[k] == v
        # Every memory in scope is reachable (all cosines are >= 0 here).
        found = m.search("memory", filters=dict(scope), top_k=200, threshold=0.0)["results"]
        assert {r["id"] for r in found} == want
        listed = m.get_all(filters=dict(scope), top_k=1000)["results"]
        assert {r["id"] for r in listed} == want
    assert searches == 32
    # A scope nobody has: nothing, whatever the memories lack.
    assert m.search("tea", filters={"user_id": "u9"}, top_k=50, threshold=0.0)["results"] == []
    assert m.get_all(filters={"agent_id": "a9"})["results"] == []


def test_delete_all_stays_in_scope(filled: Any) -> None:
    m, written = filled
    m.delete_all(user_id="u1", agent_id="a1")
    left = {r["id"] for r in m.get_all(filters={"user_id": "u1"}, top_k=1000)["results"]}
    assert left == {w["id"] for w in written if w.get("user_id") == "u1" and w.get("agent_id") != "a1"}
    for scope in ({"user_id": "u2"}, {"agent_id": "a1"}, {"run_id": "r1"}):
        got = {r["id"] for r in m.get_all(filters=scope, top_k=1000)["results"]}
        assert got == {w["id"] for w in written if inside(w, scope)
                       and not (w.get("user_id") == "u1" and w.get("agent_id") == "a1")}


def test_metadata_filters_in_the_store(filled: Any) -> None:
    m, written = filled

    def ids(filters: Dict[str, Any]) -> set:
        return {r["id"] for r in m.search("memory", filters=filters, top_k=200,
                                          threshold=0.0)["results"]}

    def want(pred: Any) -> set:
        return {w["id"] for w in written if w.get("user_id") == "u1" and pred(w)}

    base = {"user_id": "u1"}
    assert ids({**base, "n": {"gte": 60}}) == want(lambda w: w["n"] >= 60)
    assert ids({**base, "n": {"in": [1, 2, 3, 50, 51]}}) == want(lambda w: w["n"] in (1, 2, 3, 50, 51))
    assert ids({**base, "n": {"ne": 5}}) == want(lambda w: w["n"] != 5)
    assert ids({**base, "agent_id": "*"}) == want(lambda w: "agent_id" in w)
    assert ids({**base, "OR": [{"agent_id": "a1"}, {"run_id": "r2"}]}) == \
        want(lambda w: w.get("agent_id") == "a1" or w.get("run_id") == "r2")
    assert ids({**base, "NOT": [{"agent_id": "a1"}]}) == want(lambda w: w.get("agent_id") != "a1")
    assert ids({**base, "AND": [{"n": {"gt": 10}}, {"n": {"lt": 40}}]}) == \
        want(lambda w: 10 < w["n"] < 40)


def test_get_update_delete_history(tmp_path: Any) -> None:
    m = memory(tmp_path)
    (a,) = m.add("I like green tea", user_id="alice", infer=False)["results"]
    got = m.get(a["id"])
    assert got["memory"] == "I like green tea" and got["user_id"] == "alice"
    m.update(a["id"], "I like black coffee")
    assert m.get(a["id"])["memory"] == "I like black coffee"
    top = m.search("I like black coffee", filters={"user_id": "alice"}, threshold=0.0)["results"][0]
    assert top["id"] == a["id"] and top["score"] == pytest.approx(1.0, abs=1e-5)
    assert [h["event"] for h in m.history(a["id"])] == ["ADD", "UPDATE"]
    m.delete(a["id"])
    assert m.get(a["id"]) is None
    assert m.get_all(filters={"user_id": "alice"})["results"] == []


def test_durable_collection_reopens(tmp_path: Any) -> None:
    m = memory(tmp_path)
    m.add("remember the jazz concert", user_id="bob", infer=False)
    # Closed and forgotten by the provider: the next Memory opens the file anew.
    path = str(tmp_path / "mem0.mnemo")
    for key in [k for k in provider._stores if k[0] == "path:" + path]:
        provider._stores.pop(key).store.close()
    again = memory(tmp_path)
    assert [r["memory"] for r in again.get_all(filters={"user_id": "bob"})["results"]] == \
        ["remember the jazz concert"]


def test_provider_directly(tmp_path: Any) -> None:
    vs = MnemoVectorStore(collection_name="c1", embedding_model_dims=4,
                          store_name=f"direct-{tmp_path}")
    other = MnemoVectorStore(collection_name="c2", embedding_model_dims=4,
                             store_name=f"direct-{tmp_path}")
    vs.insert([[1, 0, 0, 0], [0, 1, 0, 0]], [{"data": "x", "user_id": "u", "k": 1},
                                             {"data": "y", "user_id": "v", "k": 2}], ["i1", "i2"])
    other.insert([[1, 0, 0, 0]], [{"data": "z", "user_id": "u"}], ["i1"])
    assert sorted(vs.list_cols()) == ["c1", "c2"]
    hits = vs.search("q", [1, 0, 0, 0], top_k=5, filters={"user_id": "u"})
    assert [(h.id, h.payload["data"]) for h in hits] == [("i1", "x")]
    assert vs.get("i2").payload == {"data": "y", "user_id": "v", "k": 2}
    vs.update("i2", payload={"data": "y2", "user_id": "u", "k": 3})
    assert [h.id for h in vs.search("q", [0, 1, 0, 0], top_k=5, filters={"user_id": "u"})][0] == "i2"
    vs.update("i1", vector=[0, 0, 1, 0])
    assert vs.search("q", [0, 0, 1, 0], top_k=1)[0].id == "i1"
    assert vs.get("i1").payload["data"] == "x"
    assert [h.id for h in vs.list(filters={"k": {"gte": 2}})[0]] == ["i2"]
    assert vs.col_info()["count"] == 2
    vs.delete("i1")
    assert vs.get("i1") is None and other.get("i1") is not None
    vs.reset()
    assert vs.list()[0] == [] and other.col_info()["count"] == 1
    with pytest.raises(ValueError):
        vs.search("q", [1, 0, 0, 0], filters={"k": {"regex": "x"}})


def test_registration_is_idempotent() -> None:
    provider.register()
    provider.register()
    from mem0.utils.factory import VectorStoreFactory
    assert VectorStoreFactory.provider_to_class["mnemo"] == "mnemo.integrations.mem0.MnemoVectorStore"


def test_outputs_read_back_are_the_constructors(tmp_path: Any) -> None:
    assert provider._CONSTRUCTED  # the pinned pydantic: searches make OutputData without validation
    vs = MnemoVectorStore(collection_name="c", embedding_model_dims=4,
                          store_name=f"outputs-{tmp_path}")
    vs.insert([[1, 0, 0, 0], [0, 1, 0, 0]], [{"data": "x", "user_id": "u", "k": [1, "a"]},
                                             {"data": "y", "user_id": "u"}], ["i1", "i2"])
    for out in vs.search("q", [1, 0, 0, 0], top_k=2) + [vs.get("i1")] + vs.list()[0]:
        made = provider.OutputData(id=out.id, score=out.score, payload=out.payload)
        assert out == made and repr(out) == repr(made)
        assert list(out.__dict__.items()) == list(made.__dict__.items())
        assert out.model_fields_set == made.model_fields_set
        assert out.model_dump_json() == made.model_dump_json()
    # What validation would refuse still goes through the constructor.
    with pytest.raises(ValueError):
        provider._output_data(5, 0.5, {})
