"""What a PostgreSQL table class needs of its session: a narrow Protocol.

The table modules (``memories``, ``transcript``, ``jobs``...) take a :class:`PgSession`;
``backend.PostgresSession`` implements it. They import this module, not ``backend``,
so no table module imports the module that imports it (no import cycle).
"""

from __future__ import annotations

from typing import Any, Protocol

import psycopg


class LexemeShares(Protocol):
    """Per process: the share of memories holding each common lexeme
    (``word_index.CommonLexemes``)."""

    def shares(self, session: PgSession) -> dict[str, float]:
        """Common lexeme -> the share of memories holding it."""
        ...


class PgSession(Protocol):
    """One read snapshot or one write transaction on one pooled connection."""

    conn: psycopg.Connection[dict[str, Any]]
    writing: bool
    # In a read (one snapshot) the highest memory id cannot change: asked once.
    indexed_rows: int | None

    def own(self, tenant_id: str, user_id: str) -> None:
        """In a write: hold this user's lock until the transaction ends."""
        ...

    def count_later(self, key_id: str, month: str) -> None:
        """Count one add of the key in the month when the transaction commits."""
        ...

    def pending_adds(self, key_id: str, month: str) -> int:
        """Adds of the key in the month counted in this transaction, not yet written."""
        ...

    def worker_id(self) -> int:
        """This process's worker id (who holds a claimed job)."""
        ...

    def common_lexemes(self) -> LexemeShares:
        """The process's common lexemes."""
        ...

    def need_vectors(self) -> None:
        """Make sure the vector table exists (pgvector created) before using it."""
        ...

    def hnsw_search(self) -> bool:
        """Whether pgvector's HNSW index answers recall by meaning."""
        ...

    def need_hnsw(self, model: str, dimensions: int) -> None:
        """Make sure the HNSW index of ``model``'s vectors exists."""
        ...
