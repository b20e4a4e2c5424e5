"""Fixtures that run memorysync-local embedded and served on loopback.

Loaded as a pytest plugin by the root ``conftest.py``; every package's tests
can use these fixtures without importing anything.

Fixtures
--------
``local_server``
    An embedded server (``memorysync_local.EmbeddedServer``) over a fresh
    SQLite file in the test's ``tmp_path``. Attributes: ``transport`` (an
    ``httpx.ASGITransport``), ``api_key`` (``"ms_local_dev_key"``),
    ``base_url`` (``"http://memorysync.local"``), ``tenant_id`` (``"local"``),
    ``db_path``, ``app``. One line builds an adapter against it::

        api = MemorySyncAPI(api_key=local_server.api_key,
                            base_url=local_server.base_url,
                            transport=local_server.transport)

``served_local_server``
    The same over real HTTP: uvicorn on a free loopback port in a background
    thread, started before the test and stopped after it
    (``memorysync_local.ServedServer``: ``base_url``, ``api_key``,
    ``tenant_id``, ``db_path``, ``app``).

``make_local_server``
    A factory for servers configured per test, embedded or served, each
    stopped after the test (on PostgreSQL with ``MEMORYSYNC_TEST_BACKEND=postgres``:
    see ``shared.postgres``)::

        def test_quota(make_local_server):
            srv = make_local_server(
                served=True,
                eval_keys=["ms_eval"],
                api_keys={"ms_other": "acme"},          # extra full keys -> tenant
                plans={"ms_local_dev_key": Plan("free", 1)},
                async_extraction=False,
            )

    Keyword arguments are those of ``memorysync_local.embedded`` /
    ``serve_in_thread`` (``api_key``, ``tenant_id``, ``api_keys``,
    ``eval_keys``, ``plans``, ``async_extraction``, ``extractor``);
    ``db_path`` defaults to a fresh file in ``tmp_path``.

Reading what the server stored (without going through the API)
--------------------------------------------------------------
``stored_memories(server_or_path, tenant_id, user_id)`` -> list of dicts
(``id``, ``text``, ``kind``, ``source``, ``session_id``, ``metadata`` (dict),
``origin`` (``add_turn``/``add``/``history``), ``history_id`` (``h_...`` or
None), ``created_at``), oldest first.

``stored_history(server_or_path, tenant_id, user_id, session_id=None)`` ->
list of dicts (``id`` as ``h_...``, ``session_id``, ``source``, ``role``,
``content``, ``seq``, ``occurred_at``, ``payload``, ``idempotency_key``,
``created_at``), in arrival order.

``stored_turn_receipts(server_or_path, tenant_id, user_id)`` -> the add_turn
receipts the replay rule compares (``speaker``, ``occurred_at``,
``request_id``, ``received_at``).

``execute(server_or_path, sql, params)`` changes the database directly (``?``
placeholders on either backend), as an older server or another tool would have.

``server_or_path`` is a server object with a ``db_path`` or a path (or a
PostgreSQL URL); a SQLite file is opened read-only, so these helpers never change
what they read.

Talking to a server
-------------------
``client_for(server, api_key=None, **headers)`` -> an ``httpx.AsyncClient``
with the server's base URL and key (or ``api_key``), over the embedded
transport or real HTTP, whichever the server is.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest

HISTORY_ID_BASE = 1_000_000_000_000


def client_for(server: Any, api_key: str | None = None, **headers: str) -> httpx.AsyncClient:
    """An httpx client for an embedded server (ASGI transport) or a served one (loopback)."""
    sent = {"X-API-Key": server.api_key if api_key is None else api_key, **headers}
    return httpx.AsyncClient(
        transport=getattr(server, "transport", None),
        base_url=server.base_url,
        headers=sent,
        timeout=30,
    )


class _HasDbPath(Protocol):
    db_path: str


def _db_file(source: _HasDbPath | str | Path) -> str:
    path = str(source) if isinstance(source, (str, Path)) else source.db_path
    if path in ("", ":memory:"):
        raise ValueError("stored_* helpers read a database file; this server is ':memory:'")
    return path


def _rows(source: _HasDbPath | str | Path, sql: str, params: tuple[Any, ...]) -> list[Any]:
    target = _db_file(source)
    if target.startswith(("postgresql://", "postgres://")):
        from shared.postgres import query_rows  # imported here: it is a plugin too

        return query_rows(target, sql, params)
    uri = Path(target).resolve().as_uri() + "?mode=ro"
    with closing(sqlite3.connect(uri, uri=True, timeout=30)) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute(sql, params).fetchall()


def execute(source: _HasDbPath | str | Path, sql: str, params: tuple[Any, ...] = ()) -> None:
    """Change a server's database behind its back (``?`` placeholders, either backend):
    what an older server, another tool or a damaged file left there."""
    target = _db_file(source)
    if target.startswith(("postgresql://", "postgres://")):
        from shared.postgres import execute_sql  # imported here: it is a plugin too

        execute_sql(target, sql, params)
        return
    with closing(sqlite3.connect(target, timeout=30)) as conn:
        conn.execute(sql, params)
        conn.commit()


def stored_memories(
    source: _HasDbPath | str | Path, tenant_id: str, user_id: str
) -> list[dict[str, Any]]:
    """The memories stored for one end user, oldest first."""
    rows = _rows(
        source,
        "SELECT * FROM memories WHERE tenant_id = ? AND user_id = ? ORDER BY id",
        (tenant_id, user_id),
    )
    return [
        {
            "id": int(r["id"]),
            "text": r["text"],
            "kind": r["kind"],
            "source": r["source"],
            "session_id": r["session_id"],
            "metadata": json.loads(r["metadata"]),
            "origin": r["origin"],
            "history_id": None
            if r["history_id"] is None
            else f"h_{HISTORY_ID_BASE + int(r['history_id'])}",
            "created_at": r["created_at"],
        }
        for r in rows
    ]


def stored_history(
    source: _HasDbPath | str | Path, tenant_id: str, user_id: str, session_id: str | None = None
) -> list[dict[str, Any]]:
    """The transcript turns stored for one end user (one session if given), by arrival."""
    sql = "SELECT * FROM history WHERE tenant_id = ? AND user_id = ?"
    params: tuple[Any, ...] = (tenant_id, user_id)
    if session_id is not None:
        sql += " AND session_id = ?"
        params += (session_id,)
    return [
        {
            "id": f"h_{HISTORY_ID_BASE + int(r['id'])}",
            "session_id": r["session_id"],
            "source": r["source"],
            "role": r["role"],
            "content": r["content"],
            "seq": r["seq"],
            "occurred_at": r["occurred_at"],
            "payload": None if r["payload"] is None else json.loads(r["payload"]),
            "idempotency_key": r["idempotency_key"],
            "created_at": r["created_at"],
        }
        for r in _rows(source, sql + " ORDER BY id", params)
    ]


def stored_turn_receipts(
    source: _HasDbPath | str | Path, tenant_id: str, user_id: str
) -> list[dict[str, Any]]:
    """The add_turn receipts (what the 30-day replay rule compares), oldest first."""
    rows = _rows(
        source,
        "SELECT speaker, occurred_at, request_id, received_at FROM turn_receipts "
        "WHERE tenant_id = ? AND user_id = ? ORDER BY id",
        (tenant_id, user_id),
    )
    return [dict(r) for r in rows]


@pytest.fixture
def make_local_server(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Any]]:
    """Factory: ``make_local_server(served=False, **kwargs)`` -> a started server.

    Without a ``db_path`` of its own, a server gets a fresh SQLite file, or, when the
    suite runs on PostgreSQL (``MEMORYSYNC_TEST_BACKEND=postgres``), a fresh database.
    """
    from memorysync_local import embedded, serve_in_thread
    from shared.postgres import database_for, suite_backend  # a plugin too: not at import

    started: list[Any] = []
    drops: list[Callable[[], None]] = []
    on_postgres = suite_backend() == "postgres"

    def make(*, served: bool = False, **kwargs: Any) -> Any:
        if "db_path" not in kwargs and on_postgres:
            kwargs["db_path"], drop = database_for(request)
            drops.append(drop)
        kwargs.setdefault("db_path", str(tmp_path / f"memorysync-{len(started)}.db"))
        server = serve_in_thread(**kwargs) if served else embedded(**kwargs)
        started.append(server)
        return server

    yield make
    try:
        for server in reversed(started):
            if served_stop := getattr(server, "stop", None):
                served_stop()
            else:
                server.close()
    finally:
        for drop in drops:
            drop()


@pytest.fixture
def local_server(make_local_server: Callable[..., Any]) -> Any:
    """An embedded memorysync-local over a fresh database file."""
    return make_local_server()


@pytest.fixture
def served_local_server(make_local_server: Callable[..., Any]) -> Any:
    """memorysync-local served by uvicorn on a free loopback port for this test."""
    return make_local_server(served=True)
