"""Item 5: 1,000 users in one process against one base URL and key.

Constructs 1,000 ``MemorySyncMemory`` and 1,000 ``MemorySyncCapability`` instances (one
per user), then has every AutoGen memory recall once (50 at a time) and counts the open
connections to the server and the shared clients. Baseline: building one
``httpx.AsyncClient`` per instance, the cost the shared pool avoids.
"""

from __future__ import annotations

import asyncio
import gc

import httpx
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import UserMessage

from ag2_memorysync import MemorySyncCapability
from autogen_memorysync import MemorySyncMemory
from shared.core_state import shared_client_count

from ._server import PROMPT, BenchServer, established_connections_to, rss_mib
from ._stats import Row, Section, ms, now, stat

USERS = 1000
BATCH = 50


async def _autogen(server: BenchServer) -> dict[str, float]:
    gc.collect()
    rss_before = rss_mib()
    times: list[float] = []
    memories = []
    for i in range(USERS):
        started = now()
        memories.append(
            MemorySyncMemory(user_id=f"user-{i}", api_key=server.api_key, base_url=server.base_url)
        )
        times.append(now() - started)
    rss_built = rss_mib()
    context = UnboundedChatCompletionContext()
    await context.add_message(UserMessage(content=PROMPT, source="user"))
    for start in range(0, USERS, BATCH):
        batch = memories[start : start + BATCH]
        await asyncio.gather(*(m.update_context(context) for m in batch))
    loop = asyncio.get_running_loop()
    result = {
        "construct_p50": stat("", times).p50,
        "construct_p99": stat("", times).p99,
        "connections": float(established_connections_to(server.port)),
        "shared_clients": float(shared_client_count(loop)),
        "rss_construct": rss_built - rss_before,
        "rss_after_recall": rss_mib() - rss_before,
    }
    for memory in memories:
        await memory.close()
    return result


def _ag2(server: BenchServer) -> dict[str, float]:
    gc.collect()
    rss_before = rss_mib()
    times: list[float] = []
    capabilities = []
    for i in range(USERS):
        started = now()
        capabilities.append(
            MemorySyncCapability(
                user_id=f"user-{i}", api_key=server.api_key, base_url=server.base_url
            )
        )
        times.append(now() - started)
    result = {
        "construct_p50": stat("", times).p50,
        "construct_p99": stat("", times).p99,
        "rss_construct": rss_mib() - rss_before,
    }
    for capability in capabilities:
        capability.close()
    return result


async def _client_per_instance(count: int) -> list[float]:
    times: list[float] = []
    clients = []
    for _ in range(count):
        started = now()
        clients.append(httpx.AsyncClient())
        times.append(now() - started)
    for client in clients:
        await client.aclose()
    return times


def run(server: BenchServer, *, quick: bool) -> list[Section]:
    """Item 5."""
    autogen = asyncio.run(_autogen(server))
    ag2 = _ag2(server)
    baseline = stat("httpx.AsyncClient()", asyncio.run(_client_per_instance(20 if quick else 50)))
    return [
        Section(
            title="5. Many users in one process",
            setup=(
                f"{USERS:,} instances, one per user, same base URL and key. Construction time "
                f"per instance; then every AutoGen memory recalls once ({BATCH} at a time) and "
                "the client-side TCP connections to the server are counted (`/proc/net/tcp`). "
                "Resident memory is the growth of this process's RSS. Baseline: building one "
                f"`httpx.AsyncClient` ({baseline.n} samples), what a client per instance costs."
            ),
            rows=[
                Row(
                    f"`MemorySyncMemory` construction ({USERS:,} users)",
                    f"{ms(autogen['construct_p50'])} / {ms(autogen['construct_p99'])}",
                    f"{ms(baseline.p50)} / {ms(baseline.p99)}",
                    f"{baseline.p50 / autogen['construct_p50']:.0f}× cheaper",
                    "well under 1 ms",
                    autogen["construct_p99"] < 1.0,
                ),
                Row(
                    f"`MemorySyncCapability` construction ({USERS:,} users)",
                    f"{ms(ag2['construct_p50'])} / {ms(ag2['construct_p99'])}",
                    f"{ms(baseline.p50)} / {ms(baseline.p99)}",
                    f"{baseline.p50 / ag2['construct_p50']:.0f}× cheaper",
                    "well under 1 ms",
                    ag2["construct_p99"] < 1.0,
                ),
                Row(
                    f"open connections after {USERS:,} AutoGen recalls",
                    f"{autogen['connections']:.0f} TCP, {autogen['shared_clients']:.0f} "
                    "shared client",
                    f"{USERS:,} clients (one per instance)",
                    "n/a",
                    "one shared pool",
                    autogen["shared_clients"] == 1 and autogen["connections"] <= BATCH,
                ),
                Row(
                    "resident memory",
                    f"+{autogen['rss_construct']:.1f} MiB ({USERS:,} AutoGen built), "
                    f"+{autogen['rss_after_recall']:.1f} MiB after recalls; "
                    f"+{ag2['rss_construct']:.1f} MiB ({USERS:,} AG2 built)",
                    "",
                    "n/a",
                    "reported",
                    None,
                ),
            ],
            stats=[baseline],
        )
    ]
