"""An AG2 chat whose capability keeps its turns in an outbox (helper of test_outbox.py).

``MODE=chat``: ``alice`` (the person) and ``bot`` (an agent with a model, so every reply
recalls first; its words are scripted) exchange ``COUNT`` messages each, with the server
down. Then ``END=kill`` prints ``captured`` and waits to be killed; ``END=exit`` closes
the capability (which cannot deliver), prints its report as JSON and exits.
``MODE=restart``: the application starts again: a new capability on the same outbox is
attached to its agent and closed; the process prints the report as JSON (``ATTACH=no``:
never attached, ``flush()`` then ``close()``; it prints the flush's report).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
from typing import Any

from autogen import ConversableAgent

from ag2_memorysync import MemorySyncCapability

LLM_CONFIG = {"config_list": [{"model": "gpt-4o-mini", "api_key": "sk-test-not-used"}]}


def capability() -> MemorySyncCapability:
    return MemorySyncCapability(
        user_id="alice",
        session_id="outbox",
        api_key=os.environ["KEY"],
        base_url=os.environ["URL"],
        tenant_id="local",
        outbox=os.environ["OUTBOX"],
    )


def scripted(agent: ConversableAgent, lines: list[str]) -> None:
    def reply(
        recipient: Any, messages: Any = None, sender: Any = None, config: Any = None
    ) -> tuple[bool, Any]:
        return True, (lines.pop(0) if lines else None)

    agent.register_reply(lambda _sender: True, reply, position=0)


def report_of(memory: MemorySyncCapability, timeout: float) -> None:
    print(json.dumps(dataclasses.asdict(memory.close(timeout=timeout))), flush=True)


def main() -> None:
    # The fake OpenAI key makes autogen log about its format, on stdout.
    logging.getLogger("autogen.oai.client").setLevel(logging.ERROR)
    memory = capability()
    bot = ConversableAgent("bot", llm_config=LLM_CONFIG, human_input_mode="NEVER")
    if os.environ["MODE"] == "restart":
        if os.environ.get("ATTACH") == "no":  # flush() before any agent is attached
            print(json.dumps(dataclasses.asdict(memory.flush(timeout=60.0))), flush=True)
            memory.close()
            return
        memory.add_to_agent(bot)
        report_of(memory, 60.0)
        return
    count = int(os.environ["COUNT"])
    alice = ConversableAgent("alice", llm_config=False, human_input_mode="NEVER")
    scripted(alice, [f"Message {n} from alice." for n in range(1, count)])
    scripted(bot, [f"Reply {n} from bot." for n in range(count)])
    memory.add_to_agent(bot)  # its recall goes before the scripted reply
    memory.add_to_agent(alice, speaks_for_person=True)
    alice.initiate_chat(bot, message="Message 0 from alice.", max_turns=count, silent=True)
    if os.environ["END"] == "exit":
        report_of(memory, 1.0)
        return
    print("captured", flush=True)
    sys.stdin.read()  # until killed: the test never writes


main()
