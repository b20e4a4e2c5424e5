"""Users' data in one tenant: who is stored, their sessions, an export, an erase.

Shared by the extension routes (``/x-local/v1/...``), the command line
(``memorysync-local users``, ``export``, ``forget``...) and the web inspector, so
that all three count the same rows the same way.

A *session* is a transcript scope (``history.session_id``, e.g. ``autogen::s1``)
or the ``session_id`` a memory was written with; a user's sessions are the union.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from memorysync_local._db import Database
from memorysync_local._end_user import user_number
from memorysync_local._store import history_item, memory_item
from memorysync_local._timeutil import render, utc_now

EXPORT_SCHEMA = "memorysync.users-data/1"

# Per-memory change records (the official client's ``history(id)``). Created here,
# outside the numbered migrations, with IF NOT EXISTS: an older server opening the
# file ignores the table, and the trigger drops a memory's records with it, so an
# erase never leaves what a memory said behind.
_REVISIONS_DDL = (
    "CREATE TABLE IF NOT EXISTS memory_revisions ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, memory_id INTEGER NOT NULL,"
    " changed_fields TEXT NOT NULL, diff TEXT NOT NULL, created_at TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS memory_revisions_by_memory ON memory_revisions (memory_id, id)",
    "CREATE TRIGGER IF NOT EXISTS memory_revisions_ad AFTER DELETE ON memories BEGIN"
    " DELETE FROM memory_revisions WHERE memory_id = old.id; END",
)


def ensure_revisions(db: Database) -> None:
    """Create the per-memory change table (idempotent)."""
    with db.write() as conn:
        for statement in _REVISIONS_DDL:
            conn.execute(statement)


def list_users(db: Database, tenant: str) -> list[dict[str, Any]]:
    """Every user of ``tenant`` with memory, turn and session counts, by user id, and
    the number an export names the user by (:func:`user_number`)."""
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT user_id, SUM(m) AS memories, SUM(t) AS turns FROM ("
            " SELECT user_id, COUNT(*) AS m, 0 AS t FROM memories WHERE tenant_id = ?"
            " GROUP BY user_id UNION ALL"
            " SELECT user_id, 0, COUNT(*) FROM history WHERE tenant_id = ? GROUP BY user_id"
            ") GROUP BY user_id ORDER BY user_id",
            (tenant, tenant),
        ).fetchall()
        users = []
        for row in rows:
            sessions = _session_ids(conn, tenant, str(row["user_id"]))
            users.append(
                {
                    "user_id": row["user_id"],
                    "memories": int(row["memories"]),
                    "turns": int(row["turns"]),
                    "sessions": len(sessions),
                    "user_number": user_number(tenant, str(row["user_id"])),
                }
            )
    return users


def known_user(db: Database, tenant: str, user_id: str) -> bool:
    """Whether ``tenant`` stores anything of the user: a memory or a transcript turn."""
    with db.connection() as conn:
        row = conn.execute(
            "SELECT EXISTS(SELECT 1 FROM memories WHERE tenant_id = ? AND user_id = ?) "
            "OR EXISTS(SELECT 1 FROM history WHERE tenant_id = ? AND user_id = ?)",
            (tenant, user_id, tenant, user_id),
        ).fetchone()
    return bool(row[0])


def _session_ids(conn: sqlite3.Connection, tenant: str, user_id: str) -> list[str]:
    rows = conn.execute(
        "SELECT session_id FROM history WHERE tenant_id = ? AND user_id = ? UNION "
        "SELECT session_id FROM memories WHERE tenant_id = ? AND user_id = ? "
        "AND session_id IS NOT NULL ORDER BY session_id",
        (tenant, user_id, tenant, user_id),
    ).fetchall()
    return [str(r[0]) for r in rows]


def list_sessions(db: Database, tenant: str, user_id: str) -> list[dict[str, Any]]:
    """The user's sessions: id, turn and memory counts, first and last write."""
    with db.connection() as conn:
        out = []
        for session in _session_ids(conn, tenant, user_id):
            turns = conn.execute(
                "SELECT COUNT(*), MIN(created_at), MAX(created_at) FROM history "
                "WHERE tenant_id = ? AND user_id = ? AND session_id = ?",
                (tenant, user_id, session),
            ).fetchone()
            facts = conn.execute(
                "SELECT COUNT(*), MIN(created_at), MAX(created_at) FROM memories "
                "WHERE tenant_id = ? AND user_id = ? AND session_id = ?",
                (tenant, user_id, session),
            ).fetchone()
            times = [t for t in (turns[1], turns[2], facts[1], facts[2]) if t is not None]
            out.append(
                {
                    "session_id": session,
                    "turns": int(turns[0]),
                    "memories": int(facts[0]),
                    "first_at": min(times) if times else None,
                    "last_at": max(times) if times else None,
                }
            )
    return out


def stats(db: Database, tenant: str) -> dict[str, Any]:
    """Counts for the tenant: users, memories, turns, sessions, pending extraction jobs."""
    users = list_users(db, tenant)
    return {
        "tenant_id": tenant,
        "users": len(users),
        "memories": sum(u["memories"] for u in users),
        "turns": sum(u["turns"] for u in users),
        "sessions": sum(u["sessions"] for u in users),
        "pending_jobs": pending_jobs(db, tenant),
    }


_JOB_OWNER = "json_extract(context, '$.tenant_id') = ? AND json_extract(context, '$.user_id') = ?"


def pending_jobs(db: Database, tenant: str, user_id: str | None = None) -> int:
    """Stored extraction jobs of the tenant (or of one user) not yet done."""
    with db.connection() as conn:
        if user_id is None:
            row = conn.execute(
                "SELECT COUNT(*) FROM extraction_jobs "
                "WHERE json_extract(context, '$.tenant_id') = ?",
                (tenant,),
            ).fetchone()
        else:
            row = conn.execute(
                f"SELECT COUNT(*) FROM extraction_jobs WHERE {_JOB_OWNER}",
                (tenant, user_id),
            ).fetchone()
    return int(row[0])


