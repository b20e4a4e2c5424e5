"""Transcript turns on PostgreSQL (``TranscriptTable``).

Every method that names an owner first takes that owner's lock in a write session
(:meth:`~.backend.PostgresSession.own`), so one user's writes through several processes
take turns, as every write does on SQLite.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memorysync_local._storage.records import NewTurn, TurnRecord, TurnSelection

if TYPE_CHECKING:
    from memorysync_local._storage.postgres.session import PgSession


class PostgresTranscript:
    """``TranscriptTable`` over one session's connection."""

    def __init__(self, session: PgSession) -> None:
        self._s = session

    def _one(self, sql: str, params: Sequence[Any]) -> TurnRecord | None:
        row = self._s.conn.execute(sql, params).fetchone()
        return None if row is None else TurnRecord.from_row(row)

    def find_by_key(
        self, tenant_id: str, user_id: str, session_id: str, idempotency_key: str
    ) -> TurnRecord | None:
        self._s.own(tenant_id, user_id)
        return self._one(
            "SELECT * FROM history WHERE tenant_id = %s AND user_id = %s AND session_id = %s "
            "AND idempotency_key = %s",
            (tenant_id, user_id, session_id, idempotency_key),
        )

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
        self._s.own(tenant_id, user_id)
        return self._one(
            "SELECT * FROM history WHERE tenant_id = %s AND user_id = %s AND session_id = %s "
            "AND seq = %s AND role = %s AND content_hash = %s ORDER BY id LIMIT 1",
            (tenant_id, user_id, session_id, seq, role, content_hash),
        )

    def insert(self, turn: NewTurn) -> TurnRecord:
        self._s.own(turn.tenant_id, turn.user_id)
        row = self._s.conn.execute(
            "INSERT INTO history (tenant_id, user_id, session_id, source, role, content, "
            "content_hash, seq, occurred_at, payload, idempotency_key, created_at, sort_key) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT DO NOTHING RETURNING *",
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
        ).fetchone()
        if row is not None:
            return TurnRecord.from_row(row)
        # A unique index caught the same turn stored meanwhile: that one is the turn.
        found = None
        if turn.idempotency_key is not None:
            found = self.find_by_key(
                turn.tenant_id, turn.user_id, turn.session_id, turn.idempotency_key
            )
        if found is None and turn.seq is not None:
            found = self.find_by_seq(
                turn.tenant_id,
                turn.user_id,
                turn.session_id,
                seq=turn.seq,
                role=turn.role,
                content_hash=turn.content_hash,
            )
        if found is None:  # pragma: no cover - a conflict names one of the two indexes
            raise RuntimeError("a turn conflicted with no stored turn")
        return found

    def exists(self, turn_id: int) -> bool:
        row = self._s.conn.execute("SELECT 1 AS one FROM history WHERE id = %s", (turn_id,))
        return row.fetchone() is not None

    def latest(
        self, tenant_id: str, user_id: str, session_id: str, source: str | None, limit: int
    ) -> tuple[list[TurnRecord], int]:
        where = "tenant_id = %s AND user_id = %s AND session_id = %s"
        params: list[Any] = [tenant_id, user_id, session_id]
        if source is not None:
            where += " AND source = %s"
            params.append(source)
        conn = self._s.conn
        total = conn.execute(f"SELECT COUNT(*) AS n FROM history WHERE {where}", params)
        count = int(total.fetchone()["n"])  # type: ignore[index]
        rows = conn.execute(
            f"SELECT * FROM history WHERE {where} ORDER BY sort_key DESC, id DESC LIMIT %s",
            [*params, limit if limit > 0 else None],
        ).fetchall()
        return [TurnRecord.from_row(r) for r in reversed(rows)], count

    def delete(self, tenant_id: str, user_id: str, selection: TurnSelection) -> list[int]:
        self._s.own(tenant_id, user_id)
        where = "tenant_id = %s AND user_id = %s"
        params: list[Any] = [tenant_id, user_id]
        if selection.session_id is not None:
            where += " AND session_id = %s"
            params.append(selection.session_id)
        else:
            if not selection.turn_ids:
                return []
            where += " AND id = ANY(%s)"
            params.append(list(selection.turn_ids))
        if selection.source is not None:
            where += " AND source = %s"
            params.append(selection.source)
        rows = self._s.conn.execute(
            f"DELETE FROM history WHERE {where} RETURNING id", params
        ).fetchall()
        return sorted(int(r["id"]) for r in rows)
