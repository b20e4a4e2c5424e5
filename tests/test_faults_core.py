"""memorysync-core under every fault: one typed error per failure, a budget that holds.

``MemorySyncAPI`` methods make exactly one attempt and map each failure to its typed
error; ``recall_within_budget`` turns every failure and every odd answer into
``RecallResult.EMPTY`` within its budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from memorysync_core import ContextRenderer, MemorySyncAPI, RecallResult
from memorysync_core._recall.budget import recall_within_budget
from memorysync_core.errors import MemorySyncError
from shared.fake_server import FakeServer, Fault
from shared.faults import FAULTS, ODD_RECALL_ANSWERS, FaultCase, check_error
from shared.secret_guard import TEST_API_KEY, observe
from shared.timing import SLACK

BUDGET = 0.2
EXPLICIT_TIMEOUT = 1.0  # below the 5 s and endless faults, above a busy loopback answer

Call = Callable[[MemorySyncAPI], Awaitable[Any]]

# (method, route template, path to fault, the call)
CALLS: list[tuple[str, str, str, Call]] = [
    (
        "POST",
        "/v1/memory/recall",
        "/v1/memory/recall",
        lambda api: api.recall(user_id="alice", prompt="Where do I live?"),
    ),
    (
        "POST",
        "/v1/memory/add_turn",
        "/v1/memory/add_turn",
        lambda api: api.add_turn(user_id="alice", text="I live in Porto.", role="user"),
    ),
    (
        "GET",
        "/v1/memory/{tenant_id}/{user_id}/list",
        "/v1/memory/{tenant_id}/{user_id}/list",
        lambda api: api.list_memories(user_id="alice"),
    ),
]


@pytest.mark.parametrize(
    ("method", "route", "path", "call"), CALLS, ids=[c[2].split("/")[-1] for c in CALLS]
)
@pytest.mark.parametrize("case", FAULTS, ids=str)
async def test_each_fault_is_one_attempt_and_one_typed_error(
    case: FaultCase, method: str, route: str, path: str, call: Call, fake_server: FakeServer
) -> None:
    fake_server.set_default(path, case.fault)
    async with MemorySyncAPI(
        TEST_API_KEY, base_url=fake_server.base_url, tenant_id="t", timeout=EXPLICIT_TIMEOUT
    ) as api:
        with pytest.raises(MemorySyncError) as caught:
            await call(api)
        observe(caught.value, api, where="core call")
    check_error(caught.value, case, method, route, TEST_API_KEY)
    assert "alice" not in str(caught.value)  # the route template, not the user's path
    assert len(fake_server.requests_to(path)) == 1  # the client alone never retries


@pytest.mark.parametrize("case", FAULTS, ids=str)
async def test_recall_within_budget_is_empty_on_every_fault(
    case: FaultCase, fake_server: FakeServer
) -> None:
    fake_server.seed_memory("alice", "Alice lives in Porto.")
    fake_server.set_default("/v1/memory/recall", case.fault)
    async with MemorySyncAPI(TEST_API_KEY, base_url=fake_server.base_url) as api:
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await recall_within_budget(
            api,
            user_id="alice",
            prompt="Where do I live?",
            k=3,
            timeout=BUDGET,
            renderer=ContextRenderer(),
        )
        assert loop.time() - started < BUDGET + SLACK
        assert result is RecallResult.EMPTY
        fake_server.set_default("/v1/memory/recall", None)
        healthy = await recall_within_budget(
            api,
            user_id="alice",
            prompt="Where do I live?",
            k=3,
            timeout=5.0,
            renderer=ContextRenderer(),
        )
    assert "Alice lives in Porto." in healthy.block


@pytest.mark.parametrize(
    ("name", "answer"), ODD_RECALL_ANSWERS, ids=[n for n, _ in ODD_RECALL_ANSWERS]
)
async def test_recall_within_budget_is_empty_on_unexpected_shapes(
    name: str, answer: Any, fake_server: FakeServer
) -> None:
    fake_server.set_default("/v1/memory/recall", Fault.json(answer))
    async with MemorySyncAPI(TEST_API_KEY, base_url=fake_server.base_url, tenant_id="t") as api:
        result = await recall_within_budget(
            api,
            user_id="alice",
            prompt="Where do I live?",
            k=3,
            timeout=BUDGET,
            renderer=ContextRenderer(),
        )
    assert result is RecallResult.EMPTY
    assert not result.memories
