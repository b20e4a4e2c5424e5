"""Idempotency seeds, extraction jobs, the quota ledger and users' data on PostgreSQL.

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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memorysync_local.storage.records import ErasedUser, SessionCounts, StoredJob, UserCounts

if TYPE_CHECKING:
    from memorysync_local.storage.postgres._session import PgSession

JOBS_CHANNEL = "memorysync_jobs"


class PgSeeds:
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


class PgJobs:
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
        return StoredJob(
            id=int(row["id"]),
            text=row["text"],
            context=json.loads(row["context"]),
            created_at=row["created_at"],
        )

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


class PgQuota:
    """``QuotaLedger``: counted in the database, atomically.

    A key with a limit is counted at once under its row's lock (two processes cannot
    both take the last add); a key without one is counted when the write commits, so
    writes by one key do not queue on its row for their whole transaction.
    """

    def __init__(self, session: PgSession) -> None:
        self._s = session

    def count_add(self, key_id: str, month: str, limit: int | None) -> bool:
        if limit is None:
            self._s.count_later(key_id, month)
            return True
        conn = self._s.conn
        conn.execute(
            "INSERT INTO usage (key_id, month) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (key_id, month),
        )
        counted = conn.execute(
            "UPDATE usage SET adds = adds + 1 WHERE key_id = %s AND month = %s AND adds < %s "
            "RETURNING adds",
            (key_id, month, limit),
        ).fetchone()
        if counted is not None:
            return True
        conn.execute(
            "UPDATE usage SET refused = refused + 1 WHERE key_id = %s AND month = %s",
            (key_id, month),
        )
        return False

    def usage(self, key_id: str, month: str) -> tuple[int, int]:
        row = self._s.conn.execute(
            "SELECT adds, refused FROM usage WHERE key_id = %s AND month = %s", (key_id, month)
        ).fetchone()
        adds, refused = (int(row["adds"]), int(row["refused"])) if row else (0, 0)
        pending = self._s.pending_adds(key_id, month)
        return adds + pending, refused


def flush_counts(session: PgSession, counts: Mapping[tuple[str, str], int]) -> None:
    """Add the adds counted without a limit, just before the write commits."""
    for (key_id, month), adds in sorted(counts.items()):
        session.conn.execute(
            "INSERT INTO usage (key_id, month, adds) VALUES (%s, %s, %s) "
            "ON CONFLICT (key_id, month) DO UPDATE SET adds = usage.adds + EXCLUDED.adds",
            (key_id, month, adds),
        )


class PgUsers:
    """``UsersData``: a tenant's users, their sessions, erasure."""

    def __init__(self, session: PgSession) -> None:
        self._s = session

    def users(self, tenant_id: str) -> list[UserCounts]:
        rows = self._s.conn.execute(
            "SELECT user_id, SUM(m) AS memories, SUM(t) AS turns FROM ("
            " SELECT user_id, COUNT(*) AS m, 0 AS t FROM memories WHERE tenant_id = %s"
            " GROUP BY user_id UNION ALL"
            " SELECT user_id, 0, COUNT(*) FROM history WHERE tenant_id = %s GROUP BY user_id"
            ") AS both_kinds GROUP BY user_id ORDER BY user_id",
            (tenant_id, tenant_id),
        ).fetchall()
        return [UserCounts(r["user_id"], int(r["memories"]), int(r["turns"])) for r in rows]

    def known(self, tenant_id: str, user_id: str) -> bool:
        row = self._s.conn.execute(
            "SELECT EXISTS(SELECT 1 FROM memories WHERE tenant_id = %s AND user_id = %s) "
            "OR EXISTS(SELECT 1 FROM history WHERE tenant_id = %s AND user_id = %s) AS known",
            (tenant_id, user_id, tenant_id, user_id),
        ).fetchone()
        return bool(row and row["known"])

    def sessions(self, tenant_id: str, user_id: str) -> list[str]:
        rows = self._s.conn.execute(
            "SELECT session_id FROM history WHERE tenant_id = %s AND user_id = %s UNION "
            "SELECT session_id FROM memories WHERE tenant_id = %s AND user_id = %s "
            "AND session_id IS NOT NULL ORDER BY session_id",
            (tenant_id, user_id, tenant_id, user_id),
        ).fetchall()
        return [str(r["session_id"]) for r in rows]

    def session_counts(self, tenant_id: str, user_id: str, session_id: str) -> SessionCounts:
        scope = (tenant_id, user_id, session_id)
        counts = []
        for table in ("history", "memories"):
            row = self._s.conn.execute(
                f"SELECT COUNT(*) AS n, MIN(created_at) AS first, MAX(created_at) AS last "
                f"FROM {table} WHERE tenant_id = %s AND user_id = %s AND session_id = %s",
                scope,
            ).fetchone()
            assert row is not None
            counts.append(row)
        turns, facts = counts
        times = [t for t in (turns["first"], turns["last"], facts["first"], facts["last"]) if t]
        return SessionCounts(
            session_id=session_id,
            turns=int(turns["n"]),
            memories=int(facts["n"]),
            first_at=min(times) if times else None,
            last_at=max(times) if times else None,
        )

    def erase(self, tenant_id: str, user_id: str) -> ErasedUser:
        self._s.own(tenant_id, user_id)
        owner = (tenant_id, user_id)
        where = "tenant_id = %s AND user_id = %s"
        conn = self._s.conn
        sessions = len(self.sessions(tenant_id, user_id))
        jobs = conn.execute(f"DELETE FROM extraction_jobs WHERE {where}", owner).rowcount
        memories = conn.execute(f"DELETE FROM memories WHERE {where}", owner).rowcount
        turns = conn.execute(f"DELETE FROM history WHERE {where}", owner).rowcount
        conn.execute(f"DELETE FROM client_refs WHERE {where}", owner)
        conn.execute(f"DELETE FROM turn_receipts WHERE {where}", owner)
        conn.execute(f"DELETE FROM vector_changes WHERE {where}", owner)  # after the memories
        return ErasedUser(memories=memories, turns=turns, sessions=sessions, jobs=jobs)

    def erase_session(self, tenant_id: str, user_id: str, session_id: str) -> tuple[int, int]:
        self._s.own(tenant_id, user_id)
        scope = (tenant_id, user_id, session_id)
        where = "tenant_id = %s AND user_id = %s AND session_id = %s"
        conn = self._s.conn
        turn_ids = [
            int(r["id"]) for r in conn.execute(f"SELECT id FROM history WHERE {where}", scope)
        ]
        memories = conn.execute(f"DELETE FROM memories WHERE {where}", scope).rowcount
        if turn_ids:
            memories += conn.execute(
                "DELETE FROM memories WHERE tenant_id = %s AND user_id = %s "
                "AND history_id = ANY(%s)",
                (tenant_id, user_id, turn_ids),
            ).rowcount
        turns = conn.execute(f"DELETE FROM history WHERE {where}", scope).rowcount
        return memories, turns
