"""Fixtures for memorysync-local's own tests: one client per kind of server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from memorysync_local._plans import Caller
from shared.local_server import client_for


@pytest.fixture(params=["embedded", "served"])
def server(request: pytest.FixtureRequest, make_local_server: Callable[..., Any]) -> Any:
    """The local server, once embedded and once served over real HTTP."""
    return make_local_server(served=request.param == "served")


@pytest.fixture
async def client(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(server) as c:
        yield c


@pytest.fixture
def clients() -> Callable[..., httpx.AsyncClient]:
    return client_for


def keep_verbatim(
    server: Any,
    *texts: str,
    user_id: str = "ana",
    session_id: str | None = None,
    said_at: str | None = None,
) -> None:
    """Store each of ``texts`` as one memory of ``user_id``, as given (no extraction),
    in order, in ``session_id``, said at ``said_at`` (else now)."""
    caller = Caller("k", "local", False, None)
    for text in texts:
        server.store.add_memory(
            caller,
            user_id=user_id,
            text=text,
            source="t",
            tags=None,
            importance=None,
            session_id=session_id,
            metadata=None,
            client_ref=None,
            verbatim=True,
            occurred_at=said_at,
        )
