"""What the embedded and the served server have in common: the app, its keys, its store."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import TypeVar

from fastapi import FastAPI

from memorysync_local._extraction.extractor import ExtractorSetting
from memorysync_local._http.app import create_app
from memorysync_local._plans import Plan
from memorysync_local._recall.embedder_setting import EmbedderSetting
from memorysync_local._recall.embedding import DEFAULT_EMBEDDER
from memorysync_local._service.store import Store

_Handle = TypeVar("_Handle", bound="ServerHandle")


def app_with_keys(
    db_path: str,
    *,
    api_key: str,
    tenant_id: str,
    api_keys: Mapping[str, str] | None,
    eval_keys: Iterable[str],
    plans: Mapping[str, Plan] | None,
    async_extraction: bool,
    extractor: ExtractorSetting,
    embedder: EmbedderSetting = DEFAULT_EMBEDDER,
) -> FastAPI:
    """The app over ``db_path`` with ``api_key`` a full key of ``tenant_id`` plus ``api_keys``."""
    return create_app(
        db_path,
        api_keys={api_key: tenant_id, **dict(api_keys or {})},
        eval_keys=eval_keys,
        plans=plans,
        async_extraction=async_extraction,
        extractor=extractor,
        embedder=embedder,
    )


class ServerHandle:
    """A running app with its development key; a context manager that shuts it down."""

    def __init__(self, app: FastAPI, *, api_key: str, tenant_id: str, db_path: str) -> None:
        self.app = app
        self.api_key = api_key
        self.tenant_id = tenant_id
        self.db_path = db_path

    @property
    def store(self) -> Store:
        """The server's storage (for tests that wait on background extraction)."""
        store: Store = self.app.state.store
        return store

    def wait_for_extraction(self, timeout: float | None = 10.0) -> bool:
        """Block until background extraction (``async_extraction=True``) is done."""
        return self.store.wait_for_extraction(timeout)

    def _shut_down(self) -> None:
        """Release what the server holds (each subclass: its own public verb)."""
        self.store.close()

    def __enter__(self: _Handle) -> _Handle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._shut_down()


def database_argument(db_path: str, db: str | None, default: str) -> str:
    """``db`` is ``db_path`` by another name: one of them, not both."""
    if db is None:
        return db_path
    if db_path != default:
        raise TypeError("give the database as db or as db_path, not both")
    return db
