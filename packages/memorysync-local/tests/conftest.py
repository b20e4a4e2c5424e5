"""Fixtures for memorysync-local's own tests: one client per kind of server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

ClientFactory = Callable[..., httpx.AsyncClient]


def client_for(server: Any, api_key: str | None = None, **headers: str) -> httpx.AsyncClient:
    """An httpx client for an embedded server (ASGI transport) or a served one (loopback)."""
    sent = {"X-API-Key": server.api_key if api_key is None else api_key, **headers}
    transport = getattr(server, "transport", None)
    return httpx.AsyncClient(
        transport=transport, base_url=server.base_url, headers=sent, timeout=30
    )


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
