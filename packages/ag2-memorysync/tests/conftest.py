"""Test helpers for ag2-memorysync: model-less agents, a recording fake model, capabilities."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import httpx
import pytest
from autogen import ConversableAgent

from ag2_memorysync import MemorySyncCapability
from memorysync_core import MemorySyncAPI

API_KEY = "ms_test_key_0123456789"
HAS_TEST_AGENT = importlib.util.find_spec("autogen.testing") is not None


def pytest_configure(config: pytest.Config) -> None:
    # ag2 0.9's openai client import path emits these on Python 3.11+; not ours to fix.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:autogen.*")
    # The fake OpenAI key in llm_config makes autogen log (not warn) about its format.
    logging.getLogger("autogen.oai.client").setLevel(logging.ERROR)


class ModelInputs:
    """What the (fake) model received: one list of messages per call."""

    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []

    def record(self, messages: Iterable[dict[str, Any]]) -> None:
        self.calls.append([dict(m) for m in messages])

    def last_user_text(self, call: int = -1) -> str:
        message = self.calls[call][-1]
        content = message.get("content")
        return content if isinstance(content, str) else str(content)

    def all_text(self) -> str:
        return "\n".join(str(m.get("content")) for call in self.calls for m in call)


class _FakeResponse:
    def __init__(self, message: dict[str, Any]) -> None:
        self.choices = [type("Choice", (), {"message": message})()]
        self.model = "fake-model"
        self.cost = 0.0
        self.usage = None


class _FakeClient:
    """A stand-in for OpenAIWrapper on releases without autogen.testing."""

    def __init__(self, replies: Iterable[str | dict[str, Any]], inputs: ModelInputs) -> None:
        self._replies = iter(replies)
        self._inputs = inputs
        self.total_usage_summary = None
        self.actual_usage_summary = None

    def create(self, **params: Any) -> _FakeResponse:
        self._inputs.record(params["messages"])
        reply = next(self._replies)
        message = {"content": reply} if isinstance(reply, str) else {"role": "assistant", **reply}
        return _FakeResponse(message)

    def extract_text_or_completion_object(self, response: _FakeResponse) -> list[Any]:
        return [c.message for c in response.choices]

    def print_usage_summary(self, *args: Any, **kwargs: Any) -> None:
        pass

    def clear_usage_summary(self) -> None:
        pass


def model_agent(name: str, **kwargs: Any) -> ConversableAgent:
    """A ConversableAgent with an llm_config (its client is replaced before any call)."""
    kwargs.setdefault("human_input_mode", "NEVER")
    kwargs.setdefault("max_consecutive_auto_reply", 10)
    llm_config = {"config_list": [{"model": "gpt-4o-mini", "api_key": "sk-test-not-used"}]}
    return ConversableAgent(name, llm_config=llm_config, **kwargs)


@contextlib.contextmanager
def scripted_model(
    agent: ConversableAgent, replies: Iterable[str | dict[str, Any]]
) -> Iterator[ModelInputs]:
    """Make ``agent``'s model answer ``replies``, recording exactly what it receives.

    Uses ``autogen.testing.TestAgent`` (wrapping its fake client's ``create``) where the
    installed release has it, an equivalent fake client otherwise.
    """
    inputs = ModelInputs()
    if HAS_TEST_AGENT:
        from autogen.testing import TestAgent

        with TestAgent(agent, list(replies)):
            fake = agent.client
            assert fake is not None
            create = fake.create

            def recording_create(**params: Any) -> Any:
                inputs.record(params["messages"])
                return create(**params)

            fake.create = recording_create  # type: ignore[method-assign]
            yield inputs
    else:
        original = agent.client
        agent.client = _FakeClient(replies, inputs)  # type: ignore[assignment]
        try:
            yield inputs
        finally:
            agent.client = original


def scripted_agent(name: str, replies: Iterable[str], **kwargs: Any) -> ConversableAgent:
    """A model-less agent answering ``replies`` in order (then nothing: the chat ends)."""
    kwargs.setdefault("human_input_mode", "NEVER")
    agent = ConversableAgent(name, llm_config=False, **kwargs)
    queue = list(replies)

    def reply(
        recipient: Any, messages: Any = None, sender: Any = None, config: Any = None
    ) -> tuple[bool, Any]:
        return True, (queue.pop(0) if queue else None)

    agent.register_reply(lambda _sender: True, reply, position=0)
    return agent


@pytest.fixture
def make_capability() -> Iterator[Callable[..., MemorySyncCapability]]:
    """Build capabilities against a server; every one is closed after the test."""
    made: list[MemorySyncCapability] = []

    def make(server: Any, **kwargs: Any) -> MemorySyncCapability:
        kwargs.setdefault("user_id", "alice")
        kwargs.setdefault("session_id", "s1")
        if hasattr(server, "transport"):  # memorysync-local, embedded
            kwargs.setdefault("transport", server.transport)
            kwargs.setdefault("api_key", server.api_key)
        kwargs.setdefault("api_key", API_KEY)
        capability = MemorySyncCapability(base_url=server.base_url, **kwargs)
        made.append(capability)
        return capability

    yield make
    for capability in made:
        capability.close(timeout=2.0)


def read_transcript(server: Any, user_id: str, session_id: str) -> list[dict[str, Any]]:
    """The transcript the server stored for ``ag2::<session_id>``, oldest first.

    Read through the API (``/v1/history/list``), as any client would see it.
    """
    transport = getattr(server, "transport", None)
    api_key = getattr(server, "api_key", API_KEY)

    async def read() -> list[dict[str, Any]]:
        async with MemorySyncAPI(api_key, base_url=server.base_url, transport=transport) as api:
            answer = await api.list_history(user_id=user_id, session_id=f"ag2::{session_id}")
        items = answer["items"]
        assert isinstance(items, list)
        return items

    return asyncio.run(read())


def said(turns: Iterable[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    """(role, content, speaker name) of stored turns."""
    out = []
    for turn in turns:
        payload = turn.get("payload") or {}
        out.append((turn["role"], turn["content"], payload.get("name")))
    return out


class Kit:
    """The helpers above, handed to tests as the ``kit`` fixture (importlib import mode)."""

    API_KEY = API_KEY
    HAS_TEST_AGENT = HAS_TEST_AGENT
    model_agent = staticmethod(model_agent)
    scripted_model = staticmethod(scripted_model)
    scripted_agent = staticmethod(scripted_agent)
    read_transcript = staticmethod(read_transcript)
    said = staticmethod(said)


@pytest.fixture
def kit() -> type[Kit]:
    """Helpers: agents, a recording fake model, the server's transcript."""
    return Kit


class SlowRecall(httpx.AsyncBaseTransport):
    """Forwards to ``inner`` (e.g. the embedded server), answering recall ``delay`` s late."""

    def __init__(self, inner: httpx.AsyncBaseTransport, delay: float) -> None:
        self.inner = inner
        self.delay = delay

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/memory/recall":
            await asyncio.sleep(self.delay)  # the server's latency is what is under test
        return await self.inner.handle_async_request(request)


Kit.SlowRecall = SlowRecall  # type: ignore[attr-defined]
