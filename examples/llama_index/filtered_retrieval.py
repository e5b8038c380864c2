"""LlamaIndex on mnemo: a VectorStoreIndex whose vectors, nodes and
metadata live in mnemo, retrieved with MetadataFilters that run inside
mnemo's search. Offline: a deterministic bag-of-hashed-words embedding,
no LLM (retrieval only).

    pip install "mnemo[llama-index]"
    python examples/llama_index/filtered_retrieval.py
"""

import hashlib
import math
import re

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.vector_stores import (FilterCondition, FilterOperator, MetadataFilter,
                                            MetadataFilters)

from mnemo.integrations.llama_index import MnemoVectorStore


class HashEmbedding(BaseEmbedding):
    """Words hashed into 256 buckets: texts sharing words are near."""

    def _one(self, text):
        v = [0.0] * 256
        for w in re.findall(r"\w+", text.lower()):
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % 256] += 1.0
        n = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / n for x in v]

    def _get_text_embedding(self, text):
        return self._one(text)

    def _get_query_embedding(self, query):
        return self._one(query)

    async def _aget_query_embedding(self, query):
        return self._one(query)


docs = [
    Document(text="Mnemo keeps vectors resident on the GPU and answers in microseconds.",
             metadata={"team": "engine", "year": 2026, "topics": ["gpu", "speed"],
                       "title": "GPU residency"}),
    Document(text="Filters over tags and attributes run inside the search.",
             metadata={"team": "engine", "year": 2026, "topics": ["filters"],
                       "title": "Filtered search"}),
    Document(text="The quarterly report covers sales in Europe.",
             metadata={"team": "sales", "year": 2025, "topics": ["report"],
                       "title": "Quarterly report"}),
    Document(text="Search speed on the CPU depends on memory bandwidth.",
             metadata={"team": "engine", "year": 2024, "topics": ["cpu", "speed"],
                       "title": "CPU bandwidth, not GPU"}),
]

vector_store = MnemoVectorStore()
index = VectorStoreIndex.from_documents(
    docs, storage_context=StorageContext.from_defaults(vector_store=vector_store),
    embed_model=HashEmbedding())


def show(title, filters=None):
    retriever = index.as_retriever(similarity_top_k=3, filters=filters)
    print(title)
    for hit in retriever.retrieve("search speed"):
        print(f"  {hit.score:.3f} [{hit.node.metadata['team']}, {hit.node.metadata['year']}] "
              f"{hit.node.get_content()}")


show("search speed:")
show("engine team, 2025 or later:", MetadataFilters(filters=[
    MetadataFilter(key="team", value="engine"),
    MetadataFilter(key="year", value=2025, operator=FilterOperator.GTE)]))
show("topics include speed or gpu, but not from 2024:", MetadataFilters(filters=[
    MetadataFilter(key="topics", value=["speed", "gpu"], operator=FilterOperator.ANY),
    MetadataFilters(filters=[MetadataFilter(key="year", value=2024)],
                    condition=FilterCondition.NOT)]))
# mnemo has no substring predicate: the adapter runs the rest of the filter
# in the store and tests the substring on what it returns (still k results).
show("titles containing 'gpu' (case-insensitive), engine team:", MetadataFilters(filters=[
    MetadataFilter(key="team", value="engine"),
    MetadataFilter(key="title", value="gpu", operator=FilterOperator.TEXT_MATCH_INSENSITIVE)]))

# Deleting a document removes its nodes.
index.delete_ref_doc(docs[0].doc_id, delete_from_docstore=True)
show("after deleting the GPU document:")
