"""What the users'-data calls answer: a page of memories, an erase, an import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EXPORT_SCHEMA = "memorysync.users-data/1"
# The methods every adapter exposes (delegating to UserMemory / SyncUserMemory).
USERS_DATA_METHODS = ("list_memories", "list_sessions", "export", "forget_user", "import_export")


@dataclass(frozen=True)
class MemoryPage:
    """One page of a user's memories, newest first; ``next_offset`` is None at the end."""

    items: tuple[dict[str, Any], ...]
    total: int | None
    offset: int
    next_offset: int | None


@dataclass(frozen=True)
class ForgetReport:
    """What ``forget_user()`` erased.

    ``complete`` is True only when the server could list every session of the user
    and nothing of the user is left afterwards; on the hosted service (no session
    listing) it is False and ``sessions`` names the sessions that were erased.
    ``cancelled_jobs`` is None when the server has no job queue to cancel.
    """

    deleted_memories: int
    deleted_turns: int
    cancelled_jobs: int | None
    sessions: tuple[str, ...]
    complete: bool


@dataclass(frozen=True)
class ImportSkip:
    """One item ``import_export()`` did not store, and why.

    ``kind`` is ``"memory"`` or ``"turn"``; ``source_id`` its id in the export (None
    when it had none); ``session_id`` its session; ``text`` the first 80 characters of
    its text; ``reason`` the server's: ``"already_ingested"`` / ``"already_stored"``
    (this very item was imported before), ``"no_high_value_content"``,
    ``"plan_limit_reached"``.
    """

    kind: str
    source_id: str | None
    session_id: str | None
    text: str
    reason: str


@dataclass(frozen=True)
class ImportReport:
    """What ``import_export()`` wrote; ``skipped`` names each item it did not store.

    ``verbatim`` is True when the server stored every item as exported (texts, states,
    times, supersession links: ``memorysync-local``); False when facts went through the
    server's extraction (``/memory/add``, the hosted service).
    """

    memories_created: int
    memories_skipped: int
    turns_created: int
    turns_skipped: int
    skipped: tuple[ImportSkip, ...] = ()
    verbatim: bool = False
