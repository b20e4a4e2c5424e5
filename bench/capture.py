"""Item 6: capture throughput and what capture adds to the agent's turn.

- AutoGen: ``add_turn_pair`` is explicit and awaited, so its latency is what a turn pays;
  throughput sequentially and with 10 exchanges in flight.
- AG2: capture runs in AG2's send/receive hooks and never waits on the network. The
  added latency is ``agent.send`` with the capability attached minus without it;
  throughput is turns captured per second until all are stored (``flush``).
"""

from __future__ import annotations

import asyncio

from autogen import ConversableAgent

from ag2_memorysync import MemorySyncCapability
from autogen_memorysync import MemorySyncMemory

from ._server import BenchServer
from ._stats import Row, Section, Stat, ms, now, p50_p99, stat


async def _autogen(server: BenchServer, pairs: int) -> dict[str, object]:
    memory = MemorySyncMemory(
        user_id="capture-autogen",
        session_id="bench",
        api_key=server.api_key,
        base_url=server.base_url,
    )
    await memory.add_turn_pair("I live in Porto.", "Noted.")  # warm
    latencies: list[float] = []
    started_all = now()
    for i in range(pairs):
        started = now()
        await memory.add_turn_pair(f"I visited museum number {i} today.", f"Nice, number {i}.")
        latencies.append(now() - started)
    sequential = 2 * pairs / (now() - started_all)

    semaphore = asyncio.Semaphore(10)

    async def one(i: int) -> None:
        async with semaphore:
            await memory.add_turn_pair(f"I rode tram line {i} today.", f"Tram {i}, noted.")

    started_all = now()
    await asyncio.gather(*(one(i) for i in range(pairs)))
    concurrent = 2 * pairs / (now() - started_all)
    await memory.close()
    return {
        "latency": stat("AutoGen add_turn_pair", latencies),
        "seq": sequential,
        "conc": concurrent,
    }


def _send_times(sender: ConversableAgent, receiver: ConversableAgent, turns: int) -> list[float]:
    times: list[float] = []
    for i in range(turns):
        started = now()
        sender.send(f"I booked seat {i} by the window.", receiver, request_reply=False, silent=True)
        times.append(now() - started)
    return times


def _ag2(server: BenchServer, turns: int) -> dict[str, object]:
    def pair() -> tuple[ConversableAgent, ConversableAgent]:
        return (
            ConversableAgent("user", llm_config=False, human_input_mode="NEVER"),
            ConversableAgent("assistant", llm_config=False, human_input_mode="NEVER"),
        )

    plain_sender, plain_receiver = pair()
    _send_times(plain_sender, plain_receiver, 50)  # warm
    capability = MemorySyncCapability(
        user_id="capture-ag2",
        session_id="bench",
        api_key=server.api_key,
        base_url=server.base_url,
    )
    sender, receiver = pair()
    capability.add_to_agent(sender)
    capability.add_to_agent(receiver)
    _send_times(sender, receiver, 50)  # warm
    assert capability.flush(timeout=30).all_delivered
    with_capture: list[float] = []
    without: list[float] = []
    started_all = now()
    for _ in range(turns // 50):  # interleave blocks of 50
        with_capture += _send_times(sender, receiver, 50)
        without += _send_times(plain_sender, plain_receiver, 50)
    left = capability.flush(timeout=120).pending
    elapsed = now() - started_all - sum(without)
    capability.close()
    return {
        "with": stat("AG2 send with capture", with_capture),
        "without": stat("AG2 send without capture", without),
        "throughput": len(with_capture) / elapsed,
        "left": left,
    }


def run(server: BenchServer, *, quick: bool) -> list[Section]:
    """Item 6."""
    autogen = asyncio.run(_autogen(server, 40 if quick else 200))
    ag2 = _ag2(server, 200 if quick else 1000)
    latency = autogen["latency"]
    with_capture, without = ag2["with"], ag2["without"]
    assert isinstance(latency, Stat)
    assert isinstance(with_capture, Stat)
    assert isinstance(without, Stat)
    added_p50 = with_capture.p50 - without.p50
    added_p99 = with_capture.p99 - without.p99
    return [
        Section(
            title="6. Capture",
            setup=(
                "AutoGen: sequential `add_turn_pair` calls (two turns each, transcript mode, "
                "extraction on), then the same with 10 in flight. AG2: a two-agent "
                "`send(..., request_reply=False)` with the capability on both agents, against "
                "the same agents without it, interleaved in blocks of 50; throughput counts "
                "until `flush()` confirms every turn stored."
            ),
            rows=[
                Row(
                    "AutoGen `add_turn_pair`: latency on the turn (awaited)",
                    p50_p99(latency),
                    "",
                    "n/a",
                    "reported",
                    None,
                ),
                Row(
                    "AutoGen `add_turn_pair`: throughput",
                    f"{autogen['seq']:.0f} turns/s sequential, {autogen['conc']:.0f} turns/s "
                    "with 10 in flight",
                    "",
                    "n/a",
                    "reported",
                    None,
                ),
                Row(
                    "AG2 capture: added latency on the agent's turn",
                    f"+{ms(added_p50)} p50, +{ms(added_p99)} p99",
                    f"send without capture {p50_p99(without)}",
                    f"{with_capture.p50 / without.p50:.2f}× (p50)",
                    "< 1 ms",
                    added_p50 < 1.0,
                ),
                Row(
                    "AG2 capture: throughput until stored",
                    f"{ag2['throughput']:.0f} turns/s ({ag2['left']} left after flush)",
                    "",
                    "n/a",
                    "reported",
                    None,
                ),
            ],
            stats=[latency, with_capture, without],
        )
    ]
