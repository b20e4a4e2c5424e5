"""The hosted ``/memory/...`` routes the official ``memorysync`` client (1.10.1) calls.

``query``, ``retrieve``, ``get``, ``update``, ``history(id)``, ``export_all``,
``bulk_add`` and ``batch_update`` are served here with the answers that client
parses (``add`` and ``forget`` are in ``_app``). Every other route of that client
answers 501 with a body naming the route, so it fails fast as "unsupported" and
never as a puzzling 404.

The end user is the ``X-End-User-ID`` header, as on the hosted service; ``get``,
``update``, ``history`` and ``export_all`` without it see the whole tenant.
"""

# No `from __future__ import annotations`: FastAPI reads the route annotations.
import json
import time
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from memorysync_local._end_user import read_end_user, user_number
from memorysync_local._models import MAX_INT, MAX_K, MAX_TEXT_CHARS, JsonObject, Short, Text
from memorysync_local._plans import Caller, KeyRing
from memorysync_local._search import render_context
from memorysync_local._store import Store, hosted_memory, scalar_metadata
from memorysync_local._timeutil import render, utc_now
from memorysync_local._users import ensure_revisions

# Fields of a memory the official client may edit (and history(id) tracks).
TRACKED_FIELDS = ("tags", "importance", "metadata", "source", "event_type")
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


