"""The ``extraction_jobs`` table on SQLite: one process works it, oldest job first."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from memorysync_local._storage.records import StoredJob

# A job's owner is in its JSON context (the facts' context), not in columns.
JOB_OWNER = "json_extract(context, '$.tenant_id') = ? AND json_extract(context, '$.user_id') = ?"


class SQLiteJobs:
    """:class:`~memorysync_local._storage.interface.JobQueue` on one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def add(self, text: str, context: Mapping[str, Any], created_at: str) -> int:
        """Store one job; its id."""
        cursor = self._conn.execute(
            "INSERT INTO extraction_jobs (text, context, created_at) VALUES (?, ?, ?)",
            (text, json.dumps(dict(context), ensure_ascii=False), created_at),
        )
        return int(cursor.lastrowid or 0)

    def claim_next(self) -> StoredJob | None:
        """The oldest job (one worker per file: nothing else holds one)."""
        row = self._conn.execute(
            "SELECT id, text, context, created_at FROM extraction_jobs ORDER BY id LIMIT 1"
        ).fetchone()
        if row is None:
            return None
        return StoredJob.from_row(row)

    def finish(self, job_id: int) -> bool:
        """Delete a job; True when it was still there."""
        cursor = self._conn.execute("DELETE FROM extraction_jobs WHERE id = ?", (job_id,))
        return bool(cursor.rowcount)

    def count(self, tenant_id: str | None = None, user_id: str | None = None) -> int:
        """Jobs not done (all, the tenant's, or one user's)."""
        if tenant_id is None:
            row = self._conn.execute("SELECT COUNT(*) FROM extraction_jobs").fetchone()
        elif user_id is None:
            row = self._conn.execute(
                "SELECT COUNT(*) FROM extraction_jobs "
                "WHERE json_extract(context, '$.tenant_id') = ?",
                (tenant_id,),
            ).fetchone()
        else:
            row = self._conn.execute(
                f"SELECT COUNT(*) FROM extraction_jobs WHERE {JOB_OWNER}", (tenant_id, user_id)
            ).fetchone()
        return int(row[0])

    def cancel(self, tenant_id: str, user_id: str) -> int:
        """Delete the user's jobs; how many."""
        cursor = self._conn.execute(
            f"DELETE FROM extraction_jobs WHERE {JOB_OWNER}", (tenant_id, user_id)
        )
        return int(cursor.rowcount)
