"""LangChain's own standard suite for vector stores (langchain-tests,
VectorStoreIntegrationTests), sync and async, on MnemoVectorStore: each
test gets an empty store, in memory and, in a second class, durable on
disk and namespaced."""

from __future__ import annotations

from typing import Iterator

import pytest
from langchain_tests.integration_tests.vectorstores import VectorStoreIntegrationTests

from mnemo.integrations.langchain import MnemoVectorStore


class TestMnemoVectorStore(VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self) -> Iterator[MnemoVectorStore]:
        yield MnemoVectorStore(embedding=self.get_embeddings())


class TestMnemoVectorStoreDurableNamespaced(VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self, tmp_path) -> Iterator[MnemoVectorStore]:
        # A shared store with another namespace's documents in it: the
        # suite's emptiness checks then also test the scoping.
        path = str(tmp_path / "lc.mnemo")
        other = MnemoVectorStore(embedding=self.get_embeddings(), path=path, namespace=("other",))
        other.add_texts(["foo", "bar", "zzz"], ids=["1", "2", "9"])
        vs = MnemoVectorStore(embedding=self.get_embeddings(), store=other.store,
                              namespace=("suite",))
        yield vs
        assert len(other.get_by_ids(["1", "2", "9"])) == 3
