"""Fixtures for autogen-memorysync's tests: memories bound to a scripted server, checks."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import pytest
import respx
from autogen_core.models import LLMMessage, SystemMessage, UserMessage
from autogen_ext.models.replay import ReplayChatCompletionClient

from autogen_memorysync import MemorySyncMemory

BASE_URL = "http://memorysync.test"
API_KEY = "ms_test_secret_key_do_not_leak"
TENANT = "tenant-test"
BLOCK = re.compile(r"memorysync_[0-9a-f]{16}")


def recall_answer(*facts: str) -> dict[str, Any]:
    """A recall answer for ``facts`` in the contract's shape."""
    return {
        "context": "\n".join(f"- {fact}" for fact in facts),
        "memories": [
            {"memory_id": index + 1, "value": fact, "score": round(0.9 - index / 10, 2)}
            for index, fact in enumerate(facts)
        ],
        "latency_ms": 1.0,
    }


@pytest.fixture
def server() -> Iterator[respx.MockRouter]:
    """respx standing in for the server at BASE_URL (route-level answers and the wire)."""
    with respx.mock(base_url=BASE_URL, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def make_memory() -> AsyncIterator[Callable[..., MemorySyncMemory]]:
    """Build memories talking to BASE_URL with a fixed tenant; closed after the test."""
    made: list[MemorySyncMemory] = []

    def make(**overrides: Any) -> MemorySyncMemory:
        settings: dict[str, Any] = {
            "user_id": "alice",
            "api_key": API_KEY,
            "base_url": BASE_URL,
            "tenant_id": TENANT,
        }
        settings.update(overrides)
        memory = MemorySyncMemory(**settings)
        made.append(memory)
        return memory

    yield make
    for memory in made:
        await memory.close()


def model_inputs(client: ReplayChatCompletionClient) -> list[list[LLMMessage]]:
    """Every message list the replay client received, in call order."""
    return [list(call["messages"]) for call in client.create_calls]


def blocks(messages: Sequence[LLMMessage], source: str | None = None) -> list[UserMessage]:
    """The MemorySync blocks in ``messages`` (of one memory when ``source`` is given)."""
    return [
        m
        for m in messages
        if isinstance(m, UserMessage)
        and BLOCK.fullmatch(m.source)
        and (source is None or m.source == source)
    ]


def assert_system_contiguous(messages: Sequence[LLMMessage]) -> None:
    """Every SystemMessage sits in one run at the head of the input."""
    positions = [i for i, m in enumerate(messages) if isinstance(m, SystemMessage)]
    assert positions == list(range(len(positions))), [type(m).__name__ for m in messages]


def last_user_index(messages: Sequence[LLMMessage]) -> int:
    """Index of the last UserMessage that is not a MemorySync block."""
    for index in range(len(messages) - 1, -1, -1):
        m = messages[index]
        if isinstance(m, UserMessage) and not BLOCK.fullmatch(m.source):
            return index
    raise AssertionError("no user message in the model input")


class Kit:
    """Helpers for the tests (test modules cannot import each other under importlib mode)."""

    BASE_URL = BASE_URL
    BLOCK = BLOCK
    API_KEY = API_KEY
    TENANT = TENANT
    recall_answer = staticmethod(recall_answer)
    model_inputs = staticmethod(model_inputs)
    blocks = staticmethod(blocks)
    assert_system_contiguous = staticmethod(assert_system_contiguous)
    last_user_index = staticmethod(last_user_index)


@pytest.fixture
def kit() -> type[Kit]:
    """The helpers above."""
    return Kit
