"""Item 8: AutoGen's turn cost against the length of the conversation (issue 11, item 5).

``MemorySyncMemory.update_context`` on model contexts holding 2, 200 and 1,000
messages, against ``memorysync-local`` embedded in the process (an ``httpx`` ASGI
transport, no socket). Each sample is one real turn: outside the timer the agent's
answer and the next question are added to the context (and the two oldest messages
dropped, so the history stays at its size); then ``update_context`` recalls for the new
question and moves the block in front of it. The sizes are interleaved (one sample of
each per round) so that drift on a shared machine hits every series alike.

For reference, the same turns on a context that overrides ``save_state`` /
``load_state`` (a custom context the memory cannot read directly) show the state
round-trip, which is what every context paid before.

Run it alone with ``python -m bench.history [--quick]``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from typing import Any

import httpx
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import AssistantMessage, LLMMessage, UserMessage

import memorysync_local
from autogen_memorysync import MemorySyncMemory

from ._server import FACTS, PROMPT, USER, print_item
from ._stats import Row, Section, Stat, now, p50_p99, ratio, stat

SIZES = (2, 200, 1000)
GOAL = 1.3
_LABELS = {
    "live": "update_context",
    "round-trip": "update_context, custom context (state round-trip)",
}
ANSWER = "Here is a detailed answer to your question, with a few suggestions for you."


class _RoundTripContext(UnboundedChatCompletionContext):
    """A context with its own state methods: the memory must use the state round-trip."""

    async def save_state(self) -> Mapping[str, Any]:
        return await super().save_state()

    async def load_state(self, state: Mapping[str, Any]) -> None:
        await super().load_state(state)


def _question(turn: int) -> str:
    return f"{PROMPT} (turn {turn})"


def _history(size: int) -> list[LLMMessage]:
    """``size`` messages alternating assistant / user, ending with the user's question."""
    messages: list[LLMMessage] = []
    for index in range(size - 1):
        if index % 2 == 0:
            messages.append(AssistantMessage(content=ANSWER, source="assistant"))
        else:
            messages.append(UserMessage(content=_question(index), source="user"))
    messages.append(UserMessage(content=_question(size), source="user"))
    return messages


async def _next_turn(
    context: UnboundedChatCompletionContext, memory: MemorySyncMemory, turn: int
) -> None:
    """Add the answer and the next question; drop the two oldest messages (not the block)."""
    await context.add_message(AssistantMessage(content=ANSWER, source="assistant"))
    await context.add_message(UserMessage(content=_question(turn), source="user"))
    # Setup, not timed: keeps the history at its size. The block itself is never dropped.
    oldest = [
        index
        for index, message in enumerate(context._messages[:4])
        if getattr(message, "source", None) != memory.block_source
    ][:2]
    for index in reversed(oldest):
        del context._messages[index]


async def _seed(server: memorysync_local.EmbeddedServer) -> None:
    headers = {"X-API-Key": server.api_key, "X-End-User-ID": USER}
    async with httpx.AsyncClient(
        transport=server.transport, base_url=server.base_url, headers=headers
    ) as client:
        for fact in FACTS:
            answer = await client.post("/memory/add", json={"text": fact, "source": "bench"})
            answer.raise_for_status()


async def _measure(rounds: int) -> dict[tuple[str, int], list[float]]:
    samples: dict[tuple[str, int], list[float]] = {}
    with memorysync_local.embedded() as server:
        await _seed(server)
        memory = MemorySyncMemory(
            user_id=USER,
            session_id="bench-history",
            api_key=server.api_key,
            base_url=server.base_url,
            transport=server.transport,
        )
        contexts: dict[tuple[str, int], UnboundedChatCompletionContext] = {}
        for kind, factory in (
            ("live", UnboundedChatCompletionContext),
            ("round-trip", _RoundTripContext),
        ):
            for size in SIZES:
                contexts[kind, size] = factory(initial_messages=_history(size))
                samples[kind, size] = []
        for context in contexts.values():  # warm the connection, place the first block
            for _ in range(5):
                result = await memory.update_context(context)
            assert result.memories.results, "the benchmark user has no memories to recall"
        # The goal's series first, then the reference: the round-trip's garbage would
        # otherwise land on the next sample. Within a phase the order rotates each round.
        for kind in ("live", "round-trip"):
            keys = [key for key in contexts if key[0] == kind]
            for turn in range(rounds):
                for key in keys[turn % len(keys) :] + keys[: turn % len(keys)]:
                    context = contexts[key]
                    await _next_turn(context, memory, turn)
                    started = now()
                    await memory.update_context(context)
                    samples[key].append(now() - started)
        for (_, size), context in contexts.items():
            kept = context._messages
            blocks = [m for m in kept if getattr(m, "source", None) == memory.block_source]
            assert len(blocks) == 1, "one block"
            assert kept[-2] is blocks[0], "the block is right before the question"
            assert len(kept) == size + 1, (len(kept), size)
        await memory.close()
    return samples


def run(*, quick: bool) -> list[Section]:
    """Item 8, on its own embedded server (``python -m bench`` runs it last)."""
    rounds = 60 if quick else 300
    samples = asyncio.run(_measure(rounds))
    stats: dict[tuple[str, int], Stat] = {
        (kind, size): stat(f"{_LABELS[kind]}, {size} messages", values)
        for (kind, size), values in samples.items()
    }
    live = {size: stats["live", size] for size in SIZES}
    trip = {size: stats["round-trip", size] for size in SIZES}
    base = live[SIZES[0]].p50
    worst = live[SIZES[-1]].p50 / base
    rows = [
        Row(
            f"`update_context` at {SIZES[-1]:,} vs {SIZES[0]} messages",
            p50_p99(live[SIZES[-1]]),
            p50_p99(live[SIZES[0]]),
            ratio(live[SIZES[-1]].p50, base),
            f"≤ {GOAL}× at p50",
            worst <= GOAL,
        ),
        Row(
            f"`update_context` at {SIZES[1]} vs {SIZES[0]} messages",
            p50_p99(live[SIZES[1]]),
            p50_p99(live[SIZES[0]]),
            ratio(live[SIZES[1]].p50, base),
            "reported",
            None,
        ),
        Row(
            f"custom context (state round-trip) at {SIZES[-1]:,} vs {SIZES[0]} messages",
            p50_p99(trip[SIZES[-1]]),
            p50_p99(trip[SIZES[0]]),
            ratio(trip[SIZES[-1]].p50, trip[SIZES[0]].p50),
            "reported",
            None,
        ),
    ]
    return [
        Section(
            title="8. AutoGen turn cost against history length",
            setup=(
                f"{rounds} interleaved rounds against `memorysync-local` embedded in the "
                "process (ASGI transport). Each sample is one turn: the answer and a new "
                "question join an `UnboundedChatCompletionContext` of 2, 200 or 1,000 "
                "messages (the two oldest leave, untimed), then `update_context` recalls 5 "
                "of the user's 10 memories and moves the block before the new question. "
                "The round-trip rows use a context that overrides `save_state`/`load_state`, "
                "so the memory reads and writes it through its state."
            ),
            rows=rows,
            stats=[*live.values(), *trip.values()],
        )
    ]


def main(argv: list[str] | None = None) -> int:
    """Print this item's rows; exit status 1 when one misses its goal."""
    return print_item("python -m bench.history", __doc__, lambda quick: run(quick=quick), argv)


if __name__ == "__main__":
    sys.exit(main())
