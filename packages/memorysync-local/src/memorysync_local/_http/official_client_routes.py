"""The hosted ``/memory/...`` routes the official ``memorysync`` client (1.10.1) calls.

``query``, ``retrieve``, ``get``, ``update``, ``history(id)``, ``export_all``,
``bulk_add`` and ``batch_update`` are served here with the answers that client
parses (``add`` and ``forget`` are with the contract's routes). Every other route of that client
answers 501 with a body naming the route, so it fails fast as "unsupported" and
never as a puzzling 404.

The end user is the ``X-End-User-ID`` header, as on the hosted service; ``get``,
``update``, ``history`` and ``export_all`` without it see the whole tenant.
"""

# No `from __future__ import annotations`: FastAPI reads the route annotations.
import time
from enum import Enum
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from memorysync_local._http.dependencies import AppStore, Auth, OptionalEndUser, caller
from memorysync_local._http.json_response import json_answer
from memorysync_local._http.models import MAX_INT, MAX_K, MAX_TEXT_CHARS, JsonObject, Short, Text
from memorysync_local._plans import Caller
from memorysync_local._recall.context import render_context
from memorysync_local._service import hosted_memories
from memorysync_local._service.answers import hosted_memory, user_number
from memorysync_local._service.hosted_memories import TRACKED_FIELDS
from memorysync_local._service.store import Store
from memorysync_local._timeutil import render, utc_now

MAX_BULK = 50
MAX_BATCH_UPDATE = 100

# (method, path) of every other route the official MemorySyncClient 1.10.1 calls,
# with its method name: answered 501. Paths use FastAPI's {param} syntax.
UNSUPPORTED: tuple[tuple[str, str, str], ...] = (
    ("POST", "/memory/summarize", "summarize"),
    ("POST", "/memory/compose", "compose"),
    ("POST", "/memory/{memory_id}/relations", "create_relation"),
    ("POST", "/memory/upload", "upload"),
    ("POST", "/imports", "create_import"),
    ("GET", "/imports", "list_imports"),
    ("GET", "/imports/{job_id}", "get_import"),
    ("POST", "/imports/{job_id}/cancel", "cancel_import"),
    ("DELETE", "/memory/user/purge", "purge_user"),
    ("POST", "/memory/{memory_id}/feedback", "feedback"),
    ("GET", "/memory/ontology", "get_ontology"),
    ("PUT", "/memory/ontology", "update_ontology"),
    ("POST", "/memory/search/routed", "search_routed"),
    ("POST", "/memory/synthesize", "synthesize"),
    ("POST", "/memory/refresh", "refresh"),
    ("GET", "/memory/graph", "graph"),
    ("GET", "/memory/clusters", "clusters"),
    ("GET", "/memory/decisions", "decisions"),
    ("POST", "/memory/decision/resolve", "resolve_decision"),
    ("GET", "/memory/intelligence", "intelligence"),
    ("GET", "/memory/knowledge/stats", "knowledge_stats"),
    ("POST", "/v1/state/put", "put_state"),
    ("POST", "/v1/state/get", "get_state"),
    ("POST", "/v1/state/list", "list_state"),
    ("POST", "/v1/state/search", "search_state"),
    ("POST", "/v1/state/delete", "delete_state"),
    ("POST", "/v1/state/namespaces", "list_state_namespaces"),
)
# The client's connector namespaces (connections, objects, providers, sync_jobs,
# integrations): every method under these prefixes.
UNSUPPORTED_PREFIXES = ("/api/v2/integrations", "/api/v1/integrations")


class _Body(BaseModel):
    # The official client's bodies: unknown fields are refused, as everywhere.
    model_config = ConfigDict(extra="forbid")


class QueryBody(_Body):
    query: Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
    k: Annotated[int, Field(ge=1, le=MAX_K, strict=True)] | None = None
    filters: JsonObject | None = None
    session_id: Short | None = None
    traversal_depth: Annotated[int, Field(ge=0, le=10)] | None = None


class Edit(_Body):
    tags: Annotated[list[Short], Field(max_length=100)] | None = None
    importance: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    metadata: JsonObject | None = None
    source: Short | None = None
    event_type: Short | None = None


class BatchItem(Edit):
    memory_id: Annotated[int, Field(ge=1, le=MAX_INT, strict=True)]


class BatchUpdateBody(_Body):
    items: Annotated[list[BatchItem], Field(min_length=1, max_length=MAX_BATCH_UPDATE)]


