"""mem0 on mnemo: memories added without an LLM (infer=False), scoped by
user, agent and run, searched and listed within a scope; the scope is a
filter inside mnemo's search, so one user's search never sees another's
memories. Offline: mem0's "langchain" embedder with a deterministic
bag-of-hashed-words embedding, and a fake chat model mem0 never calls.

    pip install "mnemo[mem0]"
    python examples/mem0/scoped_memories.py
"""

import hashlib
import math
import os
import re
import tempfile

os.environ.setdefault("MEM0_TELEMETRY", "False")  # read by mem0 on import

from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from mem0 import Memory

import mnemo.integrations.mem0  # noqa: F401  (registers the "mnemo" provider)


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


folder = tempfile.mkdtemp()
memory = Memory.from_config({
    "vector_store": {"provider": "mnemo", "config": {
        "collection_name": "assistant", "embedding_model_dims": 256,
        "path": os.path.join(folder, "memories.mnemo")}},     # None: in memory only
    "embedder": {"provider": "langchain", "config": {"model": HashEmbeddings()}},
    "llm": {"provider": "langchain", "config": {"model": FakeListChatModel(responses=["{}"])}},
    "history_db_path": os.path.join(folder, "history.db"),
})

memory.add("I drink green tea every morning", user_id="ada", infer=False)
memory.add("I am allergic to peanuts", user_id="ada", infer=False, metadata={"kind": "health"})
memory.add("I drink black coffee, no sugar", user_id="bo", infer=False)
memory.add("Ada asked for tea recommendations", user_id="ada", agent_id="barista",
           run_id="session-1", infer=False)
memory.add("Shared house rule: no peanuts in the kitchen", agent_id="barista", infer=False)


def show(title, query, filters):
    print(title)
    for r in memory.search(query, filters=filters, top_k=5, threshold=0.0)["results"]:
        print(f"  {r['score']:.3f} {r['memory']}")


show("ada, 'what does she drink':", "what do I drink", {"user_id": "ada"})
show("bo, same question:", "what do I drink", {"user_id": "bo"})
show("the barista agent, 'peanuts':", "peanuts", {"agent_id": "barista"})
show("ada with the barista in session-1:", "tea",
     {"user_id": "ada", "agent_id": "barista", "run_id": "session-1"})
show("ada's health notes only:", "peanuts", {"user_id": "ada", "kind": "health"})
print("all of bo's memories:", [r["memory"] for r in memory.get_all(filters={"user_id": "bo"})["results"]])
