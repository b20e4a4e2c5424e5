"""The MemorySync contract's routes: ``/health`` (and ``/ready``), ``/org/projects``,
``/v1/memory/...`` (add_turn, recall, query, status, list), ``/memory/add``,
``/memory/forget`` and ``/v1/history/...``, as the hosted service answers them.
"""

# No `from __future__ import annotations`: FastAPI reads the route annotations at runtime.
import hashlib
import time
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import unquote_to_bytes

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response

from memorysync_local._http.dependencies import (
    AppReadiness,
    AppStore,
    Auth,
    EndUser,
    reads_blocked,
)
from memorysync_local._http.end_user import CAPABILITY
from memorysync_local._http.json_response import json_answer
from memorysync_local._http.models import (
    MAX_INT,
    AddMemoryBody,
    AddTurnBody,
    ForgetBody,
    HistoryAppendBody,
    HistoryDeleteBody,
    HistoryListBody,
    RecallBody,
)
from memorysync_local._plans import Caller
from memorysync_local._recall.context import render_context
from memorysync_local._service.store import Store
from memorysync_local._storage.records import ReadWindow
from memorysync_local._version import __version__

DEFAULT_K = 5

router = APIRouter()


@router.get("/health", tags=["meta"], response_model=dict[str, str | list[str]])
def health() -> Response:
    """Liveness probe (no key needed), with the protocol extensions this server has."""
    return json_answer({"status": "ok", "version": __version__, "capabilities": [CAPABILITY]})


@router.get("/ready", tags=["meta"], response_model=dict[str, str])
async def ready(readiness: AppReadiness) -> Response:
    """Readiness probe (no key needed): 200 while the storage answers a read, 503
    while it cannot be reached (``/health`` stays 200: the process is alive)."""
    reason = await readiness.probe()
    if reason is None:
        return json_answer({"status": "ready"})
    answer = json_answer({"status": "unavailable", "detail": reason}, status=503)
    answer.headers["Retry-After"] = "1"
    return answer


@router.get("/org/projects", tags=["org"], response_model=list[dict[str, Any]])
def projects(who: Auth, store: AppStore) -> Response:
    """The key's project; evaluation keys have no ``projects:read`` scope (403)."""
    if who.evaluation:
        raise HTTPException(403, "evaluation keys lack the projects:read scope")
    created = store.created_at()
    digest = hashlib.sha256(who.tenant_id.encode("utf-8", "surrogatepass")).hexdigest()
    return json_answer(
        [
            {
                "id": f"proj_{digest[:16]}",
                "name": "Local",
                "tenant_id": who.tenant_id,
                "is_default": True,
                "memory_count": store.memory_count(who.tenant_id),
                "created_at": created,
                "updated_at": created,
            }
        ]
    )


@router.post("/v1/memory/add_turn", tags=["memory"], response_model=dict[str, Any])
def add_turn(body: AddTurnBody, who: Auth, store: AppStore) -> Response:
    """Send one turn to fact extraction (only a user turn's durable facts are stored)."""
    _own(who, body.tenant_id)
    role, text = _resolve_role(body)
    return json_answer(
        store.add_turn(
            who,
            user_id=body.user_id,
            text=text,
            role=role,
            speaker=body.speaker,
            occurred_at=body.occurred_at,
            metadata=body.metadata,
            source=body.source,
            replay_text=body.text,
        )
    )


@router.post("/v1/memory/recall", tags=["memory"], response_model=dict[str, Any])
def recall(body: RecallBody, who: Auth, store: AppStore) -> Response:
    """The user's most relevant memories, and a grouped, prompt-ready context block."""
    _own(who, body.tenant_id)
    if reads_blocked(store, who):
        return recall_answer(body, who, store, blocked=True)
    return recall_answer(body, who, store)


def recall_answer(
    body: RecallBody, who: Caller, store: Store, *, blocked: bool = False
) -> Response:
    """The recall route's answer for a caller of the body's tenant (``blocked``: a free
    key over its limit, answered empty). ``fast_recall`` answers with it too."""
    started = time.perf_counter()
    if blocked:
        memories: list[dict[str, Any]] = []
    else:
        memories = store.search(
            who.tenant_id, body.user_id, body.prompt, body.k or DEFAULT_K, _window(body)
        )
    return json_answer(
        {
            "context": render_context(memories),
            "memories": memories,
            "latency_ms": round((time.perf_counter() - started) * 1000, 2),
        }
    )


