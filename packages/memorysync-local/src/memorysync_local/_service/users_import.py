"""An export stored back as it was: ``memorysync-local import`` and ``POST /x-local/v1/import``.

An import writes what an export holds, not what extraction would make of it: each
memory's text verbatim, with its kind, source, session, metadata, tags, importance,
``created_at``, ``said_at``, state and ``valid_until``, and its ``superseded_by``
link pointing at the new id of the memory that superseded it; each transcript turn
with its role, content, ``seq``, ``occurred_at``, payload, source and ``created_at``.
Nothing is sent to extraction and no supersession rule runs: the states are the
export's. Only the ids are new.

Each item carries its identity key (see :func:`prepare`; ``memorysync-core``'s
``import_export`` computes the same), kept as the memory's ``client_ref`` or the
turn's ``idempotency_key``: importing the same file again stores nothing, and a
memory deleted since comes back. Links are by key, so a memory is imported after
the one that superseded it (:func:`prepare` orders them so), in the same call or an
earlier one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memorysync_local._extraction.attributes import classify
from memorysync_local._plans import Caller
from memorysync_local._recall.embedding import Embedder
from memorysync_local._recall.vectors import store_vectors
from memorysync_local._service.answers import history_public_id
from memorysync_local._service.facts import text_hash
from memorysync_local._service.quota import Quota, QuotaExceeded
from memorysync_local._service.transcript import sort_key
from memorysync_local._storage.interface import Session, Storage
from memorysync_local._storage.records import NewMemory, NewTurn
from memorysync_local._timeutil import normalise_iso, render, utc_now

EXPORT_SCHEMA = "memorysync.users-data/1"
ORIGIN = "import"


def identity(kind: str, *what: Any) -> str:
    """``import:<hash>`` of an item's kind, source id and content: its key on re-import
    (the same as ``memorysync-core``'s, so a file imported by either is known to both)."""
    text = json.dumps([kind, *what], ensure_ascii=False, default=str, sort_keys=True)
    return "import:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]


class _Ordinals:
    """How many equal items came before: position is identity when nothing else is."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def key(self, kind: str, *what: Any) -> str:
        plain = identity(kind, *what)
        n = self._seen.get(plain, 0)
        self._seen[plain] = n + 1
        # The first keeps the key earlier imports gave it; a repeat gets its place.
        return plain if n == 0 else identity(kind, *what, n)


def session_of(item: Mapping[str, Any]) -> str | None:
    """An exported memory's session: its own ``session_id``, else its metadata's."""
    if isinstance(item.get("session_id"), str):
        return str(item["session_id"])
    metadata = item.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    inner = metadata.get("metadata")
    if isinstance(inner, Mapping) and isinstance(inner.get("session_id"), str):
        return str(inner["session_id"])
    flat = metadata.get("session_id")
    return flat if isinstance(flat, str) else None


def _metadata_of(item: Mapping[str, Any]) -> dict[str, Any]:
    metadata = item.get("metadata")
    if not isinstance(metadata, Mapping):
        return {}
    inner = metadata.get("metadata")
    return dict(inner) if isinstance(inner, Mapping) else dict(metadata)


def _source_id(value: Any) -> str | None:
    """A memory id as a comparable key (``12``, ``"12"`` and ``"m_12"`` are one)."""
    if value is None or isinstance(value, bool):
        return None
    text = str(value)
    return text[2:] if text.startswith("m_") else text


def prepare(data: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The memories and turns of an export as the import takes them: each with its key
    (``ref`` / ``idempotency_key``), memories ordered so that the one that superseded
    another comes first, ``superseded_by`` its key. Raises ValueError on a file that is
    not an export."""
    if not isinstance(data, Mapping) or data.get("schema") != EXPORT_SCHEMA:
        raise ValueError(f"not a MemorySync export (schema must be {EXPORT_SCHEMA!r})")
    memories = _prepared_memories(data.get("memories") or ())
    transcripts = data.get("transcripts") or {}
    if not isinstance(transcripts, Mapping):
        raise ValueError("'transcripts' must map session ids to lists of turns")
    turns: list[dict[str, Any]] = []
    for session, items in transcripts.items():
        ordinals = _Ordinals()
        for turn in items or ():
            if not isinstance(turn, Mapping) or not isinstance(turn.get("content"), str):
                raise ValueError(f"an exported turn has no content: {turn!r:.80}")
            role = turn.get("role") or "user"
            when = turn.get("occurred_at") or turn.get("created_at")
            key = ordinals.key("turn", turn.get("id"), role, turn["content"], when, turn.get("seq"))
            turns.append(
                {
                    "idempotency_key": key,
                    "session_id": str(session),
                    "role": role,
                    "content": turn["content"],
                    "seq": turn.get("seq"),
                    "occurred_at": turn.get("occurred_at"),
                    "payload": turn.get("payload"),
                    "source": turn.get("source") or "import",
                    "created_at": turn.get("created_at"),
                    "source_id": None if turn.get("id") is None else str(turn["id"]),
                }
            )
    return memories, turns


def _prepared_memories(items: Iterable[Any]) -> list[dict[str, Any]]:
    ordinals = _Ordinals()
    prepared: list[dict[str, Any]] = []
    refs: dict[str, str] = {}
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("text"), str):
            raise ValueError(f"an exported memory has no text: {item!r:.80}")
        raw_id = item.get("memory_id", item.get("id"))
        session = session_of(item)
        ref = ordinals.key("memory", raw_id, item["text"], session, item.get("created_at"))
        source_id = _source_id(raw_id)
        if source_id is not None:
            refs.setdefault(source_id, ref)
        superseded = item.get("state") == "superseded" or item.get("valid_until") is not None
        prepared.append(
            {
                "ref": ref,
                "text": item["text"],
                "kind": item.get("kind") or "fact",
                "source": item.get("source"),
                "session_id": session,
                "metadata": _metadata_of(item),
                "tags": item.get("tags"),
                "importance": item.get("importance"),
                "created_at": item.get("created_at"),
                "said_at": item.get("said_at"),
                "speaker": item.get("speaker"),
                "valid_until": item.get("valid_until") if superseded else None,
                "superseded_by": _source_id(item.get("superseded_by")) if superseded else None,
                "source_id": None if raw_id is None else str(raw_id),
            }
        )
    for memory in prepared:
        successor = memory["superseded_by"]
        memory["superseded_by"] = None if successor is None else refs.get(successor)
    return _successors_first(prepared)


