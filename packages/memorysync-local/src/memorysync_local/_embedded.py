"""The server in-process: an httpx ASGI transport bound to a database, no socket."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import httpx
from fastapi import FastAPI

from memorysync_local._extraction.extractor import ExtractorSetting
from memorysync_local._handle import ServerHandle, app_with_keys, database_argument
from memorysync_local._http.app import DEV_API_KEY
from memorysync_local._plans import DEFAULT_TENANT, Plan
from memorysync_local._recall.embedder_setting import EmbedderSetting
from memorysync_local._recall.embedding import DEFAULT_EMBEDDER
from memorysync_local._storage.target import shown

EMBEDDED_BASE_URL = "http://memorysync.local"


class EmbeddedServer(ServerHandle):
    """An in-process server: what an adapter needs to talk to it, in one object.

    ``transport`` is an ``httpx.ASGITransport`` over the app (usable from any
    event loop and thread), ``api_key`` a full key of tenant ``tenant_id``, and
    ``base_url`` the URL to give the client (the host is never resolved).
    ``repr`` never shows the key. Close it (or use ``with``) to close the database.
    """

    def __init__(self, app: FastAPI, *, api_key: str, tenant_id: str, db_path: str) -> None:
        super().__init__(app, api_key=api_key, tenant_id=tenant_id, db_path=db_path)
        self.transport = httpx.ASGITransport(app=app)
        self.base_url = EMBEDDED_BASE_URL

    def close(self) -> None:
        """Close the database. Idempotent."""
        self.store.close()

    def _shut_down(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EmbeddedServer(db_path={shown(self.db_path)!r}, tenant_id={self.tenant_id!r})"


def embedded(
    db_path: str = ":memory:",
    *,
    db: str | None = None,
    api_key: str = DEV_API_KEY,
    tenant_id: str = DEFAULT_TENANT,
    api_keys: Mapping[str, str] | None = None,
    eval_keys: Iterable[str] = (),
    plans: Mapping[str, Plan] | None = None,
    async_extraction: bool = False,
    extractor: ExtractorSetting = None,
    embedder: EmbedderSetting = DEFAULT_EMBEDDER,
) -> EmbeddedServer:
    """Start a server in-process over ``db_path`` and return how to reach it.

    ``db_path`` (or, by name, ``db``) is a SQLite file, ``":memory:"``, or a
    ``postgresql://`` URL (the ``postgres`` extra): ``embedded(db="postgresql://...")``.

    ``api_key`` (default ``"ms_local_dev_key"``, the documented development key)
    is a full key of ``tenant_id``; ``api_keys`` adds more full keys
    (key -> tenant), ``eval_keys`` evaluation keys, ``plans`` quotas.
    ``embedder`` chooses recall by meaning: by default ``"model2vec"``, the static
    model the package ships (offline, no torch); ``"none"`` recalls by words only;
    ``"model2vec:MODEL"``, ``"sentence-transformers[:MODEL_OR_PATH]"``,
    ``"openai[:MODEL]"`` or an ``Embedder`` another model; ``extractor`` (``"rules"``,
    ``"openai[:MODEL]"`` or an ``Extractor``) decides the facts; see :func:`create_app`.

    Example:
        ```python
        import asyncio
        import httpx
        from memorysync_local import embedded

        async def main() -> None:
            with embedded() as srv:
                async with httpx.AsyncClient(
                    transport=srv.transport, base_url=srv.base_url,
                    headers={"X-API-Key": srv.api_key},
                ) as client:
                    answer = await client.post("/v1/memory/add_turn", json={
                        "tenant_id": srv.tenant_id, "user_id": "u1",
                        "text": "I live in Porto.", "source": "demo"})
                    print(answer.json()["processing_status"])  # completed

        asyncio.run(main())
        ```
    """
    db_path = database_argument(db_path, db, ":memory:")
    app = app_with_keys(
        db_path,
        api_key=api_key,
        tenant_id=tenant_id,
        api_keys=api_keys,
        eval_keys=eval_keys,
        plans=plans,
        async_extraction=async_extraction,
        extractor=extractor,
        embedder=embedder,
    )
    return EmbeddedServer(app, api_key=api_key, tenant_id=tenant_id, db_path=db_path)
