"""Time in tests: one slack for deadlines, and a loop probe that needs no clock.

A test asserts a duration only where the bound is the feature (a recall budget), and
then as ``budget + SLACK``. ``SLACK`` is what a 2-core machine running another full
suite beside this one may add to any deadline (thread scheduling, a garbage collection);
it stays well below every fault the tests inject (a 5 s delay, an answer that never
comes), so a bound of ``budget + SLACK`` still proves that the fault was cut off. How
close to the budget a recall really returns is measured in ``bench/`` (budget precision).

Whether a caller's event loop keeps running while a recall waits is not measured with a
clock either: :func:`release_when_held` runs on the caller's loop and answers the held
request itself. If the recall blocked the loop, nothing could open the gate before the
recall's (long) budget ran out, and the recall would come back empty.
"""

from __future__ import annotations

import threading
from typing import Protocol

__all__ = ["SLACK", "HeldRequests", "release_when_held"]

SLACK = 2.0
"""Seconds a busy 2-core machine may add to any deadline a test asserts."""


class HeldRequests(Protocol):
    """A server that can say when requests arrived (``shared.fake_server.FakeServer``)."""

    async def wait_for_requests_async(
        self, count: int, route: str | None = None, *, method: str | None = None,
        timeout: float = ...,
    ) -> object: ...  # fmt: skip


async def release_when_held(server: HeldRequests, route: str, gate: threading.Event) -> None:
    """On the caller's loop: once ``server`` holds a request to ``route``, let it answer.

    Pair it with ``Fault.gate(gate)`` on ``route`` and a recall budget far above
    ``SLACK``; start it with ``asyncio.create_task`` before the call under test.
    """
    await server.wait_for_requests_async(1, route, timeout=60.0)
    gate.set()
