"""One user's data: list it, export it, erase it, import an export elsewhere.

Only routes the hosted service has are used (``/v1/memory/.../list``,
``/memory/forget``, ``/v1/history/list|delete|append``, ``/memory/add``), never
``DELETE /memory/user/purge`` (it erases the whole *account*). Listing a user's
sessions and cancelling their pending extraction are ``memorysync-local``'s
``/x-local/v1`` extension: against a server without it the sessions are the ones
the memories name plus this session, and the export or erase says
``complete=False`` rather than claim what it cannot know.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import NotFoundError, ResponseFormatError, UnsupportedError
from .._wire.client import _segment, memory_id_to_int
from .._wire.retry import call_with_retries
from . import importing as _users_import
from .reports import EXPORT_SCHEMA, ForgetReport, ImportReport, ImportSkip, MemoryPage

if TYPE_CHECKING:
    from .scope import UserScope

_SESSIONS = "/x-local/v1/sessions"
_CANCEL = "/x-local/v1/jobs/cancel"
_APPEND_BATCH = 100
_TURN_FIELDS = ("role", "content", "seq", "occurred_at", "payload", "idempotency_key")


async def list_memories_page(memory: UserScope, *, limit: int, offset: int) -> MemoryPage:
    """One page of ``GET /v1/memory/{tenant_id}/{user_id}/list``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise ValueError(f"limit must be an integer from 1 to 1000, got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be an integer >= 0, got {offset!r}")
    api = memory.api
    route = "/v1/memory/{tenant_id}/{user_id}/list"

    async def fetch() -> Any:
        tenant = await api.resolve_tenant_id()
        path = f"/v1/memory/{_segment(tenant)}/{_segment(memory.user_id)}/list"
        return await api._request(
            "GET", path, params={"limit": limit, "offset": offset}, route=route
        )

    answer = await call_with_retries(fetch, memory.retry)
    page = answer.get("memories") if isinstance(answer, dict) else None
    if not isinstance(page, list):
        raise ResponseFormatError(f"GET {route} -> 200: 'memories' is not a list", route=route)
    total = answer.get("total")
    total = total if isinstance(total, int) and not isinstance(total, bool) else None
    items = tuple(item for item in page if isinstance(item, dict))
    end = len(page) < limit or (total is not None and offset + len(page) >= total)
    return MemoryPage(items, total, offset, None if end else offset + len(page))


async def list_sessions(memory: UserScope) -> list[dict[str, Any]]:
    """The user's sessions (``memorysync-local``'s ``/x-local/v1/sessions``).

    Raises :class:`UnsupportedError` against a server without that route.
    """
    try:
        answer = await call_with_retries(
            lambda: memory.api._request(
                "GET", _SESSIONS, params={"user_id": memory.user_id}, route=_SESSIONS
            ),
            memory.retry,
        )
    except NotFoundError as exc:
        raise UnsupportedError(
            f"GET {_SESSIONS} -> {exc.status_code}: this server cannot list a user's "
            "sessions (a memorysync-local extension)",
            status_code=exc.status_code or 404,
            request_id=exc.request_id,
            route=_SESSIONS,
        ) from exc
    sessions = answer.get("sessions") if isinstance(answer, dict) else None
    if not isinstance(sessions, list):
        raise ResponseFormatError(
            f"GET {_SESSIONS} -> 200: 'sessions' is not a list", route=_SESSIONS
        )
    return [s for s in sessions if isinstance(s, dict) and isinstance(s.get("session_id"), str)]


async def _known_sessions(
    memory: UserScope, memories: Sequence[Mapping[str, Any]]
) -> tuple[list[str], bool]:
    """Every session of the user and True, or (no listing) the ones we can name and False."""
    try:
        return [str(s["session_id"]) for s in await list_sessions(memory)], True
    except UnsupportedError:
        named = {memory.scope}
        for item in memories:
            session = session_of(item)
            if session is not None:
                named.add(session)
        return sorted(named), False


