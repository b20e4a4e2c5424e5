"""The ``/x-local/v1/...`` extension namespace and the web inspector at ``/ui/``.

The hosted contract has no route to list a user's sessions, erase a user in one
call or cancel their pending extraction; these are ``memorysync-local``'s own,
under a prefix no hosted route uses, so a client can tell "this server lacks it"
(404) from a failure. Every route is scoped to the caller's tenant (the key's).
"""

# No `from __future__ import annotations`: FastAPI reads the route annotations.
from enum import Enum
from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from memorysync_local._http.dependencies import AppStore, Auth
from memorysync_local._http.inspector import INSPECTOR_HTML
from memorysync_local._http.json_response import json_answer
from memorysync_local._http.models import (
    MAX_ID_CHARS,
    MAX_INT,
    MAX_TURNS,
    HistoryTurn,
    IsoTime,
    JsonObject,
    Name,
    Short,
    Speaker,
    Text,
)
from memorysync_local._service.users_data import (
    cancel_jobs,
    export_user,
    forget_memory,
    forget_session,
    forget_user,
    list_sessions,
    list_users,
    memory_rows,
    stats,
    transcript,
)
from memorysync_local._service.users_import import import_items

PREFIX = "/x-local/v1"
UserId = Annotated[str, Query(min_length=1, max_length=MAX_ID_CHARS)]


class UserBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Name: 1-512 characters of storable text (no NUL, no unpaired surrogate), as
    # every id of the contract's bodies.
    user_id: Name


class MemoryBody(UserBody):
    memory_id: Annotated[int, Field(ge=1, le=MAX_INT, strict=True)]


class SessionBody(UserBody):
    session_id: Name


class ImportedMemory(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ref: Annotated[Name, Field(max_length=128)]
    text: Text
    kind: Short = "fact"
    source: Short | None = None
    session_id: Name | None = None
    metadata: JsonObject = {}
    tags: Annotated[list[Short], Field(max_length=100)] | None = None
    importance: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    created_at: IsoTime | None = None
    said_at: IsoTime | None = None
    speaker: Speaker | None = None
    valid_until: IsoTime | None = None
    superseded_by: Annotated[Name, Field(max_length=128)] | None = None


class ImportedTurn(HistoryTurn):
    idempotency_key: Name
    session_id: Name
    source: Short = "import"
    created_at: IsoTime | None = None


class ImportBody(UserBody):
    memories: Annotated[list[ImportedMemory], Field(max_length=MAX_TURNS)] = []
    turns: Annotated[list[ImportedTurn], Field(max_length=MAX_TURNS)] = []


router = APIRouter()
TAGS: list[str | Enum] = ["x-local (extension)"]


@router.get(PREFIX + "/users", tags=TAGS)
def users(who: Auth, store: AppStore) -> Response:
    """Every end user of the tenant with memory, turn and session counts."""
    return json_answer({"users": list_users(store.db, who.tenant_id)})


@router.get(PREFIX + "/sessions", tags=TAGS)
def sessions(who: Auth, store: AppStore, user_id: UserId) -> Response:
    """The user's sessions (transcript scopes and memory sessions) with counts."""
    return json_answer(
        {"user_id": user_id, "sessions": list_sessions(store.db, who.tenant_id, user_id)}
    )


@router.get(PREFIX + "/memories", tags=TAGS)
def memories(
    who: Auth,
    store: AppStore,
    user_id: UserId,
    q: Annotated[str, Query(max_length=1000)] = "",
    limit: Annotated[int, Query(ge=0, le=MAX_INT)] = 0,
    offset: Annotated[int, Query(ge=0, le=MAX_INT)] = 0,
) -> Response:
    """The user's memories newest first (``q``: those whose text contains it)."""
    items, total = memory_rows(
        store.db, who.tenant_id, user_id, query=q, limit=limit, offset=offset
    )
    return json_answer({"memories": items, "total": total})


@router.get(PREFIX + "/transcript", tags=TAGS)
def session_transcript(
    who: Auth, store: AppStore, user_id: UserId, session_id: Annotated[str, Query(min_length=1)]
) -> Response:
    """One session's turns in conversation order."""
    return json_answer({"items": transcript(store.db, who.tenant_id, user_id, session_id)})


@router.get(PREFIX + "/export", tags=TAGS)
def user_export(who: Auth, store: AppStore, user_id: UserId) -> Response:
    """Every memory and transcript turn of the user, in the core's export schema
    (what ``memorysync-local export`` writes; ``import_export()`` reads it)."""
    return json_answer(export_user(store.db, who.tenant_id, user_id))


@router.post(PREFIX + "/import", tags=TAGS)
def user_import(body: ImportBody, who: Auth, store: AppStore) -> Response:
    """Store exported memories and turns as they were (``import_export()`` sends
    them, at most 100 of each per call): one add of the key's plan."""
    memories = [m.model_dump() for m in body.memories]
    turns = [t.model_dump() for t in body.turns]
    done = import_items(
        store.db, who.tenant_id, body.user_id, memories, turns, caller=who,
        embedder=store.embedder,
    )  # fmt: skip
    return json_answer(done)


@router.get(PREFIX + "/stats", tags=TAGS)
def tenant_stats(who: Auth, store: AppStore) -> Response:
    """Counts for the tenant: users, memories, turns, sessions, pending jobs."""
    return json_answer(stats(store.db, who.tenant_id))


@router.post(PREFIX + "/jobs/cancel", tags=TAGS)
def jobs_cancel(body: UserBody, who: Auth, store: AppStore) -> Response:
    """Drop the user's pending background extraction; ``{"cancelled": n}``."""
    return json_answer({"cancelled": cancel_jobs(store.db, who.tenant_id, body.user_id)})


@router.post(PREFIX + "/users/forget", tags=TAGS)
def users_forget(body: UserBody, who: Auth, store: AppStore) -> Response:
    """Erase the user: every memory, turn and pending job, in one transaction."""
    return json_answer(forget_user(store.db, who.tenant_id, body.user_id))


@router.post(PREFIX + "/memories/forget", tags=TAGS)
def memories_forget(body: MemoryBody, who: Auth, store: AppStore) -> Response:
    """Erase one memory of the user (any user id, no header encoding needed)."""
    deleted = forget_memory(store.db, who.tenant_id, body.user_id, body.memory_id)
    return json_answer({"memories": deleted})


@router.post(PREFIX + "/sessions/forget", tags=TAGS)
def sessions_forget(body: SessionBody, who: Auth, store: AppStore) -> Response:
    """Erase one session of the user: its turns and the memories written in it."""
    return json_answer(forget_session(store.db, who.tenant_id, body.user_id, body.session_id))


@router.get("/ui", include_in_schema=False)
@router.get("/ui/", include_in_schema=False)
def inspector() -> Response:
    """The inspector page (static; its data comes from the routes above)."""
    return Response(
        INSPECTOR_HTML.encode("utf-8"),
        media_type="text/html; charset=utf-8",
        headers={
            # The page runs only its own script and talks only to this server.
            "Content-Security-Policy": "default-src 'none'; script-src 'self' 'unsafe-inline'; "
            "style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; "
            "form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store",
        },
    )