def add_compat_routes(app: FastAPI, store: Store, keys: KeyRing) -> None:
    """Register the official client's ``/memory/...`` routes and the 501 answers."""
    ensure_revisions(store.db)

    async def caller(x_api_key: Annotated[str | None, Header()] = None) -> Caller:
        found = keys.lookup(x_api_key) if x_api_key and x_api_key.strip() else None
        if found is None:
            raise HTTPException(401, "missing or unknown X-API-Key header")
        return found

    # First, so that GET /memory/ontology is not read as GET /memory/{memory_id}. The key
    # is checked first: a caller without one learns nothing about what is served.
    keyed = [Depends(caller)]
    for method, path, name in UNSUPPORTED:
        app.add_api_route(
            path,
            _unsupported(method, path, name),
            methods=[method],
            include_in_schema=False,
            dependencies=keyed,
        )
    for prefix in UNSUPPORTED_PREFIXES:
        app.add_api_route(
            prefix + "/{rest:path}",
            _unsupported("*", prefix + "/...", "connector namespaces"),
            methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            include_in_schema=False,
            dependencies=keyed,
        )

    async def end_user(
        x_end_user_id: Annotated[str | None, Header()] = None,
        x_end_user_id_encoding: Annotated[str | None, Header()] = None,
    ) -> str | None:
        # Optional here (get/update/history/export see the tenant without it); when
        # sent, read as on every /memory route (raw, or percent-encoded).
        if x_end_user_id is None or not x_end_user_id.strip():
            return None
        return read_end_user(x_end_user_id, x_end_user_id_encoding)

    Auth = Annotated[Caller, Depends(caller)]
    EndUser = Annotated[str | None, Depends(end_user)]
    MemoryId = Annotated[int, Path(ge=1, le=MAX_INT)]

    def required(user: str | None) -> str:
        if user is None:
            raise HTTPException(400, "X-End-User-ID header is required on this route")
        return user

    def search(body: QueryBody, who: Caller, user: str | None) -> Response:
        started = time.perf_counter()
        k = body.k or 5
        # Search wider when a session filter will drop some of the results.
        found = store.search(
            who.tenant_id, required(user), body.query, k * 4 if body.session_id else k
        )
        rows = _rows(store, [int(m["memory_id"]) for m in found])
        memories = []
        for item in found:
            row = rows.get(int(item["memory_id"]))
            if row is None or (body.session_id and row["session_id"] != body.session_id):
                continue
            memories.append(hosted_memory(row, score=item["score"]))
        memories = memories[:k]
        return _answer(
            {
                "memories": memories,
                "context": render_context(found[: len(memories)]),
                "latency_ms": round((time.perf_counter() - started) * 1000, 2),
                "session_id": body.session_id,
            }
        )

    @app.post("/memory/query", tags=["memory (official client)"])
    def query(body: QueryBody, who: Auth, user: EndUser) -> Response:
        """Search the end user's memories (``MemorySyncClient.query``)."""
        return search(body, who, user)

    @app.post("/memory/retrieve", tags=["memory (official client)"])
    def retrieve(body: QueryBody, who: Auth, user: EndUser) -> Response:
        """The same search as ``/memory/query`` (``MemorySyncClient.retrieve``)."""
        return search(body, who, user)

    @app.get("/memory/export", tags=["memory (official client)"])
    def export_all(who: Auth, user: EndUser) -> Response:
        """Every memory of the end user (or, without ``X-End-User-ID``, of the tenant);
        ``user_id`` is the end user's number (:func:`user_number`)."""
        where, params = _scope(who, user)
        with store.db.connection() as conn:
            rows = conn.execute(
                f"SELECT * FROM memories WHERE {where} ORDER BY created_at, id", params
            ).fetchall()
        return _answer(
            {
                # The official client reads user_id as an integer: the end user's number.
                "user_id": user_number(who.tenant_id, user),
                "end_user_id": user,
                "memories": [hosted_memory(row) for row in rows],
                "generated_at": render(utc_now()),
            }
        )

    @app.post("/memory/bulk-add", tags=["memory (official client)"])
    def bulk_add(body: BulkAddBody, who: Auth, user: EndUser) -> Response:
        """Store up to 50 texts; one result per item (``created`` / ``skipped`` / ``rejected``)."""
        results: list[dict[str, Any]] = []
        for index, item in enumerate(body.items):
            target = item.end_user_id or user
            if target is None:
                results.append(
                    {
                        "index": index,
                        "status": "rejected",
                        "memory_ids": [],
                        "reason": "no end user: send X-End-User-ID or end_user_id",
                    }
                )
                continue
            metadata = dict(item.metadata or {})
            if item.event_type is not None:
                metadata["event_type"] = item.event_type
            answer = store.add_memory(
                who,
                user_id=target,
                text=item.text,
                source=item.source,
                tags=item.tags,
                importance=item.importance,
                session_id=None,
                metadata=metadata,
                client_ref=item.client_ref,
                deduplicate=body.deduplicate,
            )
            if answer.get("status") == "skipped":
                results.append(
                    {
                        "index": index,
                        "status": "skipped",
                        "memory_ids": list(answer.get("memory_ids") or []),
                        "reason": answer.get("reason"),
                    }
                )
            else:
                results.append(
                    {
                        "index": index,
                        "status": "created",
                        "memory_ids": list(answer["memory_ids"]),
                        "reason": None,
                    }
                )
        counts = {
            s: sum(r["status"] == s for r in results) for s in ("created", "skipped", "rejected")
        }
        return _answer({"total": len(results), **counts, "results": results})

    @app.post("/memory/batch-update", status_code=207, tags=["memory (official client)"])
    def batch_update(body: BatchUpdateBody, who: Auth, user: EndUser) -> Response:
        """Edit many memories in one transaction; an id not visible is ``not_found``."""
        ids = [item.memory_id for item in body.items]
        if len(set(ids)) != len(ids):
            raise HTTPException(422, "items must not name the same memory_id twice")
        results = []
        with store.db.write() as conn:
            for index, item in enumerate(body.items):
                changed = _edit(conn, who, user, item.memory_id, item)
                results.append(
                    {
                        "index": index,
                        "memory_id": item.memory_id,
                        "status": "not_found" if changed is None else "updated",
                        "changed_fields": changed or [],
                    }
                )
        updated = sum(r["status"] == "updated" for r in results)
        return _answer(
            {
                "total": len(results),
                "updated": updated,
                "not_found": len(results) - updated,
                "results": results,
            },
            status=207,
        )

    @app.get("/memory/{memory_id}", tags=["memory (official client)"])
    def get_memory(memory_id: MemoryId, who: Auth, user: EndUser) -> Response:
        """One memory (``MemorySyncClient.get``)."""
        return _answer(hosted_memory(_visible(store, who, user, memory_id)))

    @app.patch("/memory/{memory_id}", tags=["memory (official client)"])
    def update_memory(memory_id: MemoryId, body: Edit, who: Auth, user: EndUser) -> Response:
        """Edit tags, importance, metadata, source or event type; the memory after."""
        if not body.model_dump(exclude_none=True):
            raise HTTPException(422, "update needs at least one of " + ", ".join(TRACKED_FIELDS))
        with store.db.write() as conn:
            if _edit(conn, who, user, memory_id, body) is None:
                raise HTTPException(404, f"memory {memory_id} not found")
        return _answer(hosted_memory(_visible(store, who, user, memory_id)))

    @app.get("/memory/{memory_id}/history", tags=["memory (official client)"])
    def memory_history(
        memory_id: MemoryId, who: Auth, user: EndUser, limit: int = 100, offset: int = 0
    ) -> Response:
        """The memory's recorded changes, oldest first; revision 0 is its creation."""
        row = _visible(store, who, user, memory_id)
        with store.db.connection() as conn:
            changes = conn.execute(
                "SELECT * FROM memory_revisions WHERE memory_id = ? ORDER BY id", (memory_id,)
            ).fetchall()
        revisions: list[dict[str, Any]] = [
            {
                "revision": 0,
                "event": "created",
                "changed_fields": [],
                "diff": {},
                "actor": None,
                "created_at": row["created_at"],
            }
        ]
        for number, change in enumerate(changes, start=1):
            revisions.append(
                {
                    "revision": number,
                    "event": "updated",
                    "changed_fields": json.loads(change["changed_fields"]),
                    "diff": json.loads(change["diff"]),
                    "actor": "api_key",
                    "created_at": change["created_at"],
                }
            )
        page = revisions[max(offset, 0) : max(offset, 0) + max(min(limit, 1000), 0)]
        return _answer(
            {
                "memory_id": memory_id,
                "total": len(revisions),
                "revisions": page,
                "tracked_fields": list(TRACKED_FIELDS),
            }
        )


