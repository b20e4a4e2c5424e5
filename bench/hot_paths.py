"""Items 1 and 2: what each adapter's hot path adds to a bare recall POST.

1. AutoGen: ``MemorySyncMemory.update_context`` against a bare ``httpx.AsyncClient``
   POST to ``/v1/memory/recall`` (same server, same body, warm connections).
2. AG2: the capability's recall reply function, called the way AG2 calls it before the
   model replies (from a plain thread: the recall runs on that thread's own loop),
   against the same bare POST awaited directly on a persistent loop;
   against the naive bridge (a new event loop and a new ``httpx.AsyncClient`` per
   hook call); against a shared synchronous ``httpx.Client`` called in the hook.

Samples are interleaved (one of each per round) so that drift on a shared machine
hits every series alike.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from autogen import ConversableAgent
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import UserMessage

from ag2_memorysync import MemorySyncCapability
from autogen_memorysync import MemorySyncMemory

from ._server import PROMPT, USER, BenchServer
from ._stats import Row, Section, now, p50_p99, ratio, stat

LLM_CONFIG = {"config_list": [{"model": "gpt-4o-mini", "api_key": "sk-bench-not-used"}]}


def _headers(server: BenchServer) -> dict[str, str]:
    return {"X-API-Key": server.api_key, "Accept": "application/json"}


async def _autogen(server: BenchServer, rounds: int) -> Section:
    memory = MemorySyncMemory(
        user_id=USER, session_id="bench", api_key=server.api_key, base_url=server.base_url
    )
    context = UnboundedChatCompletionContext()
    await context.add_message(UserMessage(content=PROMPT, source="user"))
    body = server.recall_body()
    ours: list[float] = []
    bare: list[float] = []
    async with httpx.AsyncClient(base_url=server.base_url, headers=_headers(server)) as client:
        for _ in range(20):  # warm both connections and the tenant
            await memory.update_context(context)
            (await client.post("/v1/memory/recall", json=body)).raise_for_status()
        result = await memory.update_context(context)
        assert result.memories.results, "the benchmark user has no memories to recall"
        for _ in range(rounds):
            started = now()
            await client.post("/v1/memory/recall", json=body)
            bare.append(now() - started)
            started = now()
            await memory.update_context(context)
            ours.append(now() - started)
    await memory.close()
    s_ours = stat("AutoGen update_context", ours)
    s_bare = stat("bare AsyncClient POST", bare)
    r = s_ours.p50 / s_bare.p50
    return Section(
        title="1. AutoGen hot path",
        setup=(
            f"{rounds} interleaved rounds, warm connections; the context holds one user "
            "message; recall returns 5 of the user's 10 memories."
        ),
        rows=[
            Row(
                "`update_context` vs bare `httpx.AsyncClient` POST",
                p50_p99(s_ours),
                p50_p99(s_bare),
                f"{ratio(s_ours.p50, s_bare.p50)} (p50), {ratio(s_ours.p99, s_bare.p99)} (p99)",
                "≤ 1.15× at p50",
                r <= 1.15,
            )
        ],
        stats=[s_ours, s_bare],
    )


def _recall_reply_function(agent: ConversableAgent) -> Any:
    for entry in agent._reply_func_list:  # call it exactly as AG2 does
        if entry["reply_func"].__name__ == "memorysync_recall":
            return entry["reply_func"]
    raise RuntimeError("the capability's recall reply function is not registered")


def _ag2(server: BenchServer, rounds: int, naive_rounds: int) -> Section:
    capability = MemorySyncCapability(
        user_id=USER, session_id="bench", api_key=server.api_key, base_url=server.base_url
    )
    assistant = ConversableAgent("assistant", llm_config=LLM_CONFIG, human_input_mode="NEVER")
    sender = ConversableAgent("user", llm_config=False, human_input_mode="NEVER")
    capability.add_to_agent(assistant)
    hook = _recall_reply_function(assistant)
    message = {"role": "user", "content": PROMPT, "name": "user"}
    body = server.recall_body()
    url = server.base_url + "/v1/memory/recall"

    def ours_once() -> None:
        messages = [dict(message)]  # what the copy_for_model hook hands the reply function
        hook(assistant, messages, sender, None)
        assert messages[-1]["content"] != PROMPT, "no memories reached the model's message"

    loop = asyncio.new_event_loop()
    async_client = httpx.AsyncClient(headers=_headers(server))

    def bare_once() -> None:
        loop.run_until_complete(async_client.post(url, json=body))

    sync_client = httpx.Client(headers=_headers(server))

    def sync_once() -> None:
        sync_client.post(url, json=body).raise_for_status()

    def naive_once() -> None:
        async def call() -> None:
            async with httpx.AsyncClient(headers=_headers(server)) as client:
                (await client.post(url, json=body)).raise_for_status()

        asyncio.run(call())

    series: dict[str, list[float]] = {"ours": [], "bare": [], "sync": [], "naive": []}
    runners = {"ours": ours_once, "bare": bare_once, "sync": sync_once, "naive": naive_once}
    for name in series:  # warm-up
        for _ in range(10):
            runners[name]()
    for i in range(rounds):
        for name, run in runners.items():
            if name == "naive" and i >= naive_rounds:
                continue
            started = now()
            run()
            series[name].append(now() - started)
    loop.run_until_complete(async_client.aclose())
    loop.close()
    sync_client.close()
    capability.close()

    s_ours = stat("AG2 recall hook", series["ours"])
    s_bare = stat("bare AsyncClient POST, awaited directly", series["bare"])
    s_sync = stat("shared sync httpx.Client in the hook", series["sync"])
    s_naive = stat("naive bridge: new loop + new AsyncClient per call", series["naive"])
    return Section(
        title="2. AG2 hot path",
        setup=(
            f"{rounds} interleaved rounds ({naive_rounds} for the naive bridge), warm "
            "connections. Ours is the capability's recall reply function called as AG2 calls "
            "it before the model replies, from a thread without an event loop (a sync "
            "chat): the recall runs on that thread's own private loop, with no hand-over to "
            "the background loop; the bare POST is awaited on a persistent loop."
        ),
        rows=[
            Row(
                "recall hook vs bare POST awaited directly",
                p50_p99(s_ours),
                p50_p99(s_bare),
                ratio(s_ours.p50, s_bare.p50),
                "≤ 1.15× at p50",
                s_ours.p50 / s_bare.p50 <= 1.15,
            ),
            Row(
                "naive bridge (new loop + client per call) vs recall hook",
                p50_p99(s_ours),
                p50_p99(s_naive),
                f"ours is {s_naive.p50 / s_ours.p50:.1f}× faster",
                "≥ 10× faster",
                s_naive.p50 / s_ours.p50 >= 10,
            ),
            Row(
                "recall hook vs shared sync `httpx.Client` in the hook",
                p50_p99(s_ours),
                p50_p99(s_sync),
                ratio(s_ours.p50, s_sync.p50),
                "reported",
                None,
            ),
        ],
        stats=[s_ours, s_bare, s_sync, s_naive],
    )


def run(server: BenchServer, *, quick: bool) -> list[Section]:
    """Items 1 and 2."""
    rounds = 60 if quick else 400
    autogen = asyncio.run(_autogen(server, rounds))
    ag2 = _ag2(server, rounds, naive_rounds=20 if quick else 80)
    return [autogen, ag2]
