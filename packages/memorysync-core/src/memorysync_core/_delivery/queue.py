"""A fire-and-forget delivery queue: in order, batched, retried, and honest about the outcome."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _telemetry as telemetry
from .._errors import AuthError, MemorySyncError, ValidationError
from .._wire.retry import RetryPolicy
from .turns import CapturedTurn

_logger = logging.getLogger("memorysync.delivery")

Deliver = Callable[[Sequence[CapturedTurn]], Awaitable[object]]

# What to do about a refused key, said once per queue instead of once per batch.
_AUTH_ADVICE = (
    "check MEMORYSYNC_API_KEY (or the api_key passed in) and the key's project; "
    "every captured turn is refused until the key is fixed"
)


@dataclass(frozen=True)
class DeliveryReport:
    """What became of the turns handed to a delivery queue since it was created.

    ``delivered`` turns were accepted by the server; ``refused`` turns were given up
    (the server refused them, the queue was full or closed), never counted as
    delivered, with each distinct reason once in ``reasons``; ``pending`` turns are
    still waiting (an outage, or ``flush`` ran out of time).

    >>> report = DeliveryReport(delivered=2)
    >>> report.all_delivered, report.delivered
    (True, 2)
    """

    delivered: int = 0
    refused: int = 0
    pending: int = 0
    reasons: tuple[str, ...] = ()

    @property
    def all_delivered(self) -> bool:
        """True when nothing was refused and nothing is pending."""
        return not self.refused and not self.pending


class DeliveryQueue:
    """Delivers captured turns in the background, in order, in batches, with retries.

    ``submit`` never blocks; a single worker delivers in order, in batches of at most
    ``max_batch``, retrying transient failures forever with the policy's backoff (the
    same turns, so the same idempotency keys and ``seq``). A non-retryable failure
    refuses that batch (a rejected batch is split so one bad turn does not take the
    others with it). At most ``max_pending`` turns wait; beyond that ``submit``
    refuses the turn and returns False. :meth:`report`, :meth:`flush` and
    :meth:`aclose` say what happened.

    The queue works from any event loop, one at a time: when the loop it was
    delivering on has ended (two ``asyncio.run`` calls in a row), the next call on a
    new loop carries on with the turns still queued.

    Example:
        ```python
        async def deliver(turns: Sequence[CapturedTurn]) -> None:
            await memory.record_turns(turns)

        queue = DeliveryQueue(deliver)
        queue.submit(memory.capture("user", "I live in Lisbon."))
        report = await queue.flush(timeout=5)
        assert report.all_delivered
        ```
    """

    def __init__(
        self,
        deliver: Deliver,
        *,
        policy: RetryPolicy | None = None,
        max_pending: int = 10_000,
        max_batch: int = 100,
    ) -> None:
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise ValueError(f"max_pending must be an integer >= 1, got {max_pending!r}")
        if (
            isinstance(max_batch, bool)
            or not isinstance(max_batch, int)
            or not 1 <= max_batch <= 100
        ):
            raise ValueError(f"max_batch must be an integer from 1 to 100, got {max_batch!r}")
        self._deliver = deliver
        self._policy = policy if policy is not None else RetryPolicy()
        self._max_pending = max_pending
        self._max_batch = max_batch
        self._items: collections.deque[CapturedTurn] = collections.deque()
        self._worker: asyncio.Task[None] | None = None
        self._closed = False
        self._delivered = 0
        self._refused = 0
        self._reasons: dict[str, None] = {}  # distinct reasons, in order first seen

    @property
    def pending(self) -> int:
        """Turns submitted and not yet delivered (or refused), the batch in flight included."""
        return len(self._items)

    @property
    def dropped(self) -> int:
        """Turns refused (by the server, or on overflow or after close); never delivered."""
        return self._refused

    def queued(self) -> list[CapturedTurn]:
        """The turns waiting (the batch in flight included), in order."""
        return list(self._items)

    def report(self) -> DeliveryReport:
        """Delivered, refused (with the reasons) and pending turns, as of now."""
        return DeliveryReport(
            delivered=self._delivered,
            refused=self._refused,
            pending=len(self._items),
            reasons=tuple(self._reasons),
        )

    def _bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        worker = self._worker
        if worker is not None and not worker.done() and worker.get_loop() is not loop:
            other = worker.get_loop()
            if other.is_running() and not other.is_closed():
                raise RuntimeError("this DeliveryQueue is delivering on another running loop")
            # Its loop ended under it: the turns it held are still queued.
            self._worker = None
        return loop

    def _ensure_worker(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._items and (self._worker is None or self._worker.done()):
            self._worker = loop.create_task(self._run(), name="memorysync-delivery")

    def _refuse(self, count: int, reason: str) -> None:
        self._refused += count
        self._reasons.setdefault(reason, None)
        _metric("turns_refused", count)

    def submit(self, turn: CapturedTurn) -> bool:
        """Queue ``turn``; False (refused, with a WARNING) when the queue is full or closed.

        Must be called on a running event loop (from a thread: ``call_soon_threadsafe``).
        """
        loop = self._bind()
        if self._closed:
            self._refuse(1, "queue closed")
            _logger.warning("delivery queue is closed: a %s turn was not queued", turn.role)
            return False
        if len(self._items) >= self._max_pending:
            self._refuse(1, "queue full")
            _logger.warning(
                "delivery queue full (%s turns pending): a %s turn was dropped",
                self._max_pending,
                turn.role,
            )
            return False
        self._items.append(turn)
        _metric("queue_depth", 1)
        self._ensure_worker(loop)
        return True

    async def _run(self) -> None:
        # The worker ends when the queue is empty (``submit`` starts a new one), so an
        # idle queue holds no task on its loop and an abandoned one is simply collected.
        while self._items and not self._closed:
            batch = [self._items[i] for i in range(min(self._max_batch, len(self._items)))]
            await self._deliver_batch(batch)
            for _ in batch:
                self._items.popleft()
            _metric("queue_depth", -len(batch))

    async def _deliver_batch(self, batch: Sequence[CapturedTurn]) -> None:
        # A batch may hold several turns' captures: its span is a trace of its own.
        with telemetry.span(
            "memorysync.deliver", {"memorysync.turns": len(batch)}, root=True
        ) as span:
            delivered, refused = self._delivered, self._refused
            retries = await self._attempt_batch(batch, span)
            counts = {
                "memorysync.delivered": self._delivered - delivered,
                "memorysync.refused": self._refused - refused,
                "memorysync.retries": retries,
                "memorysync.pending": len(self._items),
            }
            span.set_attributes(counts)

    async def _attempt_batch(self, batch: Sequence[CapturedTurn], span: Any) -> int:
        """Deliver ``batch`` with retries; the number of retries it took."""
        attempt = 0
        while True:
            attempt += 1
            try:
                await self._deliver(batch)
                self._delivered += len(batch)
                _metric("turns_delivered", len(batch))
                if attempt > 1:
                    _logger.info("delivered %s turns after %s attempts", len(batch), attempt)
                return attempt - 1
            except MemorySyncError as exc:
                if not self._policy.is_retryable(exc):
                    if isinstance(exc, ValidationError) and len(batch) > 1:
                        # One refused turn must not take the others with it: the halves
                        # go on their own (same turns, same keys, so nothing doubles).
                        middle = len(batch) // 2
                        await self._deliver_batch(batch[:middle])
                        await self._deliver_batch(batch[middle:])
                        return attempt - 1
                    self._refused_by_server(batch, exc)
                    return attempt - 1
                if self._closed:
                    # asyncio.wait_for (up to 3.11) swallows a cancellation that lands as
                    # the request completes: a closed queue stops retrying all the same.
                    raise asyncio.CancelledError from exc
                wait = self._policy.delay(attempt, exc)
                _logger.warning(
                    "delivery of %s turns failed (%s, status %s); attempt %s, retrying in %.2f s",
                    len(batch),
                    type(exc).__name__,
                    exc.status_code,
                    attempt,
                    wait,
                )
                span.add_event(
                    "memorysync.retry",
                    {
                        "memorysync.attempt": attempt,
                        "error.type": type(exc).__name__,
                        "http.response.status_code": exc.status_code or 0,
                        "memorysync.wait_s": wait,
                    },
                )
                _metric("turns_retried", len(batch))
                await asyncio.sleep(wait)
            except Exception as exc:
                self._refuse(len(batch), f"delivery raised {type(exc).__name__}")
                _logger.error(
                    "dropped %s turns: delivery raised %s", len(batch), type(exc).__name__
                )
                return attempt - 1

    def _refused_by_server(self, batch: Sequence[CapturedTurn], exc: MemorySyncError) -> None:
        reason = f"{type(exc).__name__} (status {exc.status_code})"
        if isinstance(exc, AuthError):
            reason = f"{reason}: {_AUTH_ADVICE}"
            first = reason not in self._reasons
            self._refuse(len(batch), reason)
            # A wrong key refuses every batch: one ERROR says so, the rest are DEBUG.
            _logger.log(
                logging.ERROR if first else logging.DEBUG,
                "dropped %s turns: the server refused the API key (%s, status %s); %s",
                len(batch),
                type(exc).__name__,
                exc.status_code,
                _AUTH_ADVICE,
            )
            return
        self._refuse(len(batch), reason)
        _logger.error(
            "dropped %s turns: the server refused them (%s, status %s)",
            len(batch),
            type(exc).__name__,
            exc.status_code,
        )

    async def flush(self, timeout: float | None = None) -> DeliveryReport:
        """Wait until every queued turn is delivered or refused, or ``timeout`` passes.

        Returns the :class:`DeliveryReport` as of then (``pending`` > 0 on timeout).
        """
        loop = self._bind()
        self._ensure_worker(loop)  # carries on after a loop that ended mid-delivery
        worker = self._worker
        if self._items and worker is not None:
            # asyncio.wait never cancels the worker on timeout.
            await asyncio.wait({worker}, timeout=timeout)
        return self.report()

    async def aclose(self, timeout: float | None = 5.0) -> DeliveryReport:
        """Flush (up to ``timeout``), then stop the worker; the final report.

        Idempotent; later ``submit`` calls are refused. Turns still queued stay
        ``pending`` in the report: they were neither delivered nor refused by the server.
        """
        report = await self.flush(timeout)
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is not None and not worker.done():
            worker.cancel()
            # asyncio.wait never raises the worker's CancelledError, only our own.
            await asyncio.wait({worker})
        if report.pending:
            _logger.warning("delivery queue closed with %s turns undelivered", report.pending)
        return report


def _metric(name: str, amount: int) -> None:
    """Add ``amount`` to one of the delivery counters (nothing when telemetry is off)."""
    metrics = telemetry.instruments()
    if metrics is not None and amount:
        getattr(metrics, name).add(amount)
