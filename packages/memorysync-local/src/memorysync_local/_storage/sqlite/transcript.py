"""The ``history`` table (conversation turns) on SQLite."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from memorysync_local._storage.records import NewTurn, TurnRecord, TurnSelection


class SQLiteTranscript:
    """:class:`~memorysync_local._storage.interface.TranscriptTable` on one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def find_by_key(
        self, tenant_id: str, user_id: str, session_id: str, idempotency_key: str
    ) -> TurnRecord | None:
        """The session's turn stored with this idempotency key."""
        row = self._conn.execute(
            "SELECT * FROM history WHERE tenant_id = ? AND user_id = ? AND session_id = ? "
            "AND idempotency_key = ?",
            (tenant_id, user_id, session_id, idempotency_key),
        ).fetchone()
        return None if row is None else TurnRecord.from_row(row)

    def find_by_seq(
        self,
        tenant_id: str,
        user_id: str,
        session_id: str,
        *,
        seq: int,
        role: str,
        content_hash: str,
    ) -> TurnRecord | None:
        """The session's first turn with this seq, role and content hash."""
        row = self._conn.execute(
            "SELECT * FROM history WHERE tenant_id = ? AND user_id = ? AND session_id = ? "
            "AND seq = ? AND role = ? AND content_hash = ? ORDER BY id LIMIT 1",
            (tenant_id, user_id, session_id, seq, role, content_hash),
        ).fetchone()
        return None if row is None else TurnRecord.from_row(row)

    def insert(self, turn: NewTurn) -> TurnRecord:
        """Store one turn; the stored record."""
        cursor = self._conn.execute(
            "INSERT INTO history (tenant_id, user_id, session_id, source, role, content, "
            "content_hash, seq, occurred_at, payload, idempotency_key, created_at, sort_key) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                turn.tenant_id,
                turn.user_id,
                turn.session_id,
                turn.source,
                turn.role,
                turn.content,
                turn.content_hash,
                turn.seq,
                turn.occurred_at,
                None if turn.payload is None else json.dumps(turn.payload, ensure_ascii=False),
                turn.idempotency_key,
                turn.created_at,
                turn.sort_key,
            ),
        )
        row = self._conn.execute(
            "SELECT * FROM history WHERE id = ?", (cursor.lastrowid,)
        ).fetchone()
        return TurnRecord.from_row(row)

    def exists(self, turn_id: int) -> bool:
        """Whether the turn is still stored."""
        row = self._conn.execute("SELECT 1 FROM history WHERE id = ?", (turn_id,)).fetchone()
        return row is not None

    def latest(
        self, tenant_id: str, user_id: str, session_id: str, source: str | None, limit: int
    ) -> tuple[list[TurnRecord], int]:
        """The session's last ``limit`` turns in conversation order; the total."""
        where = "tenant_id = ? AND user_id = ? AND session_id = ?"
        params: list[Any] = [tenant_id, user_id, session_id]
        if source is not None:
            where += " AND source = ?"
            params.append(source)
        total = int(
            self._conn.execute(f"SELECT COUNT(*) FROM history WHERE {where}", params).fetchone()[0]
        )
        # Newest first along the index, so the latest N are read without the rest.
        rows = self._conn.execute(
            f"SELECT * FROM history WHERE {where} ORDER BY sort_key DESC, id DESC LIMIT ?",
            (*params, limit if limit > 0 else -1),
        ).fetchall()
        rows.reverse()
        return [TurnRecord.from_row(row) for row in rows], total

    def delete(self, tenant_id: str, user_id: str, selection: TurnSelection) -> list[int]:
        """Delete the user's selected turns; their ids."""
        where = "tenant_id = ? AND user_id = ?"
        params: list[Any] = [tenant_id, user_id]
        if selection.session_id is not None:
            where += " AND session_id = ?"
            params.append(selection.session_id)
        else:
            if not selection.turn_ids:
                return []
            where += f" AND id IN ({', '.join('?' * len(selection.turn_ids))})"
            params.extend(selection.turn_ids)
        if selection.source is not None:
            where += " AND source = ?"
            params.append(selection.source)
        ids = [
            int(r[0])
            for r in self._conn.execute(f"SELECT id FROM history WHERE {where} ORDER BY id", params)
        ]
        if ids:
            marks = ", ".join("?" * len(ids))
            self._conn.execute(f"DELETE FROM history WHERE id IN ({marks})", ids)
        return ids
