"""The FastAPI application: the guard, the error answers and the three route groups
(module-level routers whose handlers reach the store and keys through ``app.state``).

Endpoints are plain ``def`` functions, so FastAPI runs them in its thread pool
and storage work never blocks the event loop; the app keeps no event-loop-bound
state and needs no startup event, so it can be driven by ``httpx.ASGITransport``
from several event loops and threads at once. The routes call the store
(``_service.store.Store``), never the storage's engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI

from memorysync_local._extraction.extractor import ExtractorSetting
from memorysync_local._extraction.llm import load_extractor
from memorysync_local._http import contract_routes, extension_routes, official_client_routes
from memorysync_local._http.errors import install_error_handlers
from memorysync_local._http.guard import BODY_TIMEOUT_SECONDS, GuardMiddleware
from memorysync_local._http.models import ERROR_RESPONSES, error_schemas
from memorysync_local._http.readiness import Readiness
from memorysync_local._plans import DEFAULT_TENANT, KeyRing, Plan
from memorysync_local._recall.embedder_setting import EmbedderSetting, embedder_or_lexical
from memorysync_local._service.store import Store
from memorysync_local._storage.errors import (
    StorageBusy,
    StorageCorrupt,
    StorageError,
    StorageUnwritable,
)
from memorysync_local._version import __version__

DEV_API_KEY = "ms_local_dev_key"


def create_app(
    db_path: str = "./memorysync.db",
    *,
    api_keys: Mapping[str, str] | None = None,
    eval_keys: Iterable[str] = (),
    plans: Mapping[str, Plan] | None = None,
    async_extraction: bool = False,
    extractor: ExtractorSetting = None,
    body_timeout: float = BODY_TIMEOUT_SECONDS,
    embedder: EmbedderSetting = None,
) -> FastAPI:
    """Build a MemorySync-compatible ASGI app over the database ``db_path`` names.

    ``api_keys`` maps each full key to its tenant (default: ``{"ms_local_dev_key":
    "local"}``); ``eval_keys`` are evaluation keys (tenant ``"default"``, no
    ``/org/projects``); ``plans`` gives a key a monthly add limit and a quota mode.
    ``async_extraction`` answers ``distilling`` and extracts on a background
    thread, as the hosted service does; by default a write is readable as soon as
    it is answered. ``db_path`` is a SQLite file or ``":memory:"`` (a
    ``postgresql://`` URL names a PostgreSQL database). ``body_timeout`` is how long
    the server waits for the next piece of a request body before answering 408; served
    (``serve``, ``serve_in_thread``), a request's headers get as long to arrive.
    ``embedder`` turns on recall by meaning (here off by default, unlike ``serve`` and
    ``embedded()``; ``"model2vec"`` is the model the package ships): an ``Embedder``
    or a spec, ``"none"``, ``"model2vec[:MODEL]"``, ``"sentence-transformers[:MODEL]"``
    or ``"openai[:MODEL]"``; one that cannot be loaded logs one WARNING line and the
    server recalls lexically. ``extractor`` is an ``Extractor`` (or one written to an older
    signature: ``ExtractorSetting``) or a spec, ``"rules"``
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
    return app_over(store, keys, body_timeout)


def app_over(store: Store, keys: KeyRing, body_timeout: float = BODY_TIMEOUT_SECONDS) -> FastAPI:
    """The app over an open ``store`` (``serve --workers`` opens each worker's own):
    its state, guard, error answers and the three routers. A storage that cannot keep
    the embedder's vectors closes ``store`` and raises :class:`StorageError`."""
    refuse_unusable_vectors(store)
    app = FastAPI(
        title="memorysync-local",
        version=__version__,
        description="A MemorySync-compatible server on SQLite (offline, single node).",
        responses=ERROR_RESPONSES,
    )
    _document_error_answers(app)
    # What the routes' dependencies (_http.dependencies) read from the request's app.
    app.state.store = store
    app.state.keys = keys
    app.state.readiness = Readiness(store.created_at)
    # The served server bounds reading a request's headers by the same timeout.
    app.state.body_timeout = body_timeout
    install_error_handlers(app)
    app.add_middleware(GuardMiddleware, keys=keys, body_timeout=body_timeout)
    app.include_router(contract_routes.router)
    # The official client's /memory/... routes (its 501 answers first), then the
    # /x-local extension and the inspector.
    app.include_router(official_client_routes.router)
    app.include_router(extension_routes.router)
    return app


def refuse_unusable_vectors(store: Store) -> None:
    """With an embedder, refuse to start on a storage that cannot keep vectors (a
    PostgreSQL role that may not create pgvector's extension): the error names what to
    run. Serving would answer every write and recall 500. Busy or full storage is
    not a reason: the vectors are filled in when it recovers."""
    embedder = store.embedder
    if embedder is None:
        return
    try:
        with store.db.read() as session:
            session.vectors.missing_count(embedder.name)
    except (StorageBusy, StorageUnwritable, StorageCorrupt):
        return
    except StorageError as exc:
        store.close()
        raise StorageError(
            f"cannot serve recall by meaning on {store.db.target}: {exc.message}",
            detail=exc.detail,
        ) from exc


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