@router.post("/v1/memory/query", tags=["memory"], response_model=dict[str, Any])
def query(body: RecallBody, who: Auth, store: AppStore) -> Response:
    """Plain search over the user's memories."""
    _own(who, body.tenant_id)
    if reads_blocked(store, who):
        return json_answer({"memories": []})
    return json_answer(
        {
            "memories": store.search(
                who.tenant_id, body.user_id, body.prompt, body.k or DEFAULT_K, _window(body)
            )
        }
    )


@router.get("/v1/memory/status/{memory_id}", tags=["memory"], response_model=dict[str, Any])
def status(
    memory_id: Annotated[str, Path(max_length=40, description="12 or m_12")],
    who: Auth,
    store: AppStore,
) -> Response:
    """Ingestion status of one memory of the key's tenant."""
    raw = memory_id[2:] if memory_id.startswith("m_") else memory_id
    # isdigit() alone admits digits int() refuses ("¹") or reads (Arabic-Indic).
    if not (raw.isascii() and raw.isdigit()) or not 0 < int(raw) <= MAX_INT:
        raise HTTPException(
            422, f"memory_id: expected an integer or m_<integer>, got {memory_id!r}"
        )
    found = store.memory_status(who.tenant_id, int(raw))
    if found is None:
        raise HTTPException(404, f"memory {memory_id} not found")
    return json_answer(found)


@router.get(
    "/v1/memory/{tenant_id}/{user_id:path}/list", tags=["memory"], response_model=dict[str, Any]
)
def list_memories(
    request: Request,
    tenant_id: str,
    user_id: str,
    who: Auth,
    store: AppStore,
    limit: Annotated[int, Query(ge=0, le=MAX_INT)] = 0,
    offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0,
    history: Annotated[bool, Query(description="superseded memories too")] = False,
) -> Response:
    """Every current memory of the user, newest first (``limit=0``: no limit);
    with ``history=true`` the superseded ones too (an extension).

    Each id is one percent-encoded path segment (``a%2Fb`` is the id ``a/b``,
    ``%2E%2E`` the id ``..``).
    """
    tenant_id, user_id = _list_ids(request.scope, tenant_id, user_id)
    _own(who, tenant_id)
    if reads_blocked(store, who):
        return json_answer({"memories": [], "total": 0})
    memories, total = store.list_memories(
        tenant_id, user_id, limit, offset, ReadWindow(history=history)
    )
    return json_answer({"memories": memories, "total": total})


@router.delete("/memory/forget", tags=["memory"], response_model=list[int])
def forget(body: ForgetBody, who: Auth, user: EndUser, store: AppStore) -> Response:
    """Delete the end user's memories by ids or filters; the deleted ids."""
    return json_answer(
        store.forget(
            who.tenant_id,
            user,
            memory_ids=body.memory_ids,
            filters=body.filters.model_dump(exclude_none=True) if body.filters else None,
            dry_run=bool(body.dry_run),
        )
    )


@router.post("/memory/add", tags=["memory"], response_model=dict[str, Any])
def add_memory(body: AddMemoryBody, who: Auth, user: EndUser, store: AppStore) -> Response:
    """Store the durable facts of a text; a memory object or a skipped answer."""
    return json_answer(
        store.add_memory(
            who,
            user_id=user,
            text=body.text,
            source=body.source,
            tags=body.tags,
            importance=body.importance,
            session_id=body.session_id,
            metadata=body.metadata,
            client_ref=body.client_ref,
            verbatim=bool(body.verbatim),
            occurred_at=body.occurred_at,
            speaker=body.speaker,
        )
    )


@router.post("/v1/history/append", tags=["history"], response_model=dict[str, Any])
def history_append(body: HistoryAppendBody, who: Auth, store: AppStore) -> Response:
    """Store transcript turns verbatim; user turns also go to fact extraction."""
    _own(who, body.tenant_id)
    return json_answer(
        store.append_history(
            who,
            user_id=body.user_id,
            session_id=body.session_id,
            source=body.source,
            turns=[t.model_dump() for t in body.turns],
            extract=body.extract,
            metadata=body.metadata,
        )
    )


