"""Users' data in one tenant: who is stored, their sessions, an export, an erase.

Shared by the extension routes (``/x-local/v1/...``), the command line
(``memorysync-local users``, ``export``, ``forget``...) and the web inspector, so
that all three count the same rows the same way. Each function takes the storage
(``Storage``) and works in one session.

A *session* is a transcript scope (e.g. ``autogen::s1``) or the ``session_id`` a
memory was written with; a user's sessions are the union.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memorysync_local._service.answers import history_item, memory_item, user_number
from memorysync_local._storage.interface import Storage
from memorysync_local._storage.records import MemorySelection, ReadWindow
from memorysync_local._timeutil import render, utc_now

EXPORT_SCHEMA = "memorysync.users-data/1"
_EVERY_MEMORY = ReadWindow(history=True)


def list_users(storage: Storage, tenant: str) -> list[dict[str, Any]]:
    """Every user of ``tenant`` with memory, turn and session counts, by user id, and
    the number an export names the user by (``user_number``)."""
    with storage.read() as session:
        return [
            {
                "user_id": found.user_id,
                "memories": found.memories,
                "turns": found.turns,
                "sessions": len(session.users.sessions(tenant, found.user_id)),
                "user_number": user_number(tenant, found.user_id),
            }
            for found in session.users.users(tenant)
        ]


def known_user(storage: Storage, tenant: str, user_id: str) -> bool:
    """Whether ``tenant`` stores anything of the user: a memory or a transcript turn."""
    with storage.read() as session:
        return session.users.known(tenant, user_id)


def list_sessions(storage: Storage, tenant: str, user_id: str) -> list[dict[str, Any]]:
    """The user's sessions: id, turn and memory counts, first and last write."""
    with storage.read() as session:
        counts = [
            session.users.session_counts(tenant, user_id, found)
            for found in session.users.sessions(tenant, user_id)
        ]
    return [
        {
            "session_id": c.session_id,
            "turns": c.turns,
            "memories": c.memories,
            "first_at": c.first_at,
            "last_at": c.last_at,
        }
        for c in counts
    ]


def stats(storage: Storage, tenant: str) -> dict[str, Any]:
    """Counts for the tenant: users, memories, turns, sessions, pending extraction jobs."""
    users = list_users(storage, tenant)
    return {
        "tenant_id": tenant,
        "users": len(users),
        "memories": sum(u["memories"] for u in users),
        "turns": sum(u["turns"] for u in users),
        "sessions": sum(u["sessions"] for u in users),
        "pending_jobs": pending_jobs(storage, tenant),
    }


def pending_jobs(storage: Storage, tenant: str, user_id: str | None = None) -> int:
    """Stored extraction jobs of the tenant (or of one user) not yet done."""
    with storage.read() as session:
        return session.jobs.count(tenant, user_id)


def cancel_jobs(storage: Storage, tenant: str, user_id: str) -> int:
    """Delete the user's stored extraction jobs; how many.

    A job the worker holds at that moment stores nothing afterwards: the worker
    inserts its facts only in the transaction that deletes its (now gone) job.
    """
    with storage.write() as session:
        return session.jobs.cancel(tenant, user_id)


def export_user(
    storage: Storage,
    tenant: str,
    user_id: str,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Every memory and transcript turn of the user, in the core's export schema.

    ``progress(done, total)`` is called after each session's transcript is read.
    """
    with storage.read() as session:
        memories = [memory_item(m) for m in session.memories.in_order(tenant, user_id)]
        sessions = session.users.sessions(tenant, user_id)
    transcripts: dict[str, list[dict[str, Any]]] = {}
    for done, found in enumerate(sessions, start=1):
        transcripts[found] = transcript(storage, tenant, user_id, found)
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


def forget_user(storage: Storage, tenant: str, user_id: str) -> dict[str, int]:
    """Erase every memory, turn, pending job and replay record of the user; counts.

    One transaction, so the erase is all or nothing. Idempotent (a second call
    answers zeros).
    """
    with storage.write() as session:
        erased = session.users.erase(tenant, user_id)
    return {
        "jobs": erased.jobs,
        "memories": erased.memories,
        "turns": erased.turns,
        "sessions": erased.sessions,
    }


def forget_memory(storage: Storage, tenant: str, user_id: str, memory_id: int) -> int:
    """Erase one memory of the user; 1 when it was there, else 0."""
    with storage.write() as session:
        deleted = session.memories.delete(tenant, user_id, MemorySelection(ids=(memory_id,)))
    return len(deleted)


def forget_session(storage: Storage, tenant: str, user_id: str, session_id: str) -> dict[str, int]:
    """Erase one session of the user: its turns, and the memories written in it; counts."""
    with storage.write() as session:
        memories, turns = session.users.erase_session(tenant, user_id, session_id)
    return {"memories": memories, "turns": turns}


def memory_rows(
    storage: Storage,
    tenant: str,
    user_id: str,
    *,
    query: str = "",
    limit: int = 0,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """The user's memories newest first, optionally those whose text contains ``query``."""
    with storage.read() as session:
        found, total = session.memories.page(
            tenant, user_id, _EVERY_MEMORY, limit, offset, contains=query
        )
    items = []
    for memory in found:
        item = memory_item(memory)
        item["session_id"] = memory.session_id
        items.append(item)
    return items, total


def transcript(
    storage: Storage, tenant: str, user_id: str, session_id: str
) -> list[dict[str, Any]]:
    """One session's turns in conversation order."""
    with storage.read() as session:
        turns, _ = session.transcript.latest(tenant, user_id, session_id, None, 0)
    return [history_item(turn) for turn in turns]
