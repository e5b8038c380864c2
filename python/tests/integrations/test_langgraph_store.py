"""MnemoStore beyond what InMemoryStore can be compared on: TTL (which
InMemoryStore lacks), several vectors per item, durability, and a
LangGraph graph that reads and writes memories through it with a fake
chat model."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, List

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore

from mnemo.integrations.langgraph import MnemoStore

DIMS = 16


class Clock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


def index() -> dict:
    return {"dims": DIMS, "embed": DeterministicFakeEmbedding(size=DIMS), "fields": ["text"]}


def keys(items: List[Any]) -> List[str]:
    return sorted(i.key for i in items)


def test_ttl_refresh_omit_and_sweep() -> None:
    clk = Clock()
    s = MnemoStore(index=index(), clock=clk,
                   ttl={"default_ttl": 1.0, "refresh_on_read": True, "omit_expired": True})
    s.put(("u",), "short", {"text": "green tea"})                # default TTL: 1 minute
    s.put(("u",), "long", {"text": "black tea"}, ttl=10.0)
    s.put(("u",), "forever", {"text": "oolong tea"}, ttl=None)
    s.put(("v",), "alone", {"text": "coffee"}, ttl=0.5)
    clk.t += 50
    assert s.get(("u",), "short") is not None                   # read: expires at t + 60
    clk.t += 50
    assert s.get(("u",), "short", refresh_ttl=False) is not None
    assert keys(s.search(("u",), query="tea", limit=10)) == ["forever", "long", "short"]
    assert s.list_namespaces() == [("u",)]                      # ("v",) expired at +30 s
    clk.t += 61
    assert s.get(("u",), "short") is None                       # expired, omitted
    assert keys(s.search(("u",), query="tea", limit=10)) == ["forever", "long"]
    assert keys(s.search(("u",))) == ["forever", "long"]
    assert s.sweep_ttl() == 2                                   # short and alone
    assert s.store.count() == 2
    clk.t += 10 * 60
    assert s.get(("u",), "long") is not None                    # refreshed by the searches
    clk.t += 10 * 60 + 1
    assert s.sweep_ttl() == 1
    assert keys(s.search(("u",))) == ["forever"]


def test_expired_items_stay_visible_until_swept_by_default() -> None:
    clk = Clock()
    s = MnemoStore(clock=clk)
    s.put(("u",), "a", {"v": 1}, ttl=1.0)
    clk.t += 120
    assert s.get(("u",), "a", refresh_ttl=False) is not None    # omit_expired is off
    assert s.sweep_ttl() == 1
    assert s.get(("u",), "a") is None


def test_ttl_sweeper_thread() -> None:
    clk = Clock()
    s = MnemoStore(clock=clk)
    s.put(("u",), "a", {"v": 1}, ttl=0.01)
    clk.t += 60
    done = s.start_ttl_sweeper(sweep_interval_minutes=0.0005)   # 30 ms
    for _ in range(200):
        if s.store.count() == 0:
            break
        asyncio.run(asyncio.sleep(0.01))
    assert s.stop_ttl_sweeper(timeout=5)
    assert done.result(timeout=5) is None
    assert s.store.count() == 0


def test_several_vectors_per_item_and_their_upsert() -> None:
    s = MnemoStore(index={"dims": DIMS, "embed": DeterministicFakeEmbedding(size=DIMS),
                          "fields": ["title", "notes[*]"]})
    s.put(("d",), "a", {"title": "alpha", "notes": ["x1", "x2", "x3"]})
    s.put(("d",), "b", {"title": "beta"})
    assert s.store.count() == 5                                 # a: 4 vectors, b: 1
    hit = s.search(("d",), query="x2", limit=1)[0]
    assert hit.key == "a" and hit.score == pytest.approx(1.0, abs=1e-5)
    s.put(("d",), "a", {"title": "alpha", "notes": ["x1"]})     # fewer vectors now
    assert s.store.count() == 3
    assert s.search(("d",), query="x2", limit=2)[0].score < 0.99
    s.put(("d",), "a", {"title": "alpha"}, index=False)
    assert s.store.count() == 2
    assert [i.score for i in s.search(("d",), query="alpha", limit=5)][-1] is None
    s.delete(("d",), "a")
    assert s.store.count() == 1 and s.get(("d",), "a") is None


def test_durable_store_reopens(tmp_path: Any) -> None:
    path = str(tmp_path / "lg.mnemo")
    clk = Clock()
    s = MnemoStore(index=index(), path=path, clock=clk)
    s.put(("u", "1"), "a", {"text": "tea", "n": 1}, ttl=5.0)
    s.put(("u", "2"), "b", {"text": "rain", "n": 2})
    created = s.get(("u", "1"), "a").created_at
    s.store.close()
    again = MnemoStore(index=index(), path=path, clock=clk)
    item = again.get(("u", "1"), "a")
    assert item.value == {"text": "tea", "n": 1} and item.created_at == created
    assert again.list_namespaces() == [("u", "1"), ("u", "2")]
    assert [i.key for i in again.search(("u",), query="rain", limit=1)] == ["b"]
    again.put(("u", "3"), "c", {"text": "sun"})                 # new ids past the old ones
    assert len(again.search(("u",), limit=10)) == 3


def test_async_forms() -> None:
    s = MnemoStore(index=index())

    async def go() -> None:
        await s.aput(("a",), "k", {"text": "hello"})
        assert (await s.aget(("a",), "k")).value == {"text": "hello"}
        assert [i.key for i in await s.asearch(("a",), query="hello")] == ["k"]
        assert await s.alist_namespaces() == [("a",)]
        await s.adelete(("a",), "k")
        assert await s.aget(("a",), "k") is None

    asyncio.run(go())


class State(MessagesState):
    recalled: Annotated[List[str], operator.add]


def build_graph(store: BaseStore, model: Any) -> Any:
    """A chat node that recalls the user's memories before answering and
    stores what it is told to remember."""

    def chat(state: State, config: RunnableConfig, *, store: BaseStore) -> dict:
        user = config["configurable"]["user_id"]
        last = state["messages"][-1].content
        found = store.search(("memories", user), query=last, limit=3)
        recalled = [i.value["text"] for i in found]
        system = SystemMessage("Known about the user: " + "; ".join(recalled))
        reply = model.invoke([system, *state["messages"]])
        if last.startswith("remember:"):
            text = last[len("remember:"):].strip()
            store.put(("memories", user), f"m{len(recalled)}", {"text": text})
        return {"messages": [reply], "recalled": recalled}

    g = StateGraph(State)
    g.add_node("chat", chat)
    g.add_edge(START, "chat")
    g.add_edge("chat", END)
    return g.compile(store=store, checkpointer=InMemorySaver())


def test_graph_reads_and_writes_memories() -> None:
    store = MnemoStore(index=index())
    model = FakeMessagesListChatModel(responses=[AIMessage(f"ok {i}") for i in range(8)])
    graph = build_graph(store, model)
    alice = {"configurable": {"thread_id": "t1", "user_id": "alice"}}
    bob = {"configurable": {"thread_id": "t2", "user_id": "bob"}}
    out = graph.invoke({"messages": [HumanMessage("remember: I like green tea")]}, alice)
    assert out["recalled"] == [] and out["messages"][-1].content == "ok 0"
    graph.invoke({"messages": [HumanMessage("remember: I live in Lyon")]}, alice)
    out = graph.invoke({"messages": [HumanMessage("I like green tea")]}, alice)
    assert out["recalled"][-2:][0] == "I like green tea"        # the nearest memory first
    assert set(out["recalled"][-2:]) == {"I like green tea", "I live in Lyon"}
    out = graph.invoke({"messages": [HumanMessage("what do I like?")]}, bob)
    assert out["recalled"] == []                                 # bob's namespace is empty
    assert store.list_namespaces(prefix=("memories",)) == [("memories", "alice")]
    assert len(out["messages"]) == 2 and len(graph.get_state(alice).values["messages"]) == 6


def test_search_items_are_those_of_the_constructor() -> None:
    """Search results made by setting SearchItem's slots are the items
    SearchItem(...) makes (checked at import too)."""
    from langgraph.store.base import SearchItem

    from mnemo.integrations import langgraph as lg

    assert lg._FAST_ITEMS
    store = lg.MnemoStore(index=index())
    store.put(("a", "b"), "k1", {"text": "green tea", "n": 1})
    store.put(("a", "b"), "k2", {"text": "black coffee"}, index=False)
    for item in store.search(("a",), query="tea", limit=5):
        made = SearchItem(namespace=item.namespace, key=item.key, value=item.value,
                          created_at=item.created_at, updated_at=item.updated_at,
                          score=item.score)
        assert item == made and item.dict() == made.dict() and type(item) is SearchItem


def test_search_refreshes_the_ttls_of_items_found_beside_items_without() -> None:
    """A search refreshes the TTL of each item it returns that has one,
    wherever it ranks among items without a TTL, and of an item without
    vectors that fills the results; refresh_ttl=False refreshes none."""
    for timed, refresh in ((("timed",), True), (("bare",), True), (("timed", "bare"), False)):
        clk = Clock()
        s = MnemoStore(index=index(), clock=clk, ttl={"omit_expired": True})
        for j in range(6):
            s.put(("u",), f"plain{j}", {"text": f"tea {j}"})
        s.put(("u",), "timed", {"text": "tea 9"}, ttl=1.0 if "timed" in timed else None)
        if "bare" in timed:
            s.put(("u",), "bare", {"text": "tea 8"}, ttl=1.0, index=False)
        clk.t += 50
        want = [f"plain{j}" for j in range(6)] + ["timed"] + (["bare"] if "bare" in timed else [])
        found = s.search(("u",), query="tea", limit=len(want), refresh_ttl=refresh)
        assert keys(found) == sorted(want)
        clk.t += 50                                             # past the TTLs set at put
        for key in timed:
            assert (s.get(("u",), key, refresh_ttl=False) is not None) == refresh, (timed, key)
