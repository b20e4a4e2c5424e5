"""Memory that stays true, through AutoGen, AG2 (classic) and Agent Framework (issue 25).

Against memorysync-local served over loopback, each conversation runs in its own
interpreter with real framework objects and a scripted model: "I live in Lisbon." on
Monday, "I moved to Toronto last year." on Tuesday; on Wednesday the block the model
is shown for "Where do I live now?" names Toronto and not Lisbon, and the adapter's
``export()`` holds both facts, Lisbon superseded by Toronto. (ag2 1.x, which cannot
share an interpreter with AG2 classic, has the same test in
packages/ag2-memorysync/tests/test_v1_processes.py.)
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from ag2_memorysync import MemorySyncCapability
from agent_framework_memorysync import MemorySyncContextProvider
from autogen_memorysync import MemorySyncMemory

NOWHERE = "http://127.0.0.1:9"  # only the served server given on the command line answers
# Each conversation's recall budget (recall_timeout=30 in the scripts): a fresh process on
# a loaded machine can take over the default 1.2 s; what is recalled is the point here.

AUTOGEN_TURN = """
import asyncio, json, sys
from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.replay import ReplayChatCompletionClient
from autogen_memorysync import MemorySyncMemory

async def main():
    base_url, api_key, session, message = sys.argv[1:5]
    memory = MemorySyncMemory(user_id="ana", session_id=session,
                              api_key=api_key, base_url=base_url, recall_timeout=30)
    client = ReplayChatCompletionClient(["Noted."])
    agent = AssistantAgent("assistant", model_client=client, memory=[memory])
    await agent.run(task=message)
    await memory.add_turn_pair(message, "Noted.")
    await memory.close()
    shown = "\\n".join(str(m.content) for m in client.create_calls[-1]["messages"])
    print(json.dumps({"shown": shown}))

asyncio.run(main())
"""

CLASSIC_TURN = """
import json, sys
from autogen import ConversableAgent, UserProxyAgent
from autogen.testing import TestAgent
from ag2_memorysync import MemorySyncCapability

base_url, api_key, session, message = sys.argv[1:5]
memory = MemorySyncCapability(user_id="ana", session_id=session,
                              api_key=api_key, base_url=base_url, recall_timeout=30)
llm_config = {"config_list": [{"model": "gpt-4o-mini", "api_key": "sk-test-not-used"}]}
assistant = ConversableAgent("assistant", llm_config=llm_config, human_input_mode="NEVER")
user = UserProxyAgent("ana", human_input_mode="NEVER", code_execution_config=False)
memory.add_to_agent(assistant)
seen = []
with TestAgent(assistant, ["Noted."]):
    create = assistant.client.create
    def recording_create(**params):
        seen.append(params["messages"])
        return create(**params)
    assistant.client.create = recording_create
    user.initiate_chat(assistant, message=message, max_turns=1, silent=True)
memory.close()
print(json.dumps({"shown": json.dumps(seen[-1])}))
"""

AGENT_FRAMEWORK_TURN = """
import asyncio, json, sys, warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from agent_framework import Agent, BaseChatClient, ChatResponse, Content, Message
from agent_framework_memorysync import MemorySyncContextProvider

class Scripted(BaseChatClient):
    def __init__(self):
        super().__init__()
        self.seen = []
    def _inner_get_response(self, *, messages, stream, options, **kwargs):
        self.seen.append(str(options.get("instructions", "")))
        async def respond():
            return ChatResponse(messages=[Message("assistant", [Content.from_text("Noted.")])])
        return respond()

async def main():
    base_url, api_key, session, message = sys.argv[1:5]
    client = Scripted()
    memory = MemorySyncContextProvider(user_id="ana", session_id=session, api_key=api_key,
                                       base_url=base_url, recall_timeout=30)
    async with memory:
        agent = Agent(client, instructions="You help.", context_providers=[memory])
        await agent.run(message, session=agent.create_session())
    print(json.dumps({"shown": client.seen[-1]}))

asyncio.run(main())
"""

SCRIPTS = {
    "autogen": (AUTOGEN_TURN, MemorySyncMemory),
    "ag2": (CLASSIC_TURN, MemorySyncCapability),
    "agent-framework": (AGENT_FRAMEWORK_TURN, MemorySyncContextProvider),
}


async def settled(value: Any) -> Any:
    """``value``, awaited first when it is awaitable."""
    return await value if inspect.isawaitable(value) else value


def run(script: str, server: Any, session: str, message: str) -> str:
    """One conversation in a fresh interpreter; what the model was shown."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORYSYNC_", "OPENAI_"))}
    env["MEMORYSYNC_BASE_URL"] = NOWHERE
    done = subprocess.run(
        [sys.executable, "-c", script, server.base_url, server.api_key, session, message],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shown: str = json.loads(done.stdout.strip().splitlines()[-1])["shown"]
    return shown


@pytest.mark.timeout(600)  # three fresh interpreters that import a framework each
@pytest.mark.parametrize("adapter", SCRIPTS)
async def test_a_move_replaces_the_old_city_and_the_export_keeps_both(
    adapter: str, served_local_server: Any
) -> None:
    script, adapter_class = SCRIPTS[adapter]
    server = served_local_server
    run(script, server, "monday", "I live in Lisbon.")
    run(script, server, "tuesday", "I moved to Toronto last year.")
    shown = run(script, server, "wednesday", "Where do I live now?")

    block = shown[shown.index("<user_memories>") : shown.index("</user_memories>")]
    assert "Toronto" in block
    assert "Lisbon" not in block

    memory = adapter_class(
        user_id="ana", session_id="audit", api_key=server.api_key, base_url=server.base_url
    )
    try:
        export = await settled(memory.export())  # the AG2 capability's face is sync
    finally:
        await settled(memory.close())
    by_text = {m["text"]: m for m in export["memories"]}
    # "last year" is kept as said, with the year it names (said_at's year minus one).
    moved = next(text for text in by_text if text.startswith("Moved to Toronto"))
    lisbon, toronto = by_text["Lives in Lisbon"], by_text[moved]
    assert moved == f"Moved to Toronto last year ({int(toronto['said_at'][:4]) - 1})"
    assert set(by_text) == {"Lives in Lisbon", moved}
    assert lisbon["state"] == "superseded"
    assert lisbon["superseded_by"] == toronto["memory_id"]
    assert lisbon["valid_until"] == toronto["said_at"]
    assert toronto["state"] == "current"
