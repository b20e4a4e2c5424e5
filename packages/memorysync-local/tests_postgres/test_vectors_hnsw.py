"""Recall by meaning answered by pgvector's HNSW index (``MEMORYSYNC_POSTGRES_VECTOR_SEARCH``).

The default (``exact``) holds each user's vectors in memory, as on SQLite, and ranks
exactly as SQLite does (``test_same_ranking.py``). ``hnsw`` asks the database instead:
an HNSW index per embedder (made at the first such recall), approximate, filtered to
the user, with nothing held per process.
"""

from __future__ import annotations

from typing import Any

import httpx
import psycopg
import pytest

from memorysync_local import embedded
from memorysync_local._storage.errors import StorageError
from memorysync_local._storage.postgres import open_postgres

KEY = "ms_hnsw"


async def _recall(server: Any, user: str, prompt: str) -> list[str]:
    async with httpx.AsyncClient(
        transport=server.transport, base_url=server.base_url, headers={"X-API-Key": KEY}
    ) as c:
        body = {"tenant_id": "local", "user_id": user, "prompt": prompt, "k": 3}
        return [
            m["text"] for m in (await c.post("/v1/memory/recall", json=body)).json()["memories"]
        ]


def _tell(server: Any, user: str, *facts: str) -> None:
    from memorysync_local._plans import Caller

    for fact in facts:
        server.store.add_memory(
            Caller("k", "local", False, None), user_id=user, text=fact, source="t", tags=None,
            importance=None, session_id=None, metadata=None, client_ref=None, verbatim=True,
        )  # fmt: skip


async def test_hnsw_mode_recalls_by_meaning_through_the_index_and_only_the_users_own(
    postgres_url: str, hash_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYSYNC_POSTGRES_VECTOR_SEARCH", "hnsw")
    with embedded(postgres_url, api_key=KEY, embedder=hash_embedder) as server:
        _tell(server, "ana", "zebra quilt", "harbor lantern", "copper violin")
        _tell(server, "bo", "zebra quilt twice")
        found = await _recall(server, "ana", "zebra")
        assert found[0] == "zebra quilt"
        assert "zebra quilt twice" not in found  # another user's: never
        assert server.store.memories.vectors.reloads == 0  # nothing held in memory
    with psycopg.connect(postgres_url) as conn:
        (name,) = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE indexname LIKE 'memory_vectors_hnsw_%'"
        ).fetchone() or (None,)
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            row[0]
            for row in conn.execute(
                "EXPLAIN SELECT memory_id FROM memory_vectors WHERE model = 'test-word-hash' "
                "ORDER BY vector::vector(32) <=> %s::vector(32) LIMIT 3",
                ("[" + ",".join(["0.1"] * 32) + "]",),
            ).fetchall()
        )
    assert name is not None
    assert name in plan


async def test_the_default_mode_builds_no_hnsw_index(postgres_url: str, hash_embedder: Any) -> None:
    with embedded(postgres_url, api_key=KEY, embedder=hash_embedder) as server:
        _tell(server, "ana", "zebra quilt")
        assert await _recall(server, "ana", "zebra") == ["zebra quilt"]
        assert server.store.memories.vectors.reloads == 1  # exact: the user's matrix
    with psycopg.connect(postgres_url) as conn:
        found = conn.execute(
            "SELECT COUNT(*) FROM pg_indexes WHERE indexname LIKE 'memory_vectors_hnsw_%'"
        ).fetchone()
    assert found == (0,)


def test_an_unknown_vector_search_mode_is_refused_by_name(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYSYNC_POSTGRES_VECTOR_SEARCH", "ivfflat")
    with pytest.raises(ValueError, match="must be 'exact' or 'hnsw', not 'ivfflat'"):
        open_postgres(postgres_url)
    assert not issubclass(ValueError, StorageError)


@pytest.mark.parametrize(("mode", "in_database"), [("exact", False), ("hnsw", True)])
def test_the_storage_declares_vector_search_by_its_mode(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, mode: str, in_database: bool
) -> None:
    monkeypatch.setenv("MEMORYSYNC_POSTGRES_VECTOR_SEARCH", mode)
    storage = open_postgres(postgres_url)
    try:
        assert storage.features.vector_search_in_database is in_database
        assert storage.features.job_notifications is True
    finally:
        storage.close()
