"""Fixtures of the PostgreSQL backend's own tests."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest


class WordHashEmbedder:
    """A deterministic embedder for tests: each word lights one of 32 dimensions."""

    name = "test-word-hash"
    dimensions = 32

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in text.lower().replace(".", " ").replace("?", " ").split():
                vector[hashlib.blake2b(word.encode(), digest_size=1).digest()[0] % 32] += 1.0
            vectors.append(vector)
        return vectors


@pytest.fixture
def hash_embedder() -> WordHashEmbedder:
    return WordHashEmbedder()