async def export_user(memory: UserScope) -> dict[str, Any]:
    """Every memory and transcript turn of the user, JSON-serialisable."""
    api = memory.api
    memories = await call_with_retries(
        lambda: api.list_memories(user_id=memory.user_id, history=True), memory.retry
    )
    sessions, complete = await _known_sessions(memory, memories)
    transcripts: dict[str, list[dict[str, Any]]] = {}
    for session in sessions:
        answer = await call_with_retries(
            lambda s=session: api.list_history(user_id=memory.user_id, session_id=s),  # type: ignore[misc]
            memory.retry,
        )
        items = answer.get("items")
        transcripts[session] = (
            [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
        )
    return {
        "schema": EXPORT_SCHEMA,
        "user_id": memory.user_id,
        "exported_at": _dt.datetime.now(_dt.timezone.utc).isoformat().replace("+00:00", "Z"),
        "server": api.base_url,
        "complete": complete,
        "sessions": sessions,
        "memories": list(memories),
        "transcripts": transcripts,
    }


async def forget_user(memory: UserScope) -> ForgetReport:
    """Erase every memory and every transcript of the user, in every session it can reach."""
    api = memory.api
    cancelled: int | None = None
    try:
        answer = await call_with_retries(
            lambda: api._request("POST", _CANCEL, json={"user_id": memory.user_id}, route=_CANCEL),
            memory.retry,
        )
        cancelled = int(answer.get("cancelled", 0)) if isinstance(answer, dict) else 0
    except (NotFoundError, UnsupportedError):
        cancelled = None  # no job queue on this server (the hosted one runs its own)
    listed = await call_with_retries(
        lambda: api.list_memories(user_id=memory.user_id, history=True), memory.retry
    )
    sessions, complete = await _known_sessions(memory, listed)
    turns = 0
    deleted: set[int] = set()
    for session in sessions:
        answer = await call_with_retries(
            lambda s=session: api.delete_history(  # type: ignore[misc]
                user_id=memory.user_id, session_id=s, delete_derived_facts=True
            ),
            memory.retry,
        )
        turns += len(answer.get("deleted_ids") or ())
        deleted.update(_ints(answer.get("deleted_fact_ids") or ()))
    # Listed again: facts of the deleted turns are gone, the rest go by id.
    remaining = await call_with_retries(
        lambda: api.list_memories(user_id=memory.user_id, history=True), memory.retry
    )
    ids = sorted(_ints(item.get("memory_id", item.get("id")) for item in remaining))
    if ids:
        deleted.update(
            await call_with_retries(
                lambda: api.forget(user_id=memory.user_id, memory_ids=ids), memory.retry
            )
        )
    if complete:
        # Claim a complete erase only after seeing nothing left.
        left = await call_with_retries(
            lambda: api.list_memories(user_id=memory.user_id, history=True), memory.retry
        )
        complete = not left and not await list_sessions(memory)
    return ForgetReport(len(deleted), turns, cancelled, tuple(sessions), complete)


async def import_export(memory: UserScope, data: Mapping[str, Any]) -> ImportReport:
    """Write an ``export()`` into this memory's server for this memory's user.

    On ``memorysync-local`` the export is stored as it was (``_users_data.importing``): texts
    verbatim, no extraction, every state, time and supersession link, turns with their
    times; ``verbatim=True``. Elsewhere facts go through ``/memory/add`` and turns
    through ``/v1/history/append`` (``verbatim=False``). Each item is sent with a key
    made of what it is, so importing the same file twice stores nothing the second
    time, while items without ids, equal items at different places, or items from
    another server whose ids overlap are all stored, and a deleted fact comes back.
    The report names every item not stored, with the server's reason.
    """
    if not isinstance(data, Mapping) or data.get("schema") != EXPORT_SCHEMA:
        raise ValueError(f"not a MemorySync export (schema must be {EXPORT_SCHEMA!r})")
    memories, turns = _users_import.prepare(data, session_of)
    done = await _users_import.import_verbatim(memory, memories, turns, _skip)
    if done is not None:
        return _users_import.report(*done, verbatim=True)
    api = memory.api
    created = 0
    skipped: list[ImportSkip] = []
    for item in memories:
        answer = await call_with_retries(
            lambda i=item: api.add_memory(  # type: ignore[misc]
                user_id=memory.user_id,
                text=i["text"],
                tags=i["tags"],
                importance=i["importance"],
                session_id=i["session_id"],
                client_ref=i["ref"],
            ),
            memory.retry,
        )
        if answer.get("status") == "skipped":
            reason = str(answer.get("reason") or "skipped")
            skipped.append(
                _skip("memory", item["source_id"], item["session_id"], item["text"], reason)
            )
        else:
            created += 1
    turns_created = 0
    by_session: dict[str, list[dict[str, Any]]] = {}
    for turn in turns:
        by_session.setdefault(turn["session_id"], []).append(turn)
    for session, said in by_session.items():
        for start in range(0, len(said), _APPEND_BATCH):
            batch = said[start : start + _APPEND_BATCH]
            sent = [{k: t[k] for k in _TURN_FIELDS if t.get(k) is not None} for t in batch]
            answer = await call_with_retries(
                lambda s=session, b=sent: api.append_history(  # type: ignore[misc]
                    user_id=memory.user_id, session_id=s, turns=b, extract=False
                ),
                memory.retry,
            )
            written = [w for w in answer.get("items") or () if isinstance(w, Mapping)]
            if len(written) != len(batch):
                raise ResponseFormatError(
                    f"POST /v1/history/append -> 200: {len(written)} items for {len(batch)} turns",
                    route="/v1/history/append",
                )
            for turn, result in zip(batch, written, strict=True):
                if result.get("created") is False:
                    skipped.append(
                        _skip("turn", turn["source_id"], session, turn["content"], "already_stored")
                    )
                else:
                    turns_created += 1
    return _users_import.report(created, turns_created, skipped, verbatim=False)


def _skip(kind: str, source_id: Any, session: str | None, text: str, reason: str) -> ImportSkip:
    shown = None if source_id is None else str(source_id)
    return ImportSkip(kind, shown, session, text[:80], reason)


def _ints(values: Any) -> set[int]:
    out = set()
    for value in values:
        try:
            out.add(memory_id_to_int(value))
        except ValueError:
            continue
    return out


def session_of(item: Mapping[str, Any]) -> str | None:
    """A listed memory's session: its own ``session_id``, else its metadata's."""
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
