"""OpenTelemetry: an Agent Framework run's recall nests in the span around the run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_framework_memorysync import MemorySyncContextProvider

DURABLE = "I am vegetarian and I live in Lisbon."
RELATED = "Can you recommend a vegetarian restaurant in Lisbon for tonight?"


async def test_the_recall_of_a_run_nests_in_the_span_around_the_run_and_stays_private(
    otel: Any, local_server: Any, provider_on: Callable[..., MemorySyncContextProvider], kit: Any
) -> None:
    memory = provider_on(local_server)
    await memory.save(DURABLE)
    agent = kit.agent(kit.ScriptedChatClient(["Try Ao 26."]), memory)
    otel.exporter.clear()
    with otel.tracer.start_as_current_span("web request") as request:
        await agent.run(RELATED, session=agent.create_session())
    assert (await memory.flush()).all_delivered

    (recall,) = otel.spans("memorysync.recall")
    by_id = {span.context.span_id: span for span in otel.spans()}
    ancestor = recall
    while ancestor.parent is not None and ancestor.parent.span_id in by_id:
        ancestor = by_id[ancestor.parent.span_id]
    assert ancestor.context.span_id == request.get_span_context().span_id
    assert recall.attributes["memorysync.surface"] == "agent-framework"
    assert recall.attributes["memorysync.memories"] >= 1
    for value in otel.every_attribute_value():
        for secret in (local_server.api_key, RELATED, "Lisbon", "vegetarian"):
            assert secret not in value, (secret, value)
