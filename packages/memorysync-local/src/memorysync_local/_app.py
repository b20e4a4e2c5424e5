"""The FastAPI application: every route of the MemorySync contract.

Endpoints are plain ``def`` functions, so FastAPI runs them in its thread pool
and SQLite work never blocks the event loop; the app keeps no event-loop-bound
state and needs no startup event, so it can be driven by ``httpx.ASGITransport``
from several event loops and threads at once.
"""

# No `from __future__ import annotations`: FastAPI reads the dependency
# annotations of the route functions defined inside _add_routes at runtime.
import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from typing import Annotated, Any
from urllib.parse import unquote_to_bytes

from fastapi import Depends, FastAPI, Header, HTTPException, Path, Query, Request, Response

from memorysync_local._end_user import CAPABILITY, read_end_user
from memorysync_local._errors import install_error_handlers
from memorysync_local._extract import Extractor
from memorysync_local._guard import BODY_TIMEOUT_SECONDS, GuardMiddleware
from memorysync_local._llm_extract import load_extractor
from memorysync_local._models import (
    ERROR_RESPONSES,
    MAX_INT,
    AddMemoryBody,
    AddTurnBody,
    ForgetBody,
    HistoryAppendBody,
    HistoryDeleteBody,
    HistoryListBody,
    RecallBody,
    error_schemas,
)
from memorysync_local._plans import DEFAULT_TENANT, Caller, KeyRing, Plan
from memorysync_local._routes_compat import add_compat_routes
from memorysync_local._routes_local import add_local_routes
from memorysync_local._search import render_context
from memorysync_local._semantic import EmbedderSetting, embedder_or_lexical
from memorysync_local._store import QuotaExceeded, Store
from memorysync_local._validity import ReadWindow
from memorysync_local._version import __version__

DEV_API_KEY = "ms_local_dev_key"
DEFAULT_K = 5


def create_app(
    db_path: str = "./memorysync.db",
    *,
    api_keys: Mapping[str, str] | None = None,
    eval_keys: Iterable[str] = (),
    plans: Mapping[str, Plan] | None = None,
    async_extraction: bool = False,
    extractor: Extractor | str | None = None,
    body_timeout: float = BODY_TIMEOUT_SECONDS,
    embedder: EmbedderSetting = None,
) -> FastAPI:
    """Build a MemorySync-compatible ASGI app over the SQLite database at ``db_path``.

    ``api_keys`` maps each full key to its tenant (default: ``{"ms_local_dev_key":
    "local"}``); ``eval_keys`` are evaluation keys (tenant ``"default"``, no
    ``/org/projects``); ``plans`` gives a key a monthly add limit and a quota mode.
    ``async_extraction`` answers ``distilling`` and extracts on a background
    thread, as the hosted service does; by default a write is readable as soon as
    it is answered. ``db_path`` may be ``":memory:"``. ``body_timeout`` is how long
    the server waits for the next piece of a request body before answering 408.
    ``embedder`` turns on recall by meaning (the ``semantic`` extra): an
    ``Embedder`` or a spec, ``"none"``, ``"model2vec[:MODEL]"`` or
    ``"openai[:MODEL]"``; one that cannot be loaded logs one WARNING line and the
    server recalls lexically. ``extractor`` is an ``Extractor`` or a spec, ``"rules"``
    (the default) or ``"openai[:MODEL]"`` (the opt-in LLM extractor, which falls back
    to the rules on any failure).

    The store is closed by ``app.state.store.close()`` (the app has no lifespan).

    Example:
        ```python
        import uvicorn
        from memorysync_local import create_app

        app = create_app("./memorysync.db", api_keys={"ms_dev": "local"})
        uvicorn.run(app, host="127.0.0.1", port=8765)
        ```
    """
    keys = KeyRing(
        dict(api_keys) if api_keys is not None else {DEV_API_KEY: DEFAULT_TENANT},
        tuple(eval_keys),
        dict(plans or {}),
    )
    store = Store(
        db_path,
        load_extractor(extractor),
        async_extraction=async_extraction,
        embedder=embedder_or_lexical(embedder),
    )
    app = FastAPI(
        title="memorysync-local",
        version=__version__,
        description="A MemorySync-compatible server on SQLite (offline, single node).",
        responses=ERROR_RESPONSES,
    )
    _document_error_answers(app)
    app.state.store = store
    app.state.keys = keys
    install_error_handlers(app)
    app.add_middleware(GuardMiddleware, keys=keys, body_timeout=body_timeout)
    _add_routes(app, store, keys)
    # The official client's /memory/... routes, the /x-local extension and the inspector.
    add_compat_routes(app, store, keys)
    add_local_routes(app, store, keys)
    return app


