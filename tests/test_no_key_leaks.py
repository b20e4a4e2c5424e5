"""A distinctive API key, driven through errors, reprs, dumps and DEBUG logs, shows up nowhere.

Each test collects everything the code under test printed or produced (every log record
at DEBUG on the root logger, exception messages and reprs along the cause chain,
``repr()`` of the public objects, dumped components and agent state) and searches it
for the key in every printed form (as is, repr-escaped, as escaped bytes). The same
texts go to ``shared.secret_guard`` for the end-of-session check.
"""

from __future__ import annotations

import json
import logging
import traceback
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from autogen import ConversableAgent, UserProxyAgent
from autogen.testing import TestAgent
from autogen_agentchat.agents import AssistantAgent
from autogen_core import CancellationToken
from autogen_core.memory import MemoryContent, MemoryMimeType
from autogen_ext.models.replay import ReplayChatCompletionClient

from ag2_memorysync import MemorySyncCapability, register_memory_tools
from autogen_memorysync import MemorySyncMemory, create_memory_tools
from memorysync_core import ContextRenderer, MemorySyncAPI, RetryPolicy, UserMemory
from memorysync_core._delivery.queue import DeliveryQueue
from memorysync_core._recall.budget import recall_within_budget
from memorysync_core.errors import MemorySyncError
from shared.fake_server import FakeServer, Fault
from shared.faults import FAULTS, ShortTimeoutTransport
from shared.secret_guard import contains_secret, observe, register_secret

FAST = ShortTimeoutTransport(0.3)
# One fault per error class (retries make each retryable one cost ~0.75 s per call).
ERROR_FAULTS = [
    c
    for c in FAULTS
    if c.id in ("reset-mid-response", "503", "malformed-json", "429-retry-after", "401")
]


@pytest.fixture
def key() -> str:
    """A fresh distinctive key, registered with the session's secret guard."""
    value = f"ms_leakcheck_{uuid.uuid4().hex}"
    register_secret(value)
    return value


class Produced:
    """Everything a test produced, as text."""

    def __init__(self) -> None:
        self.texts: list[tuple[str, str]] = []

    def add(self, where: str, *values: object) -> None:
        for value in values:
            if isinstance(value, BaseException):
                text = "".join(traceback.format_exception(value)) + repr(value)
                link: BaseException | None = value
                while link is not None:
                    text += f"\n{link!r} {link.args!r}"
                    link = link.__cause__ or link.__context__
            elif isinstance(value, str):
                text = value
            else:
                dump = getattr(value, "model_dump_json", None)
                text = str(dump()) if callable(dump) else json.dumps(value, default=repr)
                text += "\n" + repr(value)
            self.texts.append((where, text))
        observe(*values, where=where)

    def add_logs(self, caplog: pytest.LogCaptureFixture) -> None:
        for record in caplog.records:
            parts = [record.getMessage(), repr(record.args), record.exc_text or ""]
            if record.exc_info and record.exc_info[1] is not None:
                parts.append("".join(traceback.format_exception(*record.exc_info)))
            self.texts.append((f"log {record.name}", "\n".join(parts)))

    def assert_clean(self, key: str) -> None:
        assert len(self.texts) > 10  # the test did produce things to search
        leaked = [where for where, text in self.texts if contains_secret(text, key)]
        assert leaked == []


@pytest.fixture
def produced(caplog: pytest.LogCaptureFixture) -> Produced:
    caplog.set_level(logging.DEBUG)  # the root logger: every library's DEBUG records
    return Produced()


def _errors_of(fake_server: FakeServer, route: str, call: Any) -> list[MemorySyncError]:
    """Run ``call`` once per fault on ``route``; the typed errors it raised."""
    errors: list[MemorySyncError] = []
    for case in ERROR_FAULTS:
        fake_server.set_default(route, case.fault)
        try:
            call()
        except MemorySyncError as exc:
            errors.append(exc)
    fake_server.set_default(route, None)
    return errors


async def _async_errors_of(fake_server: FakeServer, route: str, call: Any) -> list[Any]:
    errors: list[Any] = []
    for case in ERROR_FAULTS:
        fake_server.set_default(route, case.fault)
        try:
            await call()
        except MemorySyncError as exc:
            errors.append(exc)
    fake_server.set_default(route, None)
    return errors


async def test_the_core_never_shows_the_key(
    key: str, fake_server: FakeServer, produced: Produced, caplog: pytest.LogCaptureFixture
) -> None:
    api = MemorySyncAPI(key, base_url=fake_server.base_url, transport=FAST)
    memory = UserMemory(
        api, user_id="alice", session_id="leaks", surface="autogen", recall_timeout=0.2
    )
    produced.add("core reprs", repr(api), str(api), repr(memory), memory.retry)
    # Tenant resolution, explicit calls with their retries, the budgeted recall.
    fake_server.set_default("/org/projects", Fault.status(500))
    await api.warm_up()
    fake_server.set_default("/org/projects", None)
    errors = await _async_errors_of(
        fake_server, "/v1/memory/query", lambda: memory.search("Where do I live?")
    )
    errors += await _async_errors_of(
        fake_server, "/v1/memory/add_turn", lambda: memory.add_user_turn("I live in Porto.")
    )
    for case in ERROR_FAULTS:
        fake_server.set_default("/v1/memory/recall", case.fault)
        await recall_within_budget(
            api, user_id="alice", prompt="Where?", k=2, timeout=0.2, renderer=ContextRenderer()
        )
    # The delivery queue's retry and drop logs.
    fake_server.script("/v1/history/append", [Fault.status(503), Fault.status(401)])
    queue = DeliveryQueue(memory.record_turns, policy=RetryPolicy(base_delay=0.01))
    queue.submit(memory.capture("user", "I live in Porto."))
    await queue.aclose(timeout=5.0)
    await memory.aclose()

    assert len(errors) == 2 * len(ERROR_FAULTS)
    produced.add("core errors", *errors)
    produced.add_logs(caplog)
    produced.assert_clean(key)
    # The key did travel, where it belongs: in the X-API-Key header.
    assert {r.headers.get("x-api-key") for r in fake_server.requests} == {key}


