"""Single-flight, cached tenant resolution against the fake server."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memorysync_core import MemorySyncAPI, ServerError
from shared.fake_server import FakeServer, Fault

from .conftest import API_KEY


async def test_fifty_concurrent_first_calls_make_one_request(fake_server: FakeServer) -> None:
    gate = threading.Event()
    fake_server.script("/org/projects", [Fault.gate(gate)])
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    calls = [asyncio.ensure_future(api.resolve_tenant_id()) for _ in range(50)]
    await fake_server.wait_for_requests_async(1, "/org/projects")
    gate.set()
    assert await asyncio.gather(*calls) == ["fake"] * 50
    assert await api.resolve_tenant_id() == "fake"
    assert len(fake_server.requests_to("/org/projects")) == 1
    await api.aclose()


async def test_a_cancelled_waiter_does_not_cancel_the_shared_resolution(
    fake_server: FakeServer,
) -> None:
    gate = threading.Event()
    fake_server.script("/org/projects", [Fault.gate(gate)])
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    impatient = asyncio.ensure_future(api.resolve_tenant_id())
    patient = asyncio.ensure_future(api.resolve_tenant_id())
    await fake_server.wait_for_requests_async(1, "/org/projects")
    impatient.cancel()
    with pytest.raises(asyncio.CancelledError):
        await impatient
    gate.set()
    assert await patient == "fake"
    assert len(fake_server.requests_to("/org/projects")) == 1
    await api.aclose()


async def test_a_failure_is_raised_to_every_waiter_and_not_cached(fake_server: FakeServer) -> None:
    fake_server.script("/org/projects", [Fault.status(503)])
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    results = await asyncio.gather(
        api.resolve_tenant_id(), api.resolve_tenant_id(), return_exceptions=True
    )
    assert all(isinstance(r, ServerError) for r in results)
    assert api.tenant_id is None
    assert await api.resolve_tenant_id() == "fake"
    assert len(fake_server.requests_to("/org/projects")) == 2
    await api.aclose()


@pytest.mark.parametrize("status", [401, 403])
async def test_an_unauthorised_key_uses_the_default_tenant_and_caches_it(
    fake_server: FakeServer, status: int
) -> None:
    fake_server.script("/org/projects", [Fault.status(status)])
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    assert await api.resolve_tenant_id() == "default"
    await api.recall(user_id="u", prompt="p")
    assert fake_server.requests_to("/v1/memory/recall")[0].json["tenant_id"] == "default"
    assert len(fake_server.requests_to("/org/projects")) == 1
    await api.aclose()


async def test_an_explicit_tenant_skips_resolution(fake_server: FakeServer) -> None:
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url, tenant_id="mine")
    await api.query(user_id="u", prompt="p")
    assert fake_server.requests_to("/org/projects") == []
    assert fake_server.requests_to("/v1/memory/query")[0].json["tenant_id"] == "mine"
    await api.aclose()


async def test_warm_up_resolves_the_tenant_and_never_raises(fake_server: FakeServer) -> None:
    fake_server.script("/org/projects", [Fault.status(500)])
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    await api.warm_up()
    assert api.tenant_id is None
    await api.warm_up()
    assert api.tenant_id == "fake"
    await api.aclose()
