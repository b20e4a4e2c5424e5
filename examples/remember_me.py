"""Agents that remember you: an AutoGen agent and an AG2 chat, across two sessions.

Session 1 (Monday): Alice tells an AutoGen agent and an AG2 assistant a few things about
herself. Session 2 (Friday): new agents and new memory objects, over a server reopened on
the same database file as a new process would, are asked questions that depend on them.
Before each model call the adapters recall what matters and put it in front of the model;
this script prints what was recalled.

Offline by default: ``memorysync-local`` runs embedded in this process (SQLite in a
temporary directory, no socket, no account) and scripted models stand in for LLMs. With
``OPENAI_API_KEY`` set, OpenAI models answer instead (``OPENAI_MODEL``, default
``gpt-4o-mini``); the memory side is the same.

    python3 dev.py demo            # installs what it needs, then runs this file
    python examples/remember_me.py
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

from autogen import ConversableAgent, UserProxyAgent
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import MemoryQueryEvent
from autogen_core.models import ChatCompletionClient
from autogen_ext.models.replay import ReplayChatCompletionClient

import memorysync_local
from ag2_memorysync import MemorySyncCapability
from autogen_memorysync import MemorySyncMemory

# AG2 announces the custom model client at INFO; the demo's output is the chat.
logging.getLogger("autogen.oai.client").setLevel(logging.WARNING)

OPENAI_KEY = os.environ.get("OPENAI_API_KEY")
MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
USER = "alice"


def banner(text: str) -> None:
    print(f"\n=== {text}")


def connection(server: memorysync_local.EmbeddedServer) -> dict[str, Any]:
    """What an adapter needs to reach the embedded server (hosted: nothing, just the key)."""
    return {"api_key": server.api_key, "base_url": server.base_url, "transport": server.transport}


# --------------------------------------------------------------------------- AutoGen


def autogen_model(scripted_reply: str) -> ChatCompletionClient:
    if OPENAI_KEY:
        from autogen_ext.models.openai import OpenAIChatCompletionClient

        return OpenAIChatCompletionClient(model=MODEL, api_key=OPENAI_KEY)
    return ReplayChatCompletionClient([scripted_reply])


async def autogen_session(
    server: memorysync_local.EmbeddedServer, session_id: str, text: str, scripted_reply: str
) -> list[str]:
    """One AutoGen run; returns what recall put in front of the model."""
    memory = MemorySyncMemory(user_id=USER, session_id=session_id, **connection(server))
    model = autogen_model(scripted_reply)
    agent = AssistantAgent(
        "assistant",
        model_client=model,
        memory=[memory],
        system_message="You are a helpful assistant. Answer in one or two sentences.",
    )
    print(f"alice: {text}")
    result = await agent.run(task=text)
    recalled = [
        str(item.content)
        for message in result.messages
        if isinstance(message, MemoryQueryEvent)
        for item in message.content
    ]
    for line in recalled:
        print(f"recalled: {line}")
    reply = str(result.messages[-1].content)
    print(f"assistant: {reply}")
    # AutoGen never stores turns itself: record the exchange (the user's facts are
    # extracted by the server; both turns go to this session's transcript).
    await memory.add_turn_pair(text, reply)
    await memory.close()
    await model.close()
    return recalled


# --------------------------------------------------------------------------- AG2


class ScriptedModel:
    """Stands in for an LLM through AG2's custom model client protocol."""

    replies: ClassVar[list[str]] = []
    seen: ClassVar[list[str]] = []  # the last message of each request, as the model received it

    def __init__(self, config: dict[str, Any], **kwargs: Any) -> None:
        pass

    def create(self, params: dict[str, Any]) -> Any:
        ScriptedModel.seen.append(str(params["messages"][-1]["content"]))
        message = SimpleNamespace(
            content=ScriptedModel.replies.pop(0), tool_calls=None, function_call=None
        )
        return SimpleNamespace(choices=[SimpleNamespace(message=message)], model="scripted")

    def message_retrieval(self, response: Any) -> list[str]:
        return [choice.message.content for choice in response.choices]

    def cost(self, response: Any) -> float:
        return 0.0

    @staticmethod
    def get_usage(response: Any) -> dict[str, Any]:
        return {}


