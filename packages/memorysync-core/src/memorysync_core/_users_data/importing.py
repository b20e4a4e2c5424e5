"""``import_export()``: an export written into a server for one user.

On ``memorysync-local`` (its ``POST /x-local/v1/import`` extension) the export is
stored as it was: texts verbatim, no extraction, every state, ``said_at``,
``valid_until`` and ``superseded_by`` link (mapped to the new ids), turns with their
times and sources. A server without that route (the hosted service: 404) gets the
contract's routes instead: each fact through ``/memory/add`` (the server's extraction
decides what is kept, states are not carried) and the turns through
``/v1/history/append``; the report then says ``verbatim=False``.

Every item is sent with a key made of what it is (:func:`_Ordinals.key`): importing
the same file twice stores nothing the second time, items without ids or from another
server whose ids overlap are all stored, a deleted memory comes back, and two equal
items (two "ok" turns without id, time or ``seq``) are two items: their place among
equals is part of the key. ``memorysync-local import`` computes the same keys.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import NotFoundError, ResponseFormatError, UnsupportedError
from .._wire.retry import call_with_retries
from .reports import ImportReport, ImportSkip

if TYPE_CHECKING:
    from .scope import UserScope

_IMPORT = "/x-local/v1/import"
_BATCH = 100
# A call's items in bytes of JSON at most (one item alone may be larger).
_BATCH_BYTES = 4 * 1024 * 1024


def identity(kind: str, *what: Any) -> str:
    """``import:<hash>`` of an item's kind, source id and content: its key on re-import."""
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


def _source_id(value: Any) -> str | None:
    """A memory id as a comparable key (``12``, ``"12"`` and ``"m_12"`` are one)."""
    if value is None or isinstance(value, bool):
        return None
    text = str(value)
    return text[2:] if text.startswith("m_") else text


def _metadata_of(item: Mapping[str, Any]) -> dict[str, Any]:
    metadata = item.get("metadata")
    if not isinstance(metadata, Mapping):
        return {}
    inner = metadata.get("metadata")
    return dict(inner) if isinstance(inner, Mapping) else dict(metadata)


def prepare(
    data: Mapping[str, Any], session_of: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The export's memories (successors first, each with ``ref`` and its successor's
    ``superseded_by`` ref) and turns (each with ``idempotency_key``); ``source_id`` is
    the item's id in the export (for the report, not sent)."""
    memories = _prepared_memories(data.get("memories") or (), session_of)
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


def _prepared_memories(items: Iterable[Any], session_of: Any) -> list[dict[str, Any]]:
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
    """``memories`` ordered so that a memory comes after the one that superseded it
    (otherwise as exported): its link then names a memory already stored."""
    by_ref = {m["ref"]: m for m in memories}
    depth: dict[str, int] = {}
    for memory in memories:
        chain: list[str] = []
        ref: str | None = memory["ref"]
        while ref is not None and ref not in depth and ref not in chain:
            chain.append(ref)
            successor = by_ref.get(ref)
            ref = None if successor is None else successor["superseded_by"]
        base = depth[ref] if ref is not None and ref in depth else -1
        for n, link in enumerate(reversed(chain)):
            depth[link] = base + 1 + n
    return sorted(memories, key=lambda m: depth[m["ref"]])


def _sent(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "source_id" and v is not None}


async def import_verbatim(
    memory: UserScope,
    memories: Sequence[Mapping[str, Any]],
    turns: Sequence[Mapping[str, Any]],
    skip: Any,
) -> tuple[int, int, list[ImportSkip]] | None:
    """Store the prepared items through ``POST /x-local/v1/import``, 100 of each per
    call; (memories created, turns created, skipped). None when the server has no such
    route (nothing was written then)."""
    api = memory.api
    created = turns_created = 0
    skipped: list[ImportSkip] = []
    calls: list[tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]]
    calls = [(batch, []) for batch in _batches(memories)]
    calls += [([], batch) for batch in _batches(turns)]
    for number, (facts, said) in enumerate(calls):
        body = {
            "user_id": memory.user_id,
            "memories": [_sent(m) for m in facts],
            "turns": [_sent(t) for t in said],
        }
        try:
            answer = await call_with_retries(
                lambda b=body: api._request("POST", _IMPORT, json=b, route=_IMPORT),  # type: ignore[misc]
                memory.retry,
            )
        except (NotFoundError, UnsupportedError):
            if number == 0:
                return None  # a server without the extension: nothing written yet
            raise
        done_facts = _results(answer, "memories", len(facts))
        done_turns = _results(answer, "turns", len(said))
        for item, result in zip(facts, done_facts, strict=True):
            if result.get("status") == "created":
                created += 1
            else:
                reason = str(result.get("reason") or answer.get("status") or "skipped")
                skipped.append(
                    skip("memory", item["source_id"], item["session_id"], item["text"], reason)
                )
        for item, result in zip(said, done_turns, strict=True):
            if result.get("status") == "created":
                turns_created += 1
            else:
                reason = str(result.get("reason") or answer.get("status") or "skipped")
                skipped.append(
                    skip("turn", item["source_id"], item["session_id"], item["content"], reason)
                )
    return created, turns_created, skipped


def _batches(items: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """``items`` in calls of at most 100, each body well under the server's 8 MiB."""
    batches: list[list[Mapping[str, Any]]] = []
    size = 0
    for item in items:
        weight = len(json.dumps(_sent(item), ensure_ascii=False).encode("utf-8"))
        if not batches or len(batches[-1]) >= _BATCH or size + weight > _BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(item)
        size += weight
    return batches


def _results(answer: Any, name: str, sent: int) -> list[Mapping[str, Any]]:
    found = answer.get(name) if isinstance(answer, Mapping) else None
    if isinstance(answer, Mapping) and answer.get("status") == "skipped" and not found:
        return [{"status": "skipped", "reason": "plan_limit_reached"}] * sent
    items = [r for r in found or () if isinstance(r, Mapping)]
    if len(items) != sent:
        raise ResponseFormatError(
            f"POST {_IMPORT} -> 200: {len(items)} {name} for {sent} sent", route=_IMPORT
        )
    return items


def report(
    memories_created: int, turns_created: int, skipped: Sequence[ImportSkip], verbatim: bool
) -> ImportReport:
    """The :class:`ImportReport` of these counts."""
    memories_skipped = sum(1 for s in skipped if s.kind == "memory")
    return ImportReport(
        memories_created,
        memories_skipped,
        turns_created,
        len(skipped) - memories_skipped,
        tuple(skipped),
        verbatim=verbatim,
    )
