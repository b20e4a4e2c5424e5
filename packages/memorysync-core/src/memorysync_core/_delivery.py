"""A fire-and-forget delivery queue: in order, batched, retried until delivered."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from ._errors import MemorySyncError, ValidationError
from ._retry import RetryPolicy
from ._turns import CapturedTurn

_logger = logging.getLogger("memorysync.delivery")

Deliver = Callable[[Sequence[CapturedTurn]], Awaitable[None]]


class DeliveryQueue:
    """Delivers captured turns in the background on ONE event loop.

    ``submit`` never blocks; a single worker delivers in order, in batches of at most
    ``max_batch``, retrying transient failures forever with the policy's backoff (the
    same turns, so the same idempotency keys). A non-retryable failure drops that batch
    with an ERROR log. At most ``max_pending`` turns wait; beyond that ``submit``
    returns False and logs a WARNING.

    Example::

        async def deliver(turns: Sequence[CapturedTurn]) -> None:
            await memory.record_turns(turns)

        queue = DeliveryQueue(deliver)
        queue.submit(memory.capture("user", "I live in Lisbon."))
        undelivered = await queue.flush(timeout=5)
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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: asyncio.Task[None] | None = None
        self._idle: asyncio.Event | None = None
        self._closed = False
        self._dropped = 0

    @property
    def pending(self) -> int:
        """Turns submitted and not yet delivered (or dropped), the batch in flight included."""
        return len(self._items)

    @property
    def dropped(self) -> int:
        """Turns refused on overflow or dropped after a non-retryable error."""
        return self._dropped

    def _bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
            self._idle = asyncio.Event()
            self._idle.set()
        elif self._loop is not loop:
            raise RuntimeError("a DeliveryQueue is bound to the event loop it was first used on")
        return loop

    def submit(self, turn: CapturedTurn) -> bool:
        """Queue ``turn``; False (and a WARNING) when the queue is full or closed.

        Must be called on the queue's event loop (from a thread: ``call_soon_threadsafe``).
        """
        loop = self._bind()
        if self._closed:
            self._dropped += 1
            _logger.warning("delivery queue is closed: a %s turn was not queued", turn.role)
            return False
        if len(self._items) >= self._max_pending:
            self._dropped += 1
            _logger.warning(
                "delivery queue full (%s turns pending): a %s turn was dropped",
                self._max_pending,
                turn.role,
            )
            return False
        self._items.append(turn)
        assert self._idle is not None
        self._idle.clear()
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._run(), name="memorysync-delivery")
        return True

    async def _run(self) -> None:
        # The worker ends when the queue is empty (``submit`` starts a new one), so an
        # idle queue holds no task on its loop and an abandoned one is simply collected.
        assert self._idle is not None
        while True:
            if not self._items:
                self._idle.set()
                return
            batch = [self._items[i] for i in range(min(self._max_batch, len(self._items)))]
            await self._deliver_batch(batch)
            for _ in batch:
                self._items.popleft()

    async def _deliver_batch(self, batch: Sequence[CapturedTurn]) -> None:
        attempt = 0
        while True:
            attempt += 1
            try:
                await self._deliver(batch)
                if attempt > 1:
                    _logger.info("delivered %s turns after %s attempts", len(batch), attempt)
                return
            except MemorySyncError as exc:
                if not self._policy.is_retryable(exc):
                    if isinstance(exc, ValidationError) and len(batch) > 1:
                        # One refused turn must not take the others with it: the halves
                        # go on their own (same turns, same keys, so nothing doubles).
                        middle = len(batch) // 2
                        await self._deliver_batch(batch[:middle])
                        await self._deliver_batch(batch[middle:])
                        return
                    self._dropped += len(batch)
                    _logger.error(
                        "dropped %s turns: the server refused them (%s, status %s)",
                        len(batch),
                        type(exc).__name__,
                        exc.status_code,
                    )
                    return
                wait = self._policy.delay(attempt, exc)
                _logger.warning(
                    "delivery of %s turns failed (%s, status %s); attempt %s, retrying in %.2f s",
                    len(batch),
                    type(exc).__name__,
                    exc.status_code,
                    attempt,
                    wait,
                )
                await asyncio.sleep(wait)
            except Exception as exc:
                self._dropped += len(batch)
                _logger.error(
                    "dropped %s turns: delivery raised %s", len(batch), type(exc).__name__
                )
                return

    async def flush(self, timeout: float | None = None) -> int:
        """Wait until every queued turn is delivered or ``timeout`` passes; the number left."""
        self._bind()
        assert self._idle is not None
        if not self._items:
            return 0
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout)
        return len(self._items)

    async def aclose(self, timeout: float | None = 5.0) -> int:
        """Flush (up to ``timeout``), then stop the worker; the number left undelivered.

        Idempotent; later ``submit`` calls return False.
        """
        left = await self.flush(timeout)
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is not None and not worker.done():
            worker.cancel()
            # asyncio.wait never raises the worker's CancelledError, only our own.
            await asyncio.wait({worker})
        if left:
            _logger.warning("delivery queue closed with %s turns undelivered", left)
        return left