def ag2_assistant(scripted_reply: str) -> ConversableAgent:
    system = "You are a helpful assistant. Answer in one or two sentences."
    if OPENAI_KEY:
        llm_config = {"config_list": [{"model": MODEL, "api_key": OPENAI_KEY}]}
        return ConversableAgent("assistant", system_message=system, llm_config=llm_config)
    ScriptedModel.replies.append(scripted_reply)
    llm_config = {"config_list": [{"model": "scripted", "model_client_cls": "ScriptedModel"}]}
    agent = ConversableAgent(
        "assistant", system_message=system, llm_config=llm_config, human_input_mode="NEVER"
    )
    agent.register_model_client(model_client_cls=ScriptedModel)
    return agent


def ag2_session(
    server: memorysync_local.EmbeddedServer, session_id: str, text: str, scripted_reply: str
) -> list[str]:
    """One AG2 chat; returns what recall put in front of the model."""
    memory = MemorySyncCapability(user_id=USER, session_id=session_id, **connection(server))
    assistant = ag2_assistant(scripted_reply)
    memory.add_to_agent(assistant)
    alice = UserProxyAgent("alice", human_input_mode="NEVER", code_execution_config=False)
    print(f"alice: {text}")
    seen_before = len(ScriptedModel.seen)
    alice.initiate_chat(assistant, message=text, max_turns=1, silent=True)
    if len(ScriptedModel.seen) > seen_before:
        shown = ScriptedModel.seen[-1]
        recalled = [line[2:] for line in shown.splitlines() if line.startswith("- ")]
    else:  # a real model: show what recall finds for the same message
        recalled = [found.text for found in memory.search(text)]
    for line in recalled:
        print(f"recalled: {line}")
    print(f"assistant: {assistant.last_message(alice)['content']}")
    # The stored conversation holds the message as sent, never the recalled block.
    assert assistant.chat_messages[alice][0]["content"] == text
    memory.close()  # waits until the captured turns are delivered
    return recalled


# --------------------------------------------------------------------------- main


def main() -> int:
    """Run both days; exit status 0 only when both Friday agents recalled Monday's facts."""
    mode = f"OpenAI {MODEL}" if OPENAI_KEY else "scripted models (set OPENAI_API_KEY for real)"
    print(f"MemorySync demo: embedded memorysync-local, {mode}")
    with tempfile.TemporaryDirectory(prefix="memorysync-demo-") as tmp:
        db = str(Path(tmp) / "memorysync.db")

        with memorysync_local.embedded(db) as server:
            banner("Monday, AutoGen session 'autogen-monday'")
            asyncio.run(
                autogen_session(
                    server,
                    "autogen-monday",
                    "I'm allergic to peanuts and I live in Lisbon.",
                    "Thanks, Alice, I'll keep that in mind.",
                )
            )
            banner("Monday, AG2 chat 'ag2-monday'")
            ag2_session(
                server,
                "ag2-monday",
                "My daughter is called Ana and she turns seven next week.",
                "How lovely! Happy early birthday to Ana.",
            )

        # A new server object on the same file: what a restarted process would see.
        with memorysync_local.embedded(db) as server:
            banner("Friday, AutoGen session 'autogen-friday' (new agent, new memory)")
            autogen_recalled = asyncio.run(
                autogen_session(
                    server,
                    "autogen-friday",
                    "Is peanut butter a good snack for me?",
                    "No: you told me you're allergic to peanuts. Try hummus with carrots.",
                )
            )
            banner("Friday, AG2 chat 'ag2-friday' (new agents, new capability)")
            ag2_recalled = ag2_session(
                server,
                "ag2-friday",
                "Plan a birthday party for my daughter.",
                "A unicorn-themed party for Ana's seventh birthday, with her friends from school.",
            )
    missing = [
        f"{name} did not recall {fact!r}"
        for name, fact, recalled in (
            ("AutoGen", "peanuts", autogen_recalled),
            ("AG2", "Ana", ag2_recalled),
        )
        if not any(fact.lower() in line.lower() for line in recalled)
    ]
    if missing:
        print("\nFailed: " + "; ".join(missing) + ".")
        return 1
    print("\nDone: both agents recalled what Alice said in an earlier session.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