def _document_error_answers(app: FastAPI) -> None:
    """Add the error answers' schemas, which every route refers to, to the OpenAPI document."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schemas = build().setdefault("components", {}).setdefault("schemas", {})
            for name, schema in error_schemas().items():
                schemas.setdefault(name, schema)
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way


def _add_routes(app: FastAPI, store: Store, keys: KeyRing) -> None:
    # The key checks are dict lookups: async, so they cost no worker-thread hop.
    async def caller(x_api_key: Annotated[str | None, Header()] = None) -> Caller:
        if x_api_key is None or not x_api_key.strip():
            raise HTTPException(401, "missing X-API-Key header")
        found = keys.lookup(x_api_key)
        if found is None:
            raise HTTPException(401, "unknown API key")
        return found

    async def end_user(
        x_end_user_id: Annotated[str | None, Header()] = None,
        x_end_user_id_encoding: Annotated[str | None, Header()] = None,
    ) -> str:
        return read_end_user(x_end_user_id, x_end_user_id_encoding)

    Auth = Annotated[Caller, Depends(caller)]
    EndUser = Annotated[str, Depends(end_user)]

    def own(who: Caller, tenant_id: str) -> None:
        if tenant_id != who.tenant_id:
            raise HTTPException(403, f"tenant_id {tenant_id[:80]!r} is not owned by this API key")

    def reads_blocked(who: Caller) -> bool:
        """True when a free key is over its limit (reads empty); raises for evaluation."""
        if not store.over_limit(who):
            return False
        if who.plan is not None and who.plan.mode == "evaluation":
            raise QuotaExceeded(store.retry_after())
        return True

    @app.get("/health", tags=["meta"], response_model=dict[str, str | list[str]])
    def health() -> Response:
        """Liveness probe (no key needed), with the protocol extensions this server has."""
        return _answer({"status": "ok", "version": __version__, "capabilities": [CAPABILITY]})

    @app.get("/org/projects", tags=["org"], response_model=list[dict[str, Any]])
    def projects(who: Auth) -> Response:
        """The key's project; evaluation keys have no ``projects:read`` scope (403)."""
        if who.evaluation:
            raise HTTPException(403, "evaluation keys lack the projects:read scope")
        created = store.created_at()
        digest = hashlib.sha256(who.tenant_id.encode("utf-8", "surrogatepass")).hexdigest()
        return _answer(
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

    @app.post("/v1/memory/add_turn", tags=["memory"], response_model=dict[str, Any])
    def add_turn(body: AddTurnBody, who: Auth) -> Response:
        """Send one turn to fact extraction (only a user turn's durable facts are stored)."""
        own(who, body.tenant_id)
        role, text = _resolve_role(body)
        return _answer(
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

    @app.post("/v1/memory/recall", tags=["memory"], response_model=dict[str, Any])
    def recall(body: RecallBody, who: Auth) -> Response:
        """The user's most relevant memories, and a grouped, prompt-ready context block."""
        own(who, body.tenant_id)
        started = time.perf_counter()
        if reads_blocked(who):
            memories: list[dict[str, Any]] = []
        else:
            memories = store.search(
                who.tenant_id, body.user_id, body.prompt, body.k or DEFAULT_K, _window(body)
            )
        return _answer(
            {
                "context": render_context(memories),
                "memories": memories,
                "latency_ms": round((time.perf_counter() - started) * 1000, 2),
            }
        )

    @app.post("/v1/memory/query", tags=["memory"], response_model=dict[str, Any])
    def query(body: RecallBody, who: Auth) -> Response:
        """Plain search over the user's memories."""
        own(who, body.tenant_id)
        if reads_blocked(who):
            return _answer({"memories": []})
        return _answer(
            {
                "memories": store.search(
                    who.tenant_id, body.user_id, body.prompt, body.k or DEFAULT_K, _window(body)
                )
            }
        )

    @app.get("/v1/memory/status/{memory_id}", tags=["memory"], response_model=dict[str, Any])
    def status(
        memory_id: Annotated[str, Path(max_length=40, description="12 or m_12")], who: Auth
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
        return _answer(found)

    @app.get(
        "/v1/memory/{tenant_id}/{user_id:path}/list", tags=["memory"], response_model=dict[str, Any]
    )
    def list_memories(
        request: Request,
        tenant_id: str,
        user_id: str,
        who: Auth,
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
        own(who, tenant_id)
        if reads_blocked(who):
            return _answer({"memories": [], "total": 0})
        memories, total = store.list_memories(
            tenant_id, user_id, limit, offset, ReadWindow(history=history)
        )
        return _answer({"memories": memories, "total": total})

    @app.delete("/memory/forget", tags=["memory"], response_model=list[int])
    def forget(body: ForgetBody, who: Auth, user: EndUser) -> Response:
        """Delete the end user's memories by ids or filters; the deleted ids."""
        return _answer(
            store.forget(
                who.tenant_id,
                user,
                memory_ids=body.memory_ids,
                filters=body.filters.model_dump(exclude_none=True) if body.filters else None,
                dry_run=bool(body.dry_run),
            )
        )

    @app.post("/memory/add", tags=["memory"], response_model=dict[str, Any])
    def add_memory(body: AddMemoryBody, who: Auth, user: EndUser) -> Response:
        """Store the durable facts of a text; a memory object or a skipped answer."""
        return _answer(
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
            )
        )

    @app.post("/v1/history/append", tags=["history"], response_model=dict[str, Any])
    def history_append(body: HistoryAppendBody, who: Auth) -> Response:
        """Store transcript turns verbatim; user turns also go to fact extraction."""
        own(who, body.tenant_id)
        return _answer(
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

    @app.post("/v1/history/list", tags=["history"], response_model=dict[str, Any])
    def history_list(body: HistoryListBody, who: Auth) -> Response:
        """A session's turns, oldest first (``limit``: the latest N)."""
        own(who, body.tenant_id)
        if reads_blocked(who):
            return _answer({"items": [], "total": 0})
        items, total = store.list_history(
            who.tenant_id, body.user_id, body.session_id, body.source, body.limit
        )
        return _answer({"items": items, "total": total})

    @app.post("/v1/history/delete", tags=["history"], response_model=dict[str, list[str]])
    def history_delete(body: HistoryDeleteBody, who: Auth) -> Response:
        """Delete turns by session or ids (and their facts with ``delete_derived_facts``)."""
        own(who, body.tenant_id)
        return _answer(
            store.delete_history(
                who.tenant_id,
                body.user_id,
                session_id=body.session_id,
                ids=body.ids,
                source=body.source,
                delete_derived_facts=body.delete_derived_facts,
            )
        )


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
    # a bad byte never becomes a surrogate that SQLite cannot bind.
    return (
        unquote_to_bytes(tenant).decode("utf-8", "replace"),
        unquote_to_bytes(user).decode("utf-8", "replace"),
    )


def _answer(content: Any) -> Response:
    """A JSON answer rendered by the stdlib encoder.

    Routes return this rather than a dict so FastAPI's response serializer (which
    refuses nesting its own limit considers too deep) never runs after a write has
    been committed: what a route answers is what it validated or stored, and the
    stdlib encoder renders anything that passed the input checks.
    """
    body = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return Response(body.encode("utf-8"), media_type="application/json")


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
