"""The Agent Framework hot path: what ``MemorySyncContextProvider.before_run`` adds to a POST.

Each sample is one ``before_run`` as ``Agent`` calls it before the model: a fresh
``SessionContext`` holding the run's user message, the session, and the provider's
slice of the session state; the figure is the recall, the rendering and the
provider's own work (placing the block in the run's instructions). The baseline is the
same ``POST /v1/memory/recall`` on a bare ``httpx.AsyncClient`` (same server, same
body, warm connections). Samples are interleaved, one of each per round.

Needs ``agent-framework-core``, which the ``bench`` session does not install; run it
on its own::

    python -m bench.agent_framework [--quick]
"""

from __future__ import annotations

import asyncio
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # some releases announce experimental features
    from agent_framework import Agent, AgentSession, BaseChatClient, Message, SessionContext

from agent_framework_memorysync import MemorySyncContextProvider

from ._server import PROMPT, USER, BenchServer, interleaved_with_bare_post, run_alone
from ._stats import Section, against_bare, stat


class _NoModel(BaseChatClient[Any]):
    """The agent's client: never called, ``before_run`` runs before any model call."""

    def _inner_get_response(
        self,
        *,
        messages: Sequence[Message],
        stream: bool,
        options: Mapping[str, Any],
        **kwargs: Any,
    ) -> Any:
        raise AssertionError("the benchmark never calls the model")


async def _measure(server: BenchServer, rounds: int) -> Section:
    memory = MemorySyncContextProvider(
        user_id=USER, api_key=server.api_key, base_url=server.base_url
    )
    agent = Agent(_NoModel(), instructions="You help.", context_providers=[memory])
    session = AgentSession(session_id="bench")
    state = session.state.setdefault(memory.source_id, {})

    async def one_call() -> SessionContext:
        context = SessionContext(
            session_id=session.session_id, input_messages=[Message("user", [PROMPT])]
        )
        await memory.before_run(agent=agent, session=session, context=context, state=state)
        return context

    ours, context, bare = await interleaved_with_bare_post(server, one_call, rounds)
    assert isinstance(context, SessionContext)
    assert len(context.instructions) == 1, "the benchmark user has no memories to recall"
    await memory.close()
    s_ours = stat("Agent Framework before_run", ours)
    s_bare = stat("bare AsyncClient POST", bare)
    return Section(
        title="13. Agent Framework hot path",
        setup=(
            f"{rounds} interleaved rounds, warm connections; a fresh SessionContext per "
            "call; recall returns 5 of the user's 10 memories."
        ),
        rows=[against_bare("before_run vs bare recall POST", s_ours, s_bare)],
        stats=[s_ours, s_bare],
    )


def run(server: BenchServer, *, quick: bool) -> list[Section]:
    """The Agent Framework row."""
    return [asyncio.run(_measure(server, 60 if quick else 400))]


def main(argv: list[str] | None = None) -> int:
    """Serve, seed, measure and print the row; 1 when it misses its goal."""
    return run_alone("python -m bench.agent_framework", __doc__, run, argv)


if __name__ == "__main__":
    sys.exit(main())
