"""Idempotency seeds on PostgreSQL (``IdempotencySeeds``): turn receipts and client refs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memorysync_local._storage.postgres.session import PgSession


class PostgresSeeds:
    """``IdempotencySeeds``: turn receipts and client refs."""

    def __init__(self, session: PgSession) -> None:
        self._s = session

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
        # The owner's lock makes check-then-insert atomic across processes.
        self._s.own(tenant_id, user_id)
        key = (tenant_id, user_id, speaker, occurred_at, text_hash)
        replay = self._s.conn.execute(
            "SELECT 1 AS one FROM turn_receipts WHERE tenant_id = %s AND user_id = %s "
            "AND speaker = %s AND occurred_at = %s AND text_hash = %s AND received_at >= %s "
            "LIMIT 1",
            (*key, window_start),
        ).fetchone()
        if replay is not None:
            return False
        self._s.conn.execute(
            "INSERT INTO turn_receipts (tenant_id, user_id, speaker, occurred_at, text_hash, "
            "request_id, received_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (*key, request_id, received_at),
        )
        return True

    def claimed_ref(self, tenant_id: str, user_id: str, client_ref: str) -> list[int] | None:
        self._s.own(tenant_id, user_id)
        row = self._s.conn.execute(
            "SELECT memory_ids FROM client_refs WHERE tenant_id = %s AND user_id = %s "
            "AND client_ref = %s",
            (tenant_id, user_id, client_ref),
        ).fetchone()
        return None if row is None else list(json.loads(row["memory_ids"]))

    def claim_ref(
        self, tenant_id: str, user_id: str, client_ref: str, memory_ids: Sequence[int]
    ) -> None:
        self._s.own(tenant_id, user_id)
        self._s.conn.execute(
            "INSERT INTO client_refs (tenant_id, user_id, client_ref, memory_ids) "
            "VALUES (%s, %s, %s, %s)",
            (tenant_id, user_id, client_ref, json.dumps(list(memory_ids))),
        )

    def release_ref(self, tenant_id: str, user_id: str, client_ref: str) -> None:
        self._s.own(tenant_id, user_id)
        self._s.conn.execute(
            "DELETE FROM client_refs WHERE tenant_id = %s AND user_id = %s AND client_ref = %s",
            (tenant_id, user_id, client_ref),
        )
