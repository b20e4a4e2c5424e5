"""Fixtures for memorysync-local's own tests: one client per kind of server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

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