class BulkItem(_Body):
    text: Text
    source: Short | None = None
    event_type: Short | None = None
    tags: Annotated[list[Short], Field(max_length=100)] | None = None
    metadata: JsonObject | None = None
    importance: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    end_user_id: Short | None = None
    client_ref: Annotated[str, Field(min_length=1, max_length=128)] | None = None


class BulkAddBody(_Body):
    items: Annotated[list[BulkItem], Field(min_length=1, max_length=MAX_BULK)]
    deduplicate: bool = True


router = APIRouter()
MemoryId = Annotated[int, Path(ge=1, le=MAX_INT)]
TAGS: list[str | Enum] = ["memory (official client)"]


def _unsupported(method: str, path: str, name: str) -> Any:
    def handler(request: Request) -> Response:
        route = f"{request.method} {path}" if method == "*" else f"{method} {path}"
        return json_answer(
            {
                "detail": f"memorysync-local does not implement {route} "
                f"(official client: {name}); see docs/users-data.md for what it serves",
                "route": route,
                "unsupported": True,
            },
            status=501,
        )

    return handler


def _add_unsupported_routes(target: APIRouter) -> None:
    """Answer 501 on every route of the client this server does not serve.

    Added before the served routes, so that GET /memory/ontology is not read as
    GET /memory/{memory_id}. The key is checked first: a caller without one learns
    nothing about what is served.
    """
    keyed = [Depends(caller)]
    for method, path, name in UNSUPPORTED:
        target.add_api_route(
            path,
            _unsupported(method, path, name),
            methods=[method],
            include_in_schema=False,
            dependencies=keyed,
        )
    for prefix in UNSUPPORTED_PREFIXES:
        target.add_api_route(
            prefix + "/{rest:path}",
            _unsupported("*", prefix + "/...", "connector namespaces"),
            methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            include_in_schema=False,
            dependencies=keyed,
        )


_add_unsupported_routes(router)


@router.post("/memory/query", tags=TAGS)
def query(body: QueryBody, who: Auth, user: OptionalEndUser, store: AppStore) -> Response:
    """Search the end user's memories (``MemorySyncClient.query``)."""
    return _search(store, body, who, user)


@router.post("/memory/retrieve", tags=TAGS)
def retrieve(body: QueryBody, who: Auth, user: OptionalEndUser, store: AppStore) -> Response:
    """The same search as ``/memory/query`` (``MemorySyncClient.retrieve``)."""
    return _search(store, body, who, user)


@router.get("/memory/export", tags=TAGS)
def export_all(who: Auth, user: OptionalEndUser, store: AppStore) -> Response:
    """Every memory of the end user (or, without ``X-End-User-ID``, of the tenant);
    ``user_id`` is the end user's number (:func:`user_number`)."""
    return json_answer(
        {
            # The official client reads user_id as an integer: the end user's number.
            "user_id": user_number(who.tenant_id, user),
            "end_user_id": user,
            "memories": hosted_memories.export_all(store.db, who.tenant_id, user),
            "generated_at": render(utc_now()),
        }
    )


@router.post("/memory/bulk-add", tags=TAGS)
def bulk_add(body: BulkAddBody, who: Auth, user: OptionalEndUser, store: AppStore) -> Response:
    """Store up to 50 texts; one result per item (``created`` / ``skipped`` / ``rejected``)."""
    results = [
        _bulk_result(store, who, index, item, item.end_user_id or user, body.deduplicate)
        for index, item in enumerate(body.items)
    ]
    counts = {s: sum(r["status"] == s for r in results) for s in ("created", "skipped", "rejected")}
    return json_answer({"total": len(results), **counts, "results": results})


@router.post("/memory/batch-update", status_code=207, tags=TAGS)
def batch_update(
    body: BatchUpdateBody, who: Auth, user: OptionalEndUser, store: AppStore
) -> Response:
    """Edit many memories in one transaction; an id not visible is ``not_found``."""
    ids = [item.memory_id for item in body.items]
    if len(set(ids)) != len(ids):
        raise HTTPException(422, "items must not name the same memory_id twice")
    edits = [(item.memory_id, _fields(item)) for item in body.items]
    outcomes = hosted_memories.edit_memories(store.db, who.tenant_id, user, edits)
    results = [
        {
            "index": index,
            "memory_id": item.memory_id,
            "status": "not_found" if changed is None else "updated",
            "changed_fields": changed or [],
        }
        for index, (item, changed) in enumerate(zip(body.items, outcomes, strict=True))
    ]
    updated = sum(r["status"] == "updated" for r in results)
    return json_answer(
        {
            "total": len(results),
            "updated": updated,
            "not_found": len(results) - updated,
            "results": results,
        },
        status=207,
    )


