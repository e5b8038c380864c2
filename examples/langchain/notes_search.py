"""LangChain on mnemo: a durable vector store of notes, searched with
metadata filters that run inside mnemo's search. Offline: the embedding
is a deterministic bag of hashed words, no model to download.

    pip install "mnemo[langchain]"
    python examples/langchain/notes_search.py
"""

import hashlib
import math
import re
import tempfile

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from mnemo.integrations.langchain import MnemoVectorStore


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


notes = [
    Document(id="n1", page_content="Green tea is brewed at 80 degrees for two minutes",
             metadata={"source": "kitchen", "year": 2021, "tags": ["tea", "recipe"]}),
    Document(id="n2", page_content="Black tea takes boiling water and four minutes",
             metadata={"source": "kitchen", "year": 2024, "tags": ["tea"]}),
    Document(id="n3", page_content="The train to Lyon leaves at nine from platform four",
             metadata={"source": "travel", "year": 2024, "tags": ["train"]}),
    Document(id="n4", page_content="Coffee beans keep best in a closed jar",
             metadata={"source": "kitchen", "year": 2019, "tags": ["coffee"]}),
]

with tempfile.TemporaryDirectory() as folder:
    store = MnemoVectorStore(HashEmbeddings(), path=f"{folder}/notes.mnemo")
    store.add_documents(notes)

    print("tea, any year:")
    for doc, score in store.similarity_search_with_score("how long to brew tea", k=2):
        print(f"  {score:.3f} {doc.id} {doc.page_content}")

    print("tea, from 2022 on, kitchen notes only:")
    recent = {"$and": [{"source": "kitchen"}, {"year": {"$gte": 2022}}]}
    for doc in store.similarity_search("how long to brew tea", k=2, filter=recent):
        print(f"  {doc.id} {doc.page_content}")

    print("tagged 'tea' (a list field), through a retriever:")
    retriever = store.as_retriever(search_kwargs={"k": 3, "filter": {"tags": {"$contains": "tea"}}})
    print("  ", [d.id for d in retriever.invoke("minutes")])

    store.delete(["n2"])
    print("after deleting n2:", [d.id for d in store.get_by_ids(["n1", "n2", "n3"])])

    # The store is a file: reopened, it holds the same notes.
    store.store.close()
    again = MnemoVectorStore(HashEmbeddings(), path=f"{folder}/notes.mnemo")
    print("reopened:", [d.id for d in again.similarity_search("train", k=1)])
