"""A tenant's users on SQLite: counts across ``memories`` and ``history``, and erasure."""

from __future__ import annotations

import sqlite3

from memorysync_local._storage.records import ErasedUser, SessionCounts, UserCounts
from memorysync_local._storage.sqlite.jobs import JOB_OWNER


class SQLiteUsersData:
    """:class:`~memorysync_local._storage.interface.UsersData` on one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def users(self, tenant_id: str) -> list[UserCounts]:
        """Every user of the tenant with their counts, by user id."""
        rows = self._conn.execute(
            "SELECT user_id, SUM(m) AS memories, SUM(t) AS turns FROM ("
            " SELECT user_id, COUNT(*) AS m, 0 AS t FROM memories WHERE tenant_id = ?"
            " GROUP BY user_id UNION ALL"
            " SELECT user_id, 0, COUNT(*) FROM history WHERE tenant_id = ? GROUP BY user_id"
            ") GROUP BY user_id ORDER BY user_id",
            (tenant_id, tenant_id),
        ).fetchall()
        return [UserCounts(str(r["user_id"]), int(r["memories"]), int(r["turns"])) for r in rows]

    def known(self, tenant_id: str, user_id: str) -> bool:
        """Whether the tenant stores anything of the user."""
        row = self._conn.execute(
            "SELECT EXISTS(SELECT 1 FROM memories WHERE tenant_id = ? AND user_id = ?) "
            "OR EXISTS(SELECT 1 FROM history WHERE tenant_id = ? AND user_id = ?)",
            (tenant_id, user_id, tenant_id, user_id),
        ).fetchone()
        return bool(row[0])

    def sessions(self, tenant_id: str, user_id: str) -> list[str]:
        """The user's session ids, sorted."""
        rows = self._conn.execute(
            "SELECT session_id FROM history WHERE tenant_id = ? AND user_id = ? UNION "
            "SELECT session_id FROM memories WHERE tenant_id = ? AND user_id = ? "
            "AND session_id IS NOT NULL ORDER BY session_id",
            (tenant_id, user_id, tenant_id, user_id),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def session_counts(self, tenant_id: str, user_id: str, session_id: str) -> SessionCounts:
        """One session's counts and first and last write."""
        scope = (tenant_id, user_id, session_id)
        turns = self._conn.execute(
            "SELECT COUNT(*), MIN(created_at), MAX(created_at) FROM history "
            "WHERE tenant_id = ? AND user_id = ? AND session_id = ?",
            scope,
        ).fetchone()
        facts = self._conn.execute(
            "SELECT COUNT(*), MIN(created_at), MAX(created_at) FROM memories "
            "WHERE tenant_id = ? AND user_id = ? AND session_id = ?",
            scope,
        ).fetchone()
        times = [t for t in (turns[1], turns[2], facts[1], facts[2]) if t is not None]
        return SessionCounts(
            session_id=session_id,
            turns=int(turns[0]),
            memories=int(facts[0]),
            first_at=min(times) if times else None,
            last_at=max(times) if times else None,
        )

    def erase(self, tenant_id: str, user_id: str) -> ErasedUser:
        """Delete everything of the user; what was deleted."""
        where = "tenant_id = ? AND user_id = ?"
        ids = (tenant_id, user_id)
        jobs = int(
            self._conn.execute(f"DELETE FROM extraction_jobs WHERE {JOB_OWNER}", ids).rowcount
        )
        sessions = len(self.sessions(tenant_id, user_id))
        memories = int(self._conn.execute(f"DELETE FROM memories WHERE {where}", ids).rowcount)
        turns = int(self._conn.execute(f"DELETE FROM history WHERE {where}", ids).rowcount)
        self._conn.execute(f"DELETE FROM client_refs WHERE {where}", ids)
        self._conn.execute(f"DELETE FROM turn_receipts WHERE {where}", ids)
        # After the memories: their deletion counted into this row.
        self._conn.execute(f"DELETE FROM vector_changes WHERE {where}", ids)
        return ErasedUser(memories=memories, turns=turns, sessions=sessions, jobs=jobs)

    def erase_session(self, tenant_id: str, user_id: str, session_id: str) -> tuple[int, int]:
        """Delete one session's turns and memories; (memories, turns)."""
        where = "tenant_id = ? AND user_id = ? AND session_id = ?"
        scope = (tenant_id, user_id, session_id)
        turn_ids = [
            int(r[0]) for r in self._conn.execute(f"SELECT id FROM history WHERE {where}", scope)
        ]
        memories = int(self._conn.execute(f"DELETE FROM memories WHERE {where}", scope).rowcount)
        if turn_ids:
            marks = ", ".join("?" * len(turn_ids))
            memories += int(
                self._conn.execute(
                    f"DELETE FROM memories WHERE tenant_id = ? AND user_id = ? "
                    f"AND history_id IN ({marks})",
                    (tenant_id, user_id, *turn_ids),
                ).rowcount
            )
        turns = int(self._conn.execute(f"DELETE FROM history WHERE {where}", scope).rowcount)
        return memories, turns
