"""Extraction jobs on PostgreSQL (``JobQueue``).

Jobs: a job is claimed by writing the claiming process's worker id (the backend pid
of a connection that process holds while it lives) into ``claimed_by``, under
``FOR UPDATE SKIP LOCKED``, so two processes never claim the same job. A claim whose
worker connection is gone (the process was killed) is free again at once. Only the
oldest job of each user is claimable, so one user's turns are extracted in the order
they arrived, whichever process works them. Finishing deletes the row: of two workers
that did the same job (one presumed dead), only the first to delete stores facts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memorysync_local._storage.records import StoredJob

if TYPE_CHECKING:
    from memorysync_local._storage.postgres.session import PgSession

JOBS_CHANNEL = "memorysync_jobs"


class PostgresJobs:
    """``JobQueue``: claimed with ``FOR UPDATE SKIP LOCKED`` by live workers."""

    def __init__(self, session: PgSession) -> None:
        self._s = session

    def add(self, text: str, context: Mapping[str, Any], created_at: str) -> int:
        tenant, user = str(context["tenant_id"]), str(context["user_id"])
        row = self._s.conn.execute(
            "INSERT INTO extraction_jobs (tenant_id, user_id, text, context, created_at) "
            "VALUES (%s, %s, %s, %s, %s) RETURNING id",
            (tenant, user, text, json.dumps(dict(context), ensure_ascii=False), created_at),
        ).fetchone()
        # Delivered at commit: every process's worker looks at the queue.
        self._s.conn.execute(f"NOTIFY {JOBS_CHANNEL}")
        assert row is not None
        return int(row["id"])

    def claim_next(self) -> StoredJob | None:
        worker = self._s.worker_id()
        row = self._s.conn.execute(
            "UPDATE extraction_jobs SET claimed_by = %s WHERE id = ("
            " SELECT j.id FROM extraction_jobs j"
            " WHERE (j.claimed_by IS NULL OR j.claimed_by = %s OR NOT EXISTS"
            "  (SELECT 1 FROM pg_stat_activity a WHERE a.pid = j.claimed_by))"
            " AND NOT EXISTS (SELECT 1 FROM extraction_jobs o WHERE o.tenant_id = j.tenant_id"
            "  AND o.user_id = j.user_id AND o.id < j.id)"
            " ORDER BY j.id LIMIT 1 FOR UPDATE SKIP LOCKED"
            ") RETURNING id, text, context, created_at",
            (worker, worker),
        ).fetchone()
        if row is None:
            return None
        return StoredJob.from_row(row)

    def finish(self, job_id: int) -> bool:
        row = self._s.conn.execute(
            "DELETE FROM extraction_jobs WHERE id = %s RETURNING id", (job_id,)
        ).fetchone()
        return row is not None

    def count(self, tenant_id: str | None = None, user_id: str | None = None) -> int:
        sql = "SELECT COUNT(*) AS n FROM extraction_jobs"
        params: list[Any] = []
        if tenant_id is not None:
            sql += " WHERE tenant_id = %s"
            params.append(tenant_id)
            if user_id is not None:
                sql += " AND user_id = %s"
                params.append(user_id)
        row = self._s.conn.execute(sql, params).fetchone()
        return int(row["n"]) if row else 0

    def cancel(self, tenant_id: str, user_id: str) -> int:
        self._s.own(tenant_id, user_id)
        return self._s.conn.execute(
            "DELETE FROM extraction_jobs WHERE tenant_id = %s AND user_id = %s",
            (tenant_id, user_id),
        ).rowcount
