"""A deterministic embedding for the suites: words hashed into buckets
(bag of words), so texts sharing words are near, with no model to load.
Components are non-negative, so every cosine is in [0, 1]."""

from __future__ import annotations

import hashlib
import math
import re
from typing import List

from langchain_core.embeddings import Embeddings


class HashEmbeddings(Embeddings):
    def __init__(self, dim: int = 64) -> None:
        self.dim = dim

    def _one(self, text: str) -> List[float]:
        v = [0.0] * self.dim
        for word in re.findall(r"\w+", text.lower()):
            v[int.from_bytes(hashlib.md5(word.encode()).digest()[:4], "little") % self.dim] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v]

    def embed_documents(self, texts: List[str]) -> List[List[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> List[float]:
        return self._one(text)
