"""Core objects work from any event loop: two ``asyncio.run`` calls in a row, one object."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from memorysync_core import DeliveryReport, MemorySyncAPI, RetryPolicy, ServerError, UserMemory
from memorysync_core._delivery.queue import DeliveryQueue
from memorysync_core.adapters import CapturedTurn
from shared.fake_server import FakeServer, Fault

from .conftest import API_KEY, FAST_RETRY

APPEND = "/v1/history/append"


def _memory(server: FakeServer) -> UserMemory:
    api = MemorySyncAPI(API_KEY, base_url=server.base_url)
    return UserMemory(api, user_id="ann", session_id="s", surface="demo", retry=FAST_RETRY)


def test_one_user_memory_recalls_and_captures_in_two_asyncio_runs(fake_server: FakeServer) -> None:
    fake_server.seed_memory("ann", "Ann lives in Porto.")
    memory = _memory(fake_server)

    async def session(n: int) -> str:
        block = (await memory.recall("Where does Ann live?")).block
        await memory.add_user_turn(f"Fact number {n}.")
        await memory.record_turns([memory.capture("user", f"Turn number {n}.")])
        await memory.aclose()  # this loop's connection; the memory stays usable
        return block

    first = asyncio.run(session(1))
    second = asyncio.run(session(2))

    assert "Porto" in first
    assert "Porto" in second
    assert [t["content"] for t in fake_server.history] == ["Turn number 1.", "Turn number 2."]


def test_one_delivery_queue_delivers_in_two_asyncio_runs(fake_server: FakeServer) -> None:
    memory = _memory(fake_server)
    queue = DeliveryQueue(memory.record_turns, policy=FAST_RETRY)

    async def session(n: int) -> DeliveryReport:
        queue.submit(memory.capture("user", f"Said in run {n}."))
        report = await queue.flush(timeout=10)
        await memory.aclose()
        return report

    assert asyncio.run(session(1)) == DeliveryReport(delivered=1)
    assert asyncio.run(session(2)) == DeliveryReport(delivered=2)
    assert [t["content"] for t in fake_server.history] == ["Said in run 1.", "Said in run 2."]


def test_turns_left_queued_when_a_loop_ends_are_delivered_once_on_the_next(
    fake_server: FakeServer,
) -> None:
    # The first run ends while the queue waits to retry a failed delivery: asyncio.run
    # cancels the worker. The next loop carries on with the same turns (same keys).
    fake_server.set_default(APPEND, Fault.status(503))
    memory = _memory(fake_server)
    failed = asyncio.Event()

    async def deliver(turns: Sequence[CapturedTurn]) -> None:
        try:
            await memory.record_turns(turns)
        except ServerError:
            failed.set()
            raise

    slow_retry = RetryPolicy(base_delay=30.0, max_delay=30.0, jitter=0.0)
    queue = DeliveryQueue(deliver, policy=slow_retry)

    async def first_run() -> DeliveryReport:
        queue.submit(memory.capture("user", "I live in Porto."))
        queue.submit(memory.capture("assistant", "Noted."))
        await failed.wait()
        await memory.aclose()
        return queue.report()

    async def second_run() -> DeliveryReport:
        fake_server.set_default(APPEND, None)
        report = await queue.flush(timeout=10)
        await memory.aclose()
        return report

    assert asyncio.run(first_run()).pending == 2
    assert asyncio.run(second_run()) == DeliveryReport(delivered=2)
    assert [t["content"] for t in fake_server.history] == ["I live in Porto.", "Noted."]


async def test_a_queue_reports_delivered_refused_and_pending_separately() -> None:
    refuse = {"bad"}

    async def deliver(turns: Sequence[CapturedTurn]) -> None:
        from memorysync_core import ValidationError

        if any(turn.text in refuse for turn in turns):
            raise ValidationError("refused", status_code=422)

    queue = DeliveryQueue(deliver, policy=FAST_RETRY)
    for text in ("good", "bad", "fine"):
        queue.submit(CapturedTurn.capture("user", text, scope="demo::s"))
    report = await queue.flush(timeout=10)
    assert (report.delivered, report.refused, report.pending) == (2, 1, 0)
    assert not report.all_delivered
    assert report.reasons == ("ValidationError (status 422)",)
    assert (await queue.aclose()) == report
