"""Connection sharing: one httpx client per (loop, base URL, key, transport)."""

from __future__ import annotations

import asyncio

import httpx

from memorysync_core import MemorySyncAPI, UserMemory
from shared.core_state import shared_client_count
from shared.fake_server import FakeServer

from .conftest import API_KEY


async def test_two_instances_with_the_same_key_and_url_share_one_client(
    fake_server: FakeServer,
) -> None:
    loop = asyncio.get_running_loop()
    first = MemorySyncAPI(API_KEY, base_url=fake_server.base_url, tenant_id="t")
    second = MemorySyncAPI(API_KEY, base_url=fake_server.base_url, tenant_id="t")
    await first.query(user_id="a", prompt="p")
    await second.query(user_id="b", prompt="p")
    assert first._client() is second._client()
    assert shared_client_count(loop) == 1
    client = first._client()
    await first.aclose()
    assert not client.is_closed
    await second.query(user_id="b", prompt="still works")
    await second.aclose()
    assert client.is_closed
    assert shared_client_count(loop) == 0


async def test_a_different_key_or_transport_gets_its_own_client(fake_server: FakeServer) -> None:
    one = MemorySyncAPI(API_KEY, base_url=fake_server.base_url, tenant_id="t")
    other_key = MemorySyncAPI("ms_other_key", base_url=fake_server.base_url, tenant_id="t")
    transport = httpx.AsyncHTTPTransport()
    own_transport = MemorySyncAPI(
        API_KEY, base_url=fake_server.base_url, tenant_id="t", transport=transport
    )
    await one.query(user_id="a", prompt="p")
    await other_key.query(user_id="a", prompt="p")
    await own_transport.query(user_id="a", prompt="p")
    clients = {id(one._client()), id(other_key._client()), id(own_transport._client())}
    assert len(clients) == 3
    assert [r.headers["x-api-key"] for r in fake_server.requests] == [
        API_KEY,
        "ms_other_key",
        API_KEY,
    ]
    for api in (one, other_key, own_transport):
        await api.aclose()


async def test_close_is_idempotent_and_async_with_closes(fake_server: FakeServer) -> None:
    async with MemorySyncAPI(API_KEY, base_url=fake_server.base_url, tenant_id="t") as api:
        await api.query(user_id="a", prompt="p")
        client = api._client()
    assert client.is_closed
    await api.aclose()
    await api.aclose()
    assert shared_client_count(asyncio.get_running_loop()) == 0


async def test_many_user_memories_on_one_api_cost_one_client(fake_server: FakeServer) -> None:
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url, tenant_id="t")
    memories = [
        UserMemory(api, user_id=f"user-{i}", session_id="s", surface="autogen") for i in range(20)
    ]
    await asyncio.gather(*(m.recall("hello") for m in memories))
    assert shared_client_count(asyncio.get_running_loop()) == 1
    await api.aclose()


def test_construction_builds_no_client() -> None:
    # What construction costs is measured in bench/ (many users in one process).
    api = MemorySyncAPI(API_KEY, base_url="http://127.0.0.1:9")
    assert api._leases == {}


def test_an_instance_used_on_two_loops_gets_a_client_on_each(fake_server: FakeServer) -> None:
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url, tenant_id="t")

    async def use() -> httpx.AsyncClient:
        await api.query(user_id="a", prompt="p")
        client = api._client()
        await api.aclose()  # a client belongs to its loop: close it before the loop ends
        return client

    first = asyncio.run(use())
    second = asyncio.run(use())
    assert first is not second
    assert first.is_closed
    assert second.is_closed
    assert len(fake_server.requests_to("/v1/memory/query")) == 2
