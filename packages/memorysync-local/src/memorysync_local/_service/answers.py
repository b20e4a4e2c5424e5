"""The shapes the routes answer with, built from storage records (no storage here).

A memory has two shapes: the contract's (:func:`memory_item`: ``memory_id``,
``metadata`` nested under ``metadata``, validity fields) and the hosted ``Memory``
the official client parses (:func:`hosted_memory`: ``id``, ``metadata`` flat).
A transcript turn has one (:func:`history_item`), its id rendered ``h_<number>``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from memorysync_local._storage.records import MemoryRecord, TurnRecord

# History ids are rendered h_<HISTORY_ID_BASE + row id>, as the hosted service's are.
HISTORY_ID_BASE = 1_000_000_000_000


def history_public_id(rowid: int) -> str:
    """A turn's public id (``h_1000000000001`` for row 1)."""
    return f"h_{HISTORY_ID_BASE + rowid}"


def history_rowid(public: str | int) -> int | None:
    """``h_1000000000001`` or ``1000000000001`` -> rowid 1; None when it cannot be ours."""
    raw = public[2:] if isinstance(public, str) and public.startswith("h_") else public
    try:
        number = int(raw)
    except (TypeError, ValueError):
        return None
    rowid = number - HISTORY_ID_BASE
    return rowid if 0 < rowid < 2**63 else None


def validity_fields(memory: MemoryRecord) -> dict[str, Any]:
    """``said_at``, ``state`` and, once superseded, ``valid_until`` and ``superseded_by``."""
    fields: dict[str, Any] = {
        "said_at": memory.said_at or memory.created_at,
        "state": "current" if memory.valid_until is None else "superseded",
    }
    if memory.valid_until is not None:
        fields["valid_until"] = memory.valid_until
        fields["superseded_by"] = memory.superseded_by
    return fields


def memory_item(memory: MemoryRecord) -> dict[str, Any]:
    """A memory as the list route answers it (production metadata shape)."""
    item: dict[str, Any] = {
        "memory_id": memory.id,
        "text": memory.text,
        "kind": memory.kind,
        "source": memory.source,
        "created_at": memory.created_at,
        "metadata": {"metadata": dict(memory.metadata)},
        **validity_fields(memory),
    }
    if memory.tags is not None:
        item["tags"] = list(memory.tags)
    if memory.importance is not None:
        item["importance"] = memory.importance
    if memory.speaker is not None:
        item["speaker"] = memory.speaker
    return item


def recalled(memory: MemoryRecord, value: float) -> dict[str, Any]:
    """A memory as recall answers it: :func:`memory_item` with ``value`` and ``score``."""
    item = memory_item(memory)
    item["value"] = item["text"]
    item["score"] = value
    return item


def hosted_memory(
    memory: MemoryRecord, *, score: float | None = None, updated_at: str | None = None
) -> dict[str, Any]:
    """A memory in the hosted ``Memory`` shape the official client parses, the one
    shape ``/memory/add``, ``get``, ``query`` and ``export`` answer: ``metadata`` flat.
    ``updated_at`` is its last edit (default: when it was written)."""
    metadata = dict(memory.metadata)
    shown: dict[str, Any] = {
        "id": memory.id,
        "text": memory.text,
        "summary": None,
        "tags": None if memory.tags is None else list(memory.tags),
        "source": memory.source,
        "event_type": metadata.get("event_type"),
        "importance": memory.importance,
        "metadata": metadata,
        "is_summary": False,
        "created_at": memory.created_at,
        "updated_at": updated_at or memory.created_at,
        "score": score,
        "kind": memory.kind,
        "session_id": memory.session_id,
    }
    if memory.speaker is not None:
        shown["speaker"] = memory.speaker
    return shown


def history_item(turn: TurnRecord, *, created: bool | None = None) -> dict[str, Any]:
    """A transcript turn as the history routes answer it (``created`` when appended)."""
    item: dict[str, Any] = {
        "id": history_public_id(turn.id),
        "session_id": turn.session_id,
        "role": turn.role,
        "content": turn.content,
        "seq": turn.seq,
        "occurred_at": turn.occurred_at,
        "payload": turn.payload,
        "source": turn.source,
        "created_at": turn.created_at,
    }
    if created is not None:
        item["created"] = created
    return item


def user_number(tenant_id: str, user_id: str | None) -> int:
    """The end user's number: what ``GET /memory/export`` answers as ``user_id``.

    The official client reads that field as an integer (the hosted account id), and an
    end-user id is a string, so the number is derived from the tenant and the id: the
    first 52 bits of SHA-256 over ``tenant NUL user`` plus one, never 0, safe as a
    JavaScript number, the same on every server and database. ``GET /x-local/v1/users``
    lists it beside each id. Without an end user (a tenant-wide export) it is the
    tenant's own number, from the tenant id alone.
    """
    seed = tenant_id if user_id is None else f"{tenant_id}\0{user_id}"
    digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest()
    return (int.from_bytes(digest[:7], "big") >> 4) + 1
