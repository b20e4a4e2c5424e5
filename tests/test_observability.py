"""OpenTelemetry through real framework objects against memorysync-local.

The SDK records in memory (``shared.telemetry``). Each test asserts where the memory
spans sit in the trace, what they say, and that no span attribute or event carries the
API key, the user's id or the user's words.
"""

from __future__ import annotations

from typing import Any

from autogen import ConversableAgent, UserProxyAgent
from autogen.testing import TestAgent
from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.replay import ReplayChatCompletionClient

from ag2_memorysync import MemorySyncCapability
from autogen_memorysync import MemorySyncMemory

USER = "alice@example.com"
FACT = "I live in Porto and I'm allergic to shellfish."
QUESTION = "Which shellfish dishes should I avoid at dinner tonight?"


def connection(server: Any) -> dict[str, Any]:
    return {"api_key": server.api_key, "base_url": server.base_url, "transport": server.transport}


def ancestors(otel: Any, span: Any) -> list[str]:
    """The names of ``span``'s ancestors, nearest first."""
    by_id = {s.context.span_id: s for s in otel.spans()}
    names = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        names.append(span.name)
    return names


def assert_private(otel: Any, *secrets: str) -> None:
    for value in otel.every_attribute_value():
        for secret in secrets:
            assert secret not in value, (secret, value)


async def test_an_autogen_turn_traces_recall_inside_the_turn_then_the_capture(
    otel: Any, local_server: Any
) -> None:
    monday = MemorySyncMemory(user_id=USER, session_id="monday", **connection(local_server))
    await monday.add_turn_pair(FACT, "Noted.")
    await monday.close()
    otel.exporter.clear()

    memory = MemorySyncMemory(user_id=USER, session_id="friday", **connection(local_server))
    agent = AssistantAgent(
        "assistant", model_client=ReplayChatCompletionClient(["Skip the prawns."]), memory=[memory]
    )
    try:
        with otel.tracer.start_as_current_span("support turn"):
            await agent.run(task=QUESTION)
            await memory.add_turn_pair(QUESTION, "Skip the prawns.")
    finally:
        await memory.close()

    (recall,) = otel.spans("memorysync.recall")
    assert "support turn" in ancestors(otel, recall)
    assert recall.attributes["memorysync.surface"] == "autogen"
    assert recall.attributes["memorysync.memories"] >= 1
    assert recall.attributes["memorysync.rendered_chars"] > 0
    assert recall.attributes["memorysync.budget_exhausted"] is False
    http = [s for s in otel.children(recall) if s.name == "memorysync.http"]
    assert [s.attributes["memorysync.route"] for s in http] == ["/v1/memory/recall"]
    (record,) = otel.spans("memorysync.record")
    assert ancestors(otel, record)[-1] == "support turn"
    assert recall.end_time <= record.start_time  # recall, then capture
    assert_private(otel, local_server.api_key, USER, QUESTION, "Porto", "shellfish")


def test_an_ag2_chat_traces_recall_under_the_applications_span_across_threads(
    otel: Any, local_server: Any
) -> None:
    capability = MemorySyncCapability(user_id=USER, session_id="ag2", **connection(local_server))
    llm_config = {"config_list": [{"model": "gpt-4o-mini", "api_key": "sk-test-not-used"}]}
    assistant = ConversableAgent("assistant", llm_config=llm_config, human_input_mode="NEVER")
    person = UserProxyAgent("person", human_input_mode="NEVER", code_execution_config=False)
    capability.add_to_agent(assistant)
    try:
        with TestAgent(assistant, ["Noted.", "Skip the prawns."]):
            with otel.tracer.start_as_current_span("chat"):
                person.initiate_chat(assistant, message=FACT, max_turns=1, silent=True)
            assert capability.flush().all_delivered
            with otel.tracer.start_as_current_span("chat"):
                person.initiate_chat(assistant, message=QUESTION, max_turns=1, silent=True)
    finally:
        report = capability.close()
    assert report.all_delivered

    recalls = otel.spans("memorysync.recall")
    assert len(recalls) == 2
    for recall in recalls:
        assert ancestors(otel, recall) == ["chat"]
        assert recall.attributes["memorysync.surface"] == "ag2"
    assert recalls[-1].attributes["memorysync.memories"] >= 1
    delivered = otel.spans("memorysync.deliver")
    assert delivered
    assert all(span.parent is None for span in delivered)  # traces of their own
    assert sum(span.attributes["memorysync.delivered"] for span in delivered) == 4
    assert_private(otel, local_server.api_key, USER, QUESTION, "Porto", "shellfish")