def _successors_first(memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``memories`` in an order where a memory comes after the one that superseded it
    (otherwise as exported), so its link can name a stored memory."""
    by_ref = {m["ref"]: m for m in memories}
    depth: dict[str, int] = {}
    for memory in memories:
        chain: list[str] = []
        ref: str | None = memory["ref"]
        while ref is not None and ref not in depth and ref not in chain:
            chain.append(ref)
            successor = by_ref.get(ref)
            ref = None if successor is None else successor["superseded_by"]
        base = depth.get(ref, -1) if ref is not None and ref not in chain else -1
        for n, link in enumerate(reversed(chain)):
            depth[link] = base + 1 + n
    return sorted(memories, key=lambda m: depth[m["ref"]])


def import_items(
    storage: Storage,
    tenant: str,
    user_id: str,
    memories: Sequence[Mapping[str, Any]],
    turns: Sequence[Mapping[str, Any]],
    *,
    caller: Caller | None = None,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Store prepared memories and turns (:func:`prepare`) for ``user_id`` in one
    transaction; per item ``created`` or ``skipped`` (``already_ingested`` /
    ``already_stored``) with its new id.

    With a ``caller`` the call counts as one add of its plan (as a history append
    does): over a free plan's limit nothing is stored (``status: skipped``), over an
    evaluation plan's :class:`QuotaExceeded` is raised. With an ``embedder`` the new
    memories are embedded after the commit.
    """
    now = render(utc_now())
    memory_results: list[dict[str, Any]] = []
    turn_results: list[dict[str, Any]] = []
    embed: list[tuple[int, str]] = []
    with storage.write() as session:
        if caller is not None and (memories or turns):
            meter = Quota.meter(session, caller)
            if meter == "refused":
                raise QuotaExceeded(Quota.retry_after())
            if meter == "silent":
                return {"memories": [], "turns": [], "status": "skipped"}
        for memory in memories:
            result = _import_memory(session, tenant, user_id, memory, now)
            memory_results.append(result)
            if result["status"] == "created":
                embed.append((result["memory_id"], str(memory["text"])))
        for turn in turns:
            turn_results.append(_import_turn(session, tenant, user_id, turn, now))
    if embedder is not None and embed:
        store_vectors(storage, embedder, embed)
    return {"memories": memory_results, "turns": turn_results, "status": "ok"}


def _time(value: Any, default: str) -> str:
    return default if value is None else normalise_iso(str(value))


def _claimed(session: Session, tenant: str, user_id: str, ref: str) -> int | None:
    """The stored memory an earlier import of ``ref`` made; None when the ref is free
    (never used, or its memory deleted since: then it is released)."""
    ids = session.seeds.claimed_ref(tenant, user_id, ref)
    if ids is None:
        return None
    found = session.memories.by_ids(ids)
    if found:
        return found[0].id
    session.seeds.release_ref(tenant, user_id, ref)
    return None


def _import_memory(
    session: Session, tenant: str, user_id: str, memory: Mapping[str, Any], now: str
) -> dict[str, Any]:
    ref = str(memory["ref"])
    earlier = _claimed(session, tenant, user_id, ref)
    if earlier is not None:
        return {"ref": ref, "status": "skipped", "reason": "already_ingested", "memory_id": earlier}
    text = str(memory["text"])
    created_at = _time(memory.get("created_at"), now)
    metadata = dict(memory.get("metadata") or {})
    stated = classify(text)  # what the stored text states, as stored facts are read
    memory_id = session.memories.insert(
        NewMemory(
            tenant_id=tenant,
            user_id=user_id,
            text=text,
            kind=str(memory.get("kind") or "fact"),
            source=memory.get("source"),
            session_id=memory.get("session_id"),
            metadata=metadata,
            origin=ORIGIN,
            history_id=None,
            request_id=None,
            created_at=created_at,
            said_at=_time(memory.get("said_at"), created_at),
            speaker=memory.get("speaker"),
            attribute=None if stated is None else stated[0],
        )
    )
    tags, importance = memory.get("tags"), memory.get("importance")
    if tags is not None or importance is not None:
        session.memories.update_fields(
            memory_id,
            tags=None if tags is None else list(tags),
            importance=importance,
            metadata=metadata,
            source=memory.get("source"),
        )
    if memory.get("valid_until") is not None:
        successor = memory.get("superseded_by")
        linked = None if successor is None else _claimed(session, tenant, user_id, str(successor))
        session.memories.close([memory_id], _time(memory["valid_until"], now), linked)
    session.seeds.claim_ref(tenant, user_id, ref, [memory_id])
    return {"ref": ref, "status": "created", "reason": None, "memory_id": memory_id}


def _import_turn(
    session: Session, tenant: str, user_id: str, turn: Mapping[str, Any], now: str
) -> dict[str, Any]:
    key = str(turn["idempotency_key"])
    session_id = str(turn["session_id"])
    found = session.transcript.find_by_key(tenant, user_id, session_id, key)
    if found is not None:
        return {
            "idempotency_key": key,
            "status": "skipped",
            "reason": "already_stored",
            "id": history_public_id(found.id),
        }
    created_at = _time(turn.get("created_at"), now)
    occurred_at = None if turn.get("occurred_at") is None else _time(turn["occurred_at"], now)
    seq = turn.get("seq")
    stored = session.transcript.insert(
        NewTurn(
            tenant_id=tenant,
            user_id=user_id,
            session_id=session_id,
            source=str(turn.get("source") or "import"),
            role=str(turn.get("role") or "user"),
            content=str(turn["content"]),
            content_hash=text_hash(str(turn["content"])),
            seq=seq,
            occurred_at=occurred_at,
            payload=turn.get("payload"),
            idempotency_key=key,
            created_at=created_at,
            sort_key=sort_key(seq, occurred_at, created_at),
        )
    )
    return {
        "idempotency_key": key,
        "status": "created",
        "reason": None,
        "id": history_public_id(stored.id),
    }