def cancel_jobs(db: Database, tenant: str, user_id: str) -> int:
    """Delete the user's stored extraction jobs; how many.

    A job the worker holds at that moment stores nothing afterwards: the worker
    inserts its facts only in the transaction that deletes its (now gone) row.
    """
    with db.write() as conn:
        return int(
            conn.execute(
                f"DELETE FROM extraction_jobs WHERE {_JOB_OWNER}", (tenant, user_id)
            ).rowcount
        )


def export_user(
    db: Database,
    tenant: str,
    user_id: str,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Every memory and transcript turn of the user, in the core's export schema.

    ``progress(done, total)`` is called after each session's transcript is read.
    """
    with db.connection() as conn:
        memories = [
            memory_item(row)
            for row in conn.execute(
                "SELECT * FROM memories WHERE tenant_id = ? AND user_id = ? "
                "ORDER BY created_at, id",
                (tenant, user_id),
            ).fetchall()
        ]
        sessions = _session_ids(conn, tenant, user_id)
    transcripts: dict[str, list[dict[str, Any]]] = {}
    for done, session in enumerate(sessions, start=1):
        transcripts[session] = transcript(db, tenant, user_id, session)
        if progress is not None:
            progress(done, len(sessions))
    return {
        "schema": EXPORT_SCHEMA,
        "user_id": user_id,
        "exported_at": render(utc_now()),
        "complete": True,
        "sessions": sessions,
        "memories": memories,
        "transcripts": transcripts,
    }


def forget_user(db: Database, tenant: str, user_id: str) -> dict[str, int]:
    """Erase every memory, turn, pending job and replay record of the user; counts.

    One transaction, so the erase is all or nothing. Idempotent (a second call
    answers zeros).
    """
    with db.write() as conn:
        where = "tenant_id = ? AND user_id = ?"
        ids = (tenant, user_id)
        jobs = conn.execute(f"DELETE FROM extraction_jobs WHERE {_JOB_OWNER}", ids)
        counts = {"jobs": int(jobs.rowcount)}
        sessions = len(_session_ids(conn, tenant, user_id))
        counts["memories"] = int(conn.execute(f"DELETE FROM memories WHERE {where}", ids).rowcount)
        counts["turns"] = int(conn.execute(f"DELETE FROM history WHERE {where}", ids).rowcount)
        conn.execute(f"DELETE FROM client_refs WHERE {where}", ids)
        conn.execute(f"DELETE FROM turn_receipts WHERE {where}", ids)
        conn.execute(f"DELETE FROM vector_changes WHERE {where}", ids)  # after the memories
        counts["sessions"] = sessions
    return counts


def forget_memory(db: Database, tenant: str, user_id: str, memory_id: int) -> int:
    """Erase one memory of the user; 1 when it was there, else 0."""
    with db.write() as conn:
        return int(
            conn.execute(
                "DELETE FROM memories WHERE id = ? AND tenant_id = ? AND user_id = ?",
                (memory_id, tenant, user_id),
            ).rowcount
        )


def forget_session(db: Database, tenant: str, user_id: str, session_id: str) -> dict[str, int]:
    """Erase one session of the user: its turns, and the memories written in it; counts."""
    with db.write() as conn:
        where = "tenant_id = ? AND user_id = ? AND session_id = ?"
        ids = (tenant, user_id, session_id)
        turn_ids = [int(r[0]) for r in conn.execute(f"SELECT id FROM history WHERE {where}", ids)]
        memories = int(conn.execute(f"DELETE FROM memories WHERE {where}", ids).rowcount)
        if turn_ids:
            marks = ", ".join("?" * len(turn_ids))
            memories += int(
                conn.execute(
                    f"DELETE FROM memories WHERE tenant_id = ? AND user_id = ? "
                    f"AND history_id IN ({marks})",
                    (tenant, user_id, *turn_ids),
                ).rowcount
            )
        turns = int(conn.execute(f"DELETE FROM history WHERE {where}", ids).rowcount)
    return {"memories": memories, "turns": turns}


def memory_rows(
    db: Database, tenant: str, user_id: str, *, query: str = "", limit: int = 0, offset: int = 0
) -> tuple[list[dict[str, Any]], int]:
    """The user's memories newest first, optionally those whose text contains ``query``."""
    where = "tenant_id = ? AND user_id = ?"
    params: list[Any] = [tenant, user_id]
    if query:
        where += " AND instr(lower(text), lower(?)) > 0"
        params.append(query)
    with db.connection() as conn:
        total = int(
            conn.execute(f"SELECT COUNT(*) FROM memories WHERE {where}", params).fetchone()[0]
        )
        rows = conn.execute(
            f"SELECT * FROM memories WHERE {where} ORDER BY created_at DESC, id DESC "
            "LIMIT ? OFFSET ?",
            (*params, limit if limit > 0 else -1, offset),
        ).fetchall()
    items = []
    for row in rows:
        item = memory_item(row)
        item["session_id"] = row["session_id"]
        items.append(item)
    return items, total


def transcript(db: Database, tenant: str, user_id: str, session_id: str) -> list[dict[str, Any]]:
    """One session's turns in conversation order."""
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT * FROM history WHERE tenant_id = ? AND user_id = ? AND session_id = ? "
            "ORDER BY sort_key, id",
            (tenant, user_id, session_id),
        ).fetchall()
    return [history_item(row) for row in rows]


def json_text(value: Any) -> str:
    """``value`` as pretty JSON text (non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, indent=2)
