"""Users' data on PostgreSQL (``UsersData``): a tenant's users, their sessions, erasure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memorysync_local._storage.records import ErasedUser, SessionCounts, UserCounts

if TYPE_CHECKING:
    from memorysync_local._storage.postgres.session import PgSession


class PostgresUsersData:
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