@router.get("/memory/{memory_id}", tags=TAGS)
def get_memory(memory_id: MemoryId, who: Auth, user: OptionalEndUser, store: AppStore) -> Response:
    """One memory (``MemorySyncClient.get``)."""
    return json_answer(_visible(store, who, user, memory_id))


@router.patch("/memory/{memory_id}", tags=TAGS)
def update_memory(
    memory_id: MemoryId, body: Edit, who: Auth, user: OptionalEndUser, store: AppStore
) -> Response:
    """Edit tags, importance, metadata, source or event type; the memory after."""
    if not body.model_dump(exclude_none=True):
        raise HTTPException(422, "update needs at least one of " + ", ".join(TRACKED_FIELDS))
    [changed] = hosted_memories.edit_memories(
        store.db, who.tenant_id, user, [(memory_id, _fields(body))]
    )
    if changed is None:
        raise HTTPException(404, f"memory {memory_id} not found")
    return json_answer(_visible(store, who, user, memory_id))


@router.get("/memory/{memory_id}/history", tags=TAGS)
def memory_history(
    memory_id: MemoryId,
    who: Auth,
    user: OptionalEndUser,
    store: AppStore,
    limit: int = 100,
    offset: int = 0,
) -> Response:
    """The memory's recorded changes, oldest first; revision 0 is its creation."""
    revisions = hosted_memories.revision_history(store.db, who.tenant_id, user, memory_id)
    if revisions is None:
        raise HTTPException(404, f"memory {memory_id} not found")
    page = revisions[max(offset, 0) : max(offset, 0) + max(min(limit, 1000), 0)]
    return json_answer(
        {
            "memory_id": memory_id,
            "total": len(revisions),
            "revisions": page,
            "tracked_fields": list(TRACKED_FIELDS),
        }
    )


def _search(store: Store, body: QueryBody, who: Caller, user: str | None) -> Response:
    """The answer of ``/memory/query`` and ``/memory/retrieve``."""
    if user is None:
        raise HTTPException(400, "X-End-User-ID header is required on this route")
    started = time.perf_counter()
    k = body.k or 5
    # Search wider when a session filter will drop some of the results.
    found = store.search(who.tenant_id, user, body.query, k * 4 if body.session_id else k)
    stored = hosted_memories.by_ids(store.db, [int(m["memory_id"]) for m in found])
    memories = []
    for item in found:
        memory = stored.get(int(item["memory_id"]))
        if memory is None or (body.session_id and memory.session_id != body.session_id):
            continue
        memories.append(hosted_memory(memory, score=item["score"]))
    memories = memories[:k]
    return json_answer(
        {
            "memories": memories,
            "context": render_context(found[: len(memories)]),
            "latency_ms": round((time.perf_counter() - started) * 1000, 2),
            "session_id": body.session_id,
        }
    )


def _bulk_result(
    store: Store, who: Caller, index: int, item: BulkItem, user: str | None, deduplicate: bool
) -> dict[str, Any]:
    """Store one bulk item for ``user``; its entry in the bulk answer's ``results``."""
    if user is None:
        return {
            "index": index,
            "status": "rejected",
            "memory_ids": [],
            "reason": "no end user: send X-End-User-ID or end_user_id",
        }
    metadata = dict(item.metadata or {})
    if item.event_type is not None:
        metadata["event_type"] = item.event_type
    answer = store.add_memory(
        who,
        user_id=user,
        text=item.text,
        source=item.source,
        tags=item.tags,
        importance=item.importance,
        session_id=None,
        metadata=metadata,
        client_ref=item.client_ref,
        deduplicate=deduplicate,
    )
    if answer.get("status") == "skipped":
        return {
            "index": index,
            "status": "skipped",
            "memory_ids": list(answer.get("memory_ids") or []),
            "reason": answer.get("reason"),
        }
    return {
        "index": index,
        "status": "created",
        "memory_ids": list(answer["memory_ids"]),
        "reason": None,
    }


def _visible(store: Store, who: Caller, user: str | None, memory_id: int) -> dict[str, Any]:
    found = hosted_memories.visible(store.db, who.tenant_id, user, memory_id)
    if found is None:
        raise HTTPException(404, f"memory {memory_id} not found")
    return found


def _fields(edit: Edit) -> dict[str, Any]:
    """The fields an edit sets (those sent, not null)."""
    return edit.model_dump(exclude_none=True)