@router.post("/v1/history/list", tags=["history"], response_model=dict[str, Any])
def history_list(body: HistoryListBody, who: Auth, store: AppStore) -> Response:
    """A session's turns, oldest first (``limit``: the latest N)."""
    _own(who, body.tenant_id)
    if reads_blocked(store, who):
        return json_answer({"items": [], "total": 0})
    items, total = store.list_history(
        who.tenant_id, body.user_id, body.session_id, body.source, body.limit
    )
    return json_answer({"items": items, "total": total})


@router.post("/v1/history/delete", tags=["history"], response_model=dict[str, list[str]])
def history_delete(body: HistoryDeleteBody, who: Auth, store: AppStore) -> Response:
    """Delete turns by session or ids (and their facts with ``delete_derived_facts``)."""
    _own(who, body.tenant_id)
    return json_answer(
        store.delete_history(
            who.tenant_id,
            body.user_id,
            session_id=body.session_id,
            ids=body.ids,
            source=body.source,
            delete_derived_facts=body.delete_derived_facts,
        )
    )


def _own(who: Caller, tenant_id: str) -> None:
    """403 unless the key's tenant is ``tenant_id`` (the one a body or path names)."""
    if tenant_id != who.tenant_id:
        raise HTTPException(403, f"tenant_id {tenant_id[:80]!r} is not owned by this API key")


def _window(body: RecallBody) -> ReadWindow:
    """The memories a recall or query body asks for (current ones unless ``history``)."""
    return ReadWindow(history=body.history, since=body.since, until=body.until)


_LIST_PREFIX = b"/v1/memory/"
_LIST_SUFFIX = b"/list"


def _list_ids(scope: Mapping[str, Any], tenant_id: str, user_id: str) -> tuple[str, str]:
    """The tenant and user ids of a list path, read from the raw (undecoded) path.

    The ASGI server decodes ``%2F`` before routing, so the routed values split a
    tenant ``a/b`` in the wrong place. The raw path keeps the segments apart: the
    tenant is the first segment, the user id everything up to ``/list``, each
    percent-decoded once. Without a raw path, the routed values stand.
    """
    raw = scope.get("raw_path")
    if not isinstance(raw, bytes):
        return tenant_id, user_id
    raw = raw.partition(b"?")[0]
    if not (raw.startswith(_LIST_PREFIX) and raw.endswith(_LIST_SUFFIX)):
        return tenant_id, user_id
    tenant, sep, user = raw[len(_LIST_PREFIX) : -len(_LIST_SUFFIX)].partition(b"/")
    if not sep or not tenant or not user:
        return tenant_id, user_id
    # Percent-decoded to bytes, then UTF-8 with "replace" (as uvicorn decodes paths):
    # a bad byte never becomes a surrogate that the storage cannot bind.
    return (
        unquote_to_bytes(tenant).decode("utf-8", "replace"),
        unquote_to_bytes(user).decode("utf-8", "replace"),
    )


_ROLE_HEADS = {"user": "user", "human": "user", "ai": "assistant", "assistant": "assistant"}


def _resolve_role(body: AddTurnBody) -> tuple[str, str]:
    """The turn's role and text (a leading ``user:`` / ``assistant:`` prefix is removed)."""
    if body.role is not None:
        return body.role, body.text
    head, sep, rest = body.text.partition(":")
    if sep and head.strip().lower() in ("user", "assistant") and rest.strip():
        return head.strip().lower(), rest.strip()
    if body.speaker:
        prefix, at, _ = body.speaker.partition("@")
        if at and prefix.strip().lower() in _ROLE_HEADS:
            return _ROLE_HEADS[prefix.strip().lower()], body.text
    meta_role = (body.metadata or {}).get("role")
    if isinstance(meta_role, str) and meta_role.strip():
        role = meta_role.strip().lower()
        return _ROLE_HEADS.get(role, role), body.text
    return "user", body.text
