"""Memories as the official client sees them: by id, in the hosted ``Memory`` shape,
edited field by field with each edit recorded (its ``history(id)``).

Without an end user (``user_id`` None) a call sees the whole tenant, as the hosted
``get``, ``update``, ``history`` and ``export_all`` do without ``X-End-User-ID``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memorysync_local._service.answers import hosted_memory
from memorysync_local._service.facts import scalar_metadata
from memorysync_local._storage.interface import Session, Storage
from memorysync_local._storage.records import MemoryRecord, Revision
from memorysync_local._timeutil import render, utc_now

# Fields of a memory the official client may edit (and history(id) tracks).
TRACKED_FIELDS = ("tags", "importance", "metadata", "source", "event_type")


def visible(
    storage: Storage, tenant: str, user_id: str | None, memory_id: int
) -> dict[str, Any] | None:
    """The memory in the hosted shape (``updated_at``: its last edit), when visible."""
    with storage.read() as session:
        found = session.memories.get(memory_id, tenant, user_id)
        updated = session.memories.last_revised_at(memory_id)
    return None if found is None else hosted_memory(found, updated_at=updated)


def by_ids(storage: Storage, ids: Sequence[int]) -> dict[int, MemoryRecord]:
    """The memories among ``ids``, by id."""
    with storage.read() as session:
        return {memory.id: memory for memory in session.memories.by_ids(ids)}


def export_all(storage: Storage, tenant: str, user_id: str | None) -> list[dict[str, Any]]:
    """Every memory of the user (or the tenant), oldest first, in the hosted shape."""
    with storage.read() as session:
        return [hosted_memory(memory) for memory in session.memories.in_order(tenant, user_id)]


def revision_history(
    storage: Storage, tenant: str, user_id: str | None, memory_id: int
) -> list[dict[str, Any]] | None:
    """The memory's revisions, oldest first (revision 0: its creation); None when the
    memory is not visible."""
    with storage.read() as session:
        found = session.memories.get(memory_id, tenant, user_id)
        changes = session.memories.revisions(memory_id)
    if found is None:
        return None
    revisions: list[dict[str, Any]] = [
        {
            "revision": 0,
            "event": "created",
            "changed_fields": [],
            "diff": {},
            "actor": None,
            "created_at": found.created_at,
        }
    ]
    for number, change in enumerate(changes, start=1):
        revisions.append(
            {
                "revision": number,
                "event": "updated",
                "changed_fields": list(change.changed_fields),
                "diff": change.diff,
                "actor": "api_key",
                "created_at": change.created_at,
            }
        )
    return revisions


def edit_memories(
    storage: Storage,
    tenant: str,
    user_id: str | None,
    edits: Sequence[tuple[int, Mapping[str, Any]]],
) -> list[list[str] | None]:
    """Apply each (memory id, fields) edit in one write; per edit, the fields it
    changed (None when the memory is not visible)."""
    with storage.write() as session:
        return [_edit(session, tenant, user_id, memory_id, fields) for memory_id, fields in edits]


def _edit(
    session: Session,
    tenant: str,
    user_id: str | None,
    memory_id: int,
    fields: Mapping[str, Any],
) -> list[str] | None:
    found = session.memories.get(memory_id, tenant, user_id)
    if found is None:
        return None
    metadata = dict(found.metadata)
    before: dict[str, Any] = {
        "tags": found.tags,
        "importance": found.importance,
        "metadata": {k: v for k, v in metadata.items() if k != "event_type"},
        "source": found.source,
        "event_type": metadata.get("event_type"),
    }
    after = dict(before)
    for name, value in fields.items():
        if name in TRACKED_FIELDS:
            after[name] = scalar_metadata(value) if name == "metadata" else value
    changed = [name for name in TRACKED_FIELDS if after[name] != before[name]]
    if not changed:
        return []
    stored = dict(after["metadata"] or {})
    if found.session_id is not None:
        stored["session_id"] = found.session_id
    if after["event_type"] is not None:
        stored["event_type"] = after["event_type"]
    session.memories.update_fields(
        memory_id,
        tags=after["tags"],
        importance=after["importance"],
        metadata=stored,
        source=after["source"],
    )
    diff = {name: {"old": before[name], "new": after[name]} for name in changed}
    session.memories.add_revision(Revision(memory_id, changed, diff, render(utc_now())))
    return changed
