"""The ag2 1.x hot path: what ``MemorySyncMiddleware`` adds to a bare recall POST.

Each sample is one model call as ag2 makes it: a new per-turn middleware from the
factory (``factory(event, context)``, as ag2 does every turn), then its ``on_llm_call``
around a model that returns at once, so the figure is the recall, the prompt swap and
the middleware's own work. The baseline is the same ``POST /v1/memory/recall`` on a
bare ``httpx.AsyncClient`` (same server, same body, warm connections). Samples are
interleaved, one of each per round.

Needs ``ag2`` 1.x, which the ``bench`` session does not install; run it on its own::

    python -m bench.ag2_v1 [--quick]
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from ag2 import MemoryStream
from ag2.context import ConversationContext
from ag2.events import ModelRequest, ModelResponse, TextInput

from ag2_memorysync.v1 import MemorySyncMiddleware

from ._server import PROMPT, USER, BenchServer, interleaved_with_bare_post, run_alone
from ._stats import Section, against_bare, stat


async def _measure(server: BenchServer, rounds: int) -> Section:
    memory = MemorySyncMiddleware(
        user_id=USER, session_id="bench", api_key=server.api_key, base_url=server.base_url
    )
    event = ModelRequest([TextInput(PROMPT)])
    events = [event]
    context = ConversationContext(stream=MemoryStream(), prompt=["You help."])
    seen: list[Sequence[str]] = []

    async def model(events: Sequence[Any], context: Any) -> ModelResponse:
        seen.append(context.prompt)
        return ModelResponse()

    async def one_call() -> None:
        await memory(event, context).on_llm_call(model, events, context)

    ours, _, bare = await interleaved_with_bare_post(server, one_call, rounds)
    assert len(seen[-1]) == 2, "the benchmark user has no memories to recall"
    await memory.aclose()
    s_ours = stat("ag2 1.x middleware recall", ours)
    s_bare = stat("bare AsyncClient POST", bare)
    return Section(
        title="12. ag2 1.x hot path",
        setup=(
            f"{rounds} interleaved rounds, warm connections; a new per-turn middleware per "
            "call; recall returns 5 of the user's 10 memories."
        ),
        rows=[against_bare("middleware recall vs bare recall POST", s_ours, s_bare)],
        stats=[s_ours, s_bare],
    )


def run(server: BenchServer, *, quick: bool) -> list[Section]:
    """The ag2 1.x row."""
    return [asyncio.run(_measure(server, 60 if quick else 400))]


def main(argv: list[str] | None = None) -> int:
    """Serve, seed, measure and print the row; 1 when it misses its goal."""
    return run_alone("python -m bench.ag2_v1", __doc__, run, argv)


if __name__ == "__main__":
    sys.exit(main())
