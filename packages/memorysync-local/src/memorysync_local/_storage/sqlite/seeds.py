"""Idempotency seeds on SQLite: ``turn_receipts`` (add_turn's replay rule) and
``client_refs`` (an add's ``client_ref``). Writers take turns on SQLite, so a check
and the insert that follows it in one write cannot race."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence


class SQLiteSeeds:
    """:class:`~memorysync_local._storage.interface.IdempotencySeeds` on one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def claim_turn(
        self,
        tenant_id: str,
        user_id: str,
        *,
        speaker: str,
        occurred_at: str,
        text_hash: str,
        request_id: str,
        received_at: str,
        window_start: str,
    ) -> bool:
        """Record an add_turn receipt unless the same turn came since ``window_start``."""
        key = (tenant_id, user_id, speaker, occurred_at, text_hash)
        replay = self._conn.execute(
            "SELECT request_id FROM turn_receipts WHERE tenant_id = ? AND user_id = ? "
            "AND speaker = ? AND occurred_at = ? AND text_hash = ? "
            "AND received_at >= ? LIMIT 1",
            (*key, window_start),
        ).fetchone()
        if replay is not None:
            return False
        self._conn.execute(
            "INSERT INTO turn_receipts (tenant_id, user_id, speaker, occurred_at,"
            " text_hash, request_id, received_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*key, request_id, received_at),
        )
        return True

    def claimed_ref(self, tenant_id: str, user_id: str, client_ref: str) -> list[int] | None:
        """The memory ids an earlier add with ``client_ref`` stored."""
        row = self._conn.execute(
            "SELECT memory_ids FROM client_refs WHERE tenant_id = ? AND user_id = ? "
            "AND client_ref = ?",
            (tenant_id, user_id, client_ref),
        ).fetchone()
        if row is None:
            return None
        ids: list[int] = json.loads(row["memory_ids"])
        return ids

    def claim_ref(
        self, tenant_id: str, user_id: str, client_ref: str, memory_ids: Sequence[int]
    ) -> None:
        """Record the memory ids an add with ``client_ref`` stored."""
        self._conn.execute(
            "INSERT INTO client_refs (tenant_id, user_id, client_ref, memory_ids) "
            "VALUES (?, ?, ?, ?)",
            (tenant_id, user_id, client_ref, json.dumps(list(memory_ids))),
        )

    def release_ref(self, tenant_id: str, user_id: str, client_ref: str) -> None:
        """Forget a client ref."""
        self._conn.execute(
            "DELETE FROM client_refs WHERE tenant_id = ? AND user_id = ? AND client_ref = ?",
            (tenant_id, user_id, client_ref),
        )
