"""Memory vectors on SQLite: ``memory_vectors`` (schema 5) and the per-user change
counters of ``vector_changes`` (schema 6), kept by triggers."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from memorysync_local._storage.records import VectorCounters

_MISSING = (
    "FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v "
    "WHERE v.memory_id = m.id AND v.model = ?)"
)


class SQLiteVectors:
    """:class:`~memorysync_local._storage.interface.VectorStore` on one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def put(self, model: str, vectors: Sequence[tuple[int, bytes]]) -> None:
        """Store vectors of memories that still exist, replacing older ones."""
        self._conn.executemany(
            "INSERT OR REPLACE INTO memory_vectors (memory_id, model, vector) "
            "SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM memories WHERE id = ?)",
            [(memory_id, model, blob, memory_id) for memory_id, blob in vectors],
        )

    def missing_count(self, model: str) -> int:
        """How many memories have no vector from ``model``."""
        return int(self._conn.execute(f"SELECT COUNT(*) {_MISSING}", (model,)).fetchone()[0])

    def missing(self, model: str, after_id: int, limit: int) -> list[tuple[int, str]]:
        """(id, text) of memories past ``after_id`` with no vector from ``model``."""
        rows = self._conn.execute(
            f"SELECT m.id, m.text {_MISSING} AND m.id > ? ORDER BY m.id LIMIT ?",
            (model, after_id, limit),
        ).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows]

    def counters(self, tenant_id: str, user_id: str) -> VectorCounters:
        """The user's (vectors added, memories removed) and the users erased."""
        owner = "FROM vector_changes WHERE tenant_id = ?1 AND user_id = ?2"
        row = self._conn.execute(
            f"SELECT (SELECT added {owner}), (SELECT removed {owner}), "
            "(SELECT value FROM meta WHERE key = 'vector_erasures')",
            (tenant_id, user_id),
        ).fetchone()
        return VectorCounters(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0))

    def added_since(
        self, tenant_id: str, user_id: str, after_id: int
    ) -> list[tuple[int, str, bytes]]:
        """The user's vectors of memories past ``after_id``, any model, by id."""
        rows = self._conn.execute(
            # Driven by the vectors' ids (CROSS JOIN keeps that order): only new rows are read.
            "SELECT v.memory_id, v.model, v.vector FROM memory_vectors v CROSS JOIN memories m "
            "ON m.id = v.memory_id WHERE v.memory_id > ? AND m.tenant_id = ? AND m.user_id = ? "
            "ORDER BY v.memory_id",
            (after_id, tenant_id, user_id),
        ).fetchall()
        return [(int(r[0]), str(r[1]), bytes(r[2])) for r in rows]

    def of_user(self, tenant_id: str, user_id: str, model: str) -> list[tuple[int, bytes]]:
        """Every vector of the user from ``model``, in no order."""
        rows = self._conn.execute(
            # No ORDER BY: sorting 100 MB of vectors took SQLite longer than reading them.
            "SELECT v.memory_id, v.vector FROM memories m CROSS JOIN memory_vectors v "
            "ON v.memory_id = m.id WHERE m.tenant_id = ? AND m.user_id = ? AND v.model = ?",
            (tenant_id, user_id, model),
        ).fetchall()
        return [(int(r[0]), bytes(r[1])) for r in rows]

    def nearest_in_database(
        self, tenant_id: str, user_id: str, model: str, probe: bytes, limit: int
    ) -> list[tuple[int, float]] | None:
        """SQLite has no vector search: recall ranks the user's vectors in memory."""
        return None