def _unsupported(method: str, path: str, name: str) -> Any:
    def handler(request: Request) -> Response:
        route = f"{request.method} {path}" if method == "*" else f"{method} {path}"
        return _answer(
            {
                "detail": f"memorysync-local does not implement {route} "
                f"(official client: {name}); see docs/users-data.md for what it serves",
                "route": route,
                "unsupported": True,
            },
            status=501,
        )

    return handler


def _scope(who: Caller, user: str | None) -> tuple[str, list[Any]]:
    if user is None:
        return "tenant_id = ?", [who.tenant_id]
    return "tenant_id = ? AND user_id = ?", [who.tenant_id, user]


def _rows(store: Store, ids: list[int]) -> dict[int, Any]:
    if not ids:
        return {}
    with store.db.connection() as conn:
        rows = conn.execute(
            f"SELECT * FROM memories WHERE id IN ({', '.join('?' * len(ids))})", ids
        ).fetchall()
    return {int(r["id"]): r for r in rows}


def _visible(store: Store, who: Caller, user: str | None, memory_id: int) -> Any:
    where, params = _scope(who, user)
    with store.db.connection() as conn:
        row = conn.execute(
            f"SELECT * FROM memories WHERE id = ? AND {where}", [memory_id, *params]
        ).fetchone()
        updated = conn.execute(
            "SELECT MAX(created_at) FROM memory_revisions WHERE memory_id = ?", (memory_id,)
        ).fetchone()
    if row is None:
        raise HTTPException(404, f"memory {memory_id} not found")
    return _Row(row, updated[0])


class _Row(dict[str, Any]):
    """A memory row with the time of its last change."""

    def __init__(self, row: Any, updated_at: str | None) -> None:
        super().__init__({k: row[k] for k in row.keys()})  # noqa: SIM118 (sqlite3.Row)
        self["updated_at"] = updated_at


def _edit(conn: Any, who: Caller, user: str | None, memory_id: int, edit: Edit) -> list[str] | None:
    """Apply ``edit`` to a visible memory, recording a revision; the changed fields
    (None when the memory is not visible)."""
    where, params = _scope(who, user)
    row = conn.execute(
        f"SELECT * FROM memories WHERE id = ? AND {where}", [memory_id, *params]
    ).fetchone()
    if row is None:
        return None
    metadata = json.loads(row["metadata"])
    before = {
        "tags": None if row["tags"] is None else json.loads(row["tags"]),
        "importance": row["importance"],
        "metadata": {k: v for k, v in metadata.items() if k != "event_type"},
        "source": row["source"],
        "event_type": metadata.get("event_type"),
    }
    after = dict(before)
    for name, value in edit.model_dump(exclude_none=True).items():
        if name in TRACKED_FIELDS:
            after[name] = scalar_metadata(value) if name == "metadata" else value
    changed = [name for name in TRACKED_FIELDS if after[name] != before[name]]
    if not changed:
        return []
    stored = dict(after["metadata"] or {})
    if row["session_id"] is not None:
        stored["session_id"] = row["session_id"]
    if after["event_type"] is not None:
        stored["event_type"] = after["event_type"]
    conn.execute(
        "UPDATE memories SET tags = ?, importance = ?, metadata = ?, source = ? WHERE id = ?",
        (
            None if after["tags"] is None else json.dumps(after["tags"]),
            after["importance"],
            json.dumps(stored, ensure_ascii=False),
            after["source"],
            memory_id,
        ),
    )
    diff = {name: {"old": before[name], "new": after[name]} for name in changed}
    conn.execute(
        "INSERT INTO memory_revisions (memory_id, changed_fields, diff, created_at) "
        "VALUES (?, ?, ?, ?)",
        (memory_id, json.dumps(changed), json.dumps(diff, ensure_ascii=False), render(utc_now())),
    )
    return changed


def _answer(content: Any, status: int = 200) -> Response:
    body = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return Response(body.encode("utf-8"), status_code=status, media_type="application/json")