async def test_autogen_never_shows_the_key(
    key: str,
    fake_server: FakeServer,
    produced: Produced,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memory = MemorySyncMemory(
        user_id="alice",
        session_id="leaks",
        api_key=key,
        base_url=fake_server.base_url,
        recall_timeout=0.2,
        transport=FAST,
    )
    client = ReplayChatCompletionClient(["One.", "Two."])
    agent = AssistantAgent("assistant", model_client=client, memory=[memory])
    produced.add("autogen reprs", repr(memory), str(memory), repr(agent))
    produced.add("autogen dumps", memory.dump_component(), agent.dump_component())
    # Loading back takes the key from the environment, and shows it no more.
    monkeypatch.setenv("MEMORYSYNC_API_KEY", key)
    loaded = MemorySyncMemory.load_component(memory.dump_component())
    produced.add("autogen loaded", repr(loaded), loaded.dump_component())
    await loaded.close()

    # The hot path under faults, with the framework's own DEBUG logging.
    fake_server.set_default("/v1/memory/recall", Fault.status(401))
    await agent.run(task="Where do I live these days?")
    fake_server.set_default("/v1/memory/recall", Fault.reset())
    await agent.run(task="And where did I live before?")
    produced.add("autogen state", await agent.save_state())

    fact = MemoryContent(content="I live in Porto.", mime_type=MemoryMimeType.TEXT)
    errors = await _async_errors_of(
        fake_server, "/v1/memory/query", lambda: memory.query("Where do I live?")
    )
    fake_server.set_default("/v1/memory/add_turn", Fault.status(403))
    with pytest.raises(MemorySyncError) as caught:
        await memory.add(fact)
    errors.append(caught.value)
    fake_server.set_default("/v1/memory/add_turn", None)
    errors += await _async_errors_of(
        fake_server, "/v1/history/append", lambda: memory.add_turn_pair("I live in Porto.", "Ok.")
    )
    fake_server.set_default("/memory/add", Fault.status(403))
    search, save = create_memory_tools(memory)
    produced.add("autogen tools", repr(search), search.schema, save.schema)
    with pytest.raises(MemorySyncError) as caught:
        await save.run_json({"text": "I live in Porto."}, CancellationToken())
    errors.append(caught.value)
    await memory.close()

    assert len(errors) == 2 * len(ERROR_FAULTS) + 2
    produced.add("autogen errors", *errors)
    produced.add_logs(caplog)
    produced.assert_clean(key)


@pytest.fixture
def ag2_capability(key: str, fake_server: FakeServer) -> Iterator[MemorySyncCapability]:
    capability = MemorySyncCapability(
        user_id="alice",
        session_id="leaks",
        api_key=key,
        base_url=fake_server.base_url,
        recall_timeout=0.2,
        transport=FAST,
    )
    yield capability
    capability.close(timeout=2.0)


def test_ag2_never_shows_the_key(
    key: str,
    fake_server: FakeServer,
    ag2_capability: MemorySyncCapability,
    produced: Produced,
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory = ag2_capability
    llm_config = {"config_list": [{"model": "gpt-4o-mini", "api_key": "sk-test-not-used"}]}
    assistant = ConversableAgent("assistant", llm_config=llm_config, human_input_mode="NEVER")
    user = UserProxyAgent("user", human_input_mode="NEVER", code_execution_config=False)
    memory.add_to_agent(assistant)
    memory.add_to_agent(user)
    register_memory_tools(memory, caller=assistant, executor=user)
    produced.add("ag2 reprs", repr(memory), str(memory), assistant.llm_config)

    fake_server.set_default("/v1/memory/recall", Fault.status(401))
    fake_server.script("/v1/history/append", [Fault.status(503), Fault.status(422)])
    with TestAgent(assistant, ["One."]):
        user.initiate_chat(assistant, message="Where do I live these days?", max_turns=1)
    memory.flush(timeout=5.0)

    errors = _errors_of(fake_server, "/v1/memory/query", lambda: memory.search("Where?"))
    errors += _errors_of(fake_server, "/memory/add", lambda: memory.save("I live in Porto."))
    fake_server.set_default("/v1/memory/query", Fault.status(403))
    tool_answer = user.function_map["search_memory"](query="Where do I live?")
    produced.add("ag2 tool answer", str(tool_answer))

    assert len(errors) == 2 * len(ERROR_FAULTS)
    produced.add("ag2 errors", *errors)
    produced.add_logs(caplog)
    produced.assert_clean(key)


@pytest.mark.parametrize(
    "shape",
    ["{key}\nx", "{key} x", "{key}\x00", "{key}é"],
    ids=["newline", "space", "nul", "accent"],
)
async def test_a_key_that_cannot_be_a_header_is_refused_without_echoing_it(
    shape: str, fake_server: FakeServer
) -> None:
    stem = f"ms_leakcheck_{uuid.uuid4().hex}"
    register_secret(stem)  # the part a reader could reuse
    bad_key = shape.format(key=stem)
    with pytest.raises(ValueError) as caught:
        MemorySyncAPI(bad_key, base_url=fake_server.base_url, tenant_id="t")
    observe(caught.value, where="malformed key")
    shown = "".join(traceback.format_exception(caught.value)) + repr(caught.value)
    assert not contains_secret(shown, stem)
    assert fake_server.requests == []  # refused before anything was sent
