"""LangGraph on mnemo: an agent's long-term memory (BaseStore) with
semantic search, per-user namespaces, filters and a TTL, used from a
graph. Offline: the chat model is a scripted fake and the embedding a
deterministic bag of hashed words.

    pip install "mnemo[langgraph]"
    python examples/langgraph/agent_memory.py
"""

import hashlib
import math
import re

from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore

from mnemo.integrations.langgraph import MnemoStore


class HashEmbeddings(Embeddings):
    """Words hashed into 256 buckets: texts sharing words are near."""

    def _one(self, text):
        v = [0.0] * 256
        for w in re.findall(r"\w+", text.lower()):
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % 256] += 1.0
        n = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / n for x in v]

    def embed_documents(self, texts):
        return [self._one(t) for t in texts]

    def embed_query(self, text):
        return self._one(text)


store = MnemoStore(index={"dims": 256, "embed": HashEmbeddings(), "fields": ["text"]},
                   ttl={"refresh_on_read": True, "omit_expired": True})
model = GenericFakeChatModel(messages=iter(AIMessage(t) for t in [
    "Noted.", "Noted.", "You like green tea and you live in Lyon.", "I know nothing about you yet."]))


def chat(state: MessagesState, config: RunnableConfig, *, store: BaseStore):
    user = config["configurable"]["user_id"]
    said = state["messages"][-1].content
    memories = store.search(("users", user, "facts"), query=said, limit=3)
    context = "; ".join(m.value["text"] for m in memories) or "nothing"
    reply = model.invoke([SystemMessage(f"What you know about the user: {context}"),
                          *state["messages"]])
    if said.lower().startswith("remember"):
        fact = said.split(":", 1)[1].strip()
        store.put(("users", user, "facts"), f"f{len(store.search(('users', user)))}",
                  {"text": fact, "kind": "fact"}, ttl=60 * 24 * 30)   # a month
    return {"messages": [reply]}


graph = StateGraph(MessagesState)
graph.add_node("chat", chat)
graph.add_edge(START, "chat")
graph.add_edge("chat", END)
app = graph.compile(store=store)

ada = {"configurable": {"user_id": "ada"}}
for said in ["remember: I like green tea", "remember: I live in Lyon", "what do I like to drink?"]:
    out = app.invoke({"messages": [HumanMessage(said)]}, ada)
    print(f"ada> {said}\n  bot: {out['messages'][-1].content}")
out = app.invoke({"messages": [HumanMessage("what do I like?")]}, {"configurable": {"user_id": "bo"}})
print(f"bo> what do I like?\n  bot: {out['messages'][-1].content}")

print("ada's memories nearest 'tea':",
      [(m.key, m.value["text"], round(m.score, 3))
       for m in store.search(("users", "ada"), query="tea", limit=2)])
print("filtered on kind:", [m.key for m in store.search(("users",), filter={"kind": "fact"})])
print("namespaces:", store.list_namespaces(prefix=("users",)))
