"""Users moving from AutoGen keep their memories: same user id, same server, same facts."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from typing import Any

from agent_framework_memorysync import MemorySyncContextProvider
from shared.local_server import stored_history

AUTOGEN_PROCESS = """
    import asyncio, os
    from autogen_memorysync import MemorySyncMemory

    async def main() -> None:
        memory = MemorySyncMemory(
            user_id="customer-42", session_id="support",
            api_key=os.environ["KEY"], base_url=os.environ["URL"],
        )
        await memory.add_turn_pair(
            "I am vegetarian and I live in Lisbon.", "Noted: vegetarian, in Lisbon."
        )
        await memory.close()

    asyncio.run(main())
"""


async def test_a_fact_captured_through_autogen_is_recalled_through_agent_framework(
    served_local_server: Any, kit: Any
) -> None:
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", textwrap.dedent(AUTOGEN_PROCESS)],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "KEY": served_local_server.api_key,
            "URL": served_local_server.base_url,
        },
        check=False,
    )
    assert done.returncode == 0, done.stderr
    tenant = served_local_server.tenant_id
    assert stored_history(served_local_server, tenant, "customer-42", "autogen::support")

    async with MemorySyncContextProvider(
        user_id="customer-42",
        api_key=served_local_server.api_key,
        base_url=served_local_server.base_url,
    ) as memory:
        client = kit.ScriptedChatClient(["Try Ao 26."])
        agent = kit.agent(client, memory)
        session = agent.create_session()
        await agent.run("A vegetarian restaurant in Lisbon for tonight?", session=session)
    (instructions,) = kit.instructions(client)
    assert "Vegetarian" in instructions
    assert "Lisbon" in instructions
    # Each surface keeps its own transcript; the facts are the user's, across both.
    scopes = {h["session_id"] for h in stored_history(served_local_server, tenant, "customer-42")}
    assert scopes == {"autogen::support", f"agent-framework::{session.session_id}"}
