"""``SyncUserMemory``: one user's memory for frameworks that call from synchronous code."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .. import _telemetry as telemetry
from .._adapter.kit import AdapterKit
from .._adapter.settings import AdapterSettings, ClearScope, check_clear_scope
from .._delivery.queue import DeliveryReport
from .._delivery.turns import CapturedTurn, Role
from .._recall.budget import RecallResult
from .._recall.render import RecalledMemory
from .._recall.window import Moment, TimeWindow
from .._user_memory import ClearResult, SaveOutcome, UserMemory
from .._users_data.reports import USERS_DATA_METHODS
from .._wire.transport import REQUESTS_MADE
from . import holds as _holds
from .holds import HOLD_MARGIN, RECALLERS, HeldTurns, UserKey
from .loop import CALLER_LOOPS, LOOP, track

_logger = logging.getLogger("memorysync.sync")
_recall_logger = logging.getLogger("memorysync.recall")

T = TypeVar("T")

# The loop-side recall outlives the caller's deadline by this much at most: a late
# recall is cancelled just after the deadline, this only frees it if that never happens.
_LOOP_GUARD = 0.5
# Seconds between a caller returning at its deadline and the cancellation of its late
# recall on the loop thread (see _after_recall).
_CLEANUP_DELAY = 0.02
_HALF_TICK = 0.0005


@dataclass
class _LoopState:
    """What lives on one generation of the background loop (re-created after fork)."""

    generation: int
    kit: AdapterKit  # the queue (and outbox) every adapter's capture goes through
    held: HeldTurns
    warming: asyncio.Task[None] | None = None

    @property
    def memory(self) -> UserMemory:
        """The user's memory in the settings' session."""
        return self.kit.home

    async def flush(self, timeout: float) -> None:
        """Release the held turns and wait up to ``timeout`` seconds for the queue."""
        self.held.release()  # flushing means delivering now
        await self.kit.flush(timeout)

    async def aclose(self, timeout: float) -> None:
        """Flush for up to ``timeout`` seconds, stop the queue, release the connection."""
        await self.flush(timeout)
        warming = self.warming
        if warming is not None and not warming.done():
            # Closing the client under an in-flight warm-up would strand its socket: let it
            # finish (it never raises), within the same bound as the flush.
            await asyncio.wait({warming}, timeout=max(timeout, 0.1))
            warming.cancel()
        await self.kit.aclose(0.0)  # flushed above; what is left stays in the outbox


class _Slot:
    """Holds a memory's loop state and its kit of this process generation (its
    ``home`` memory also serves recalls on the callers' own loops), so that a finalizer
    can reach them without the memory."""

    def __init__(self, kit: AdapterKit) -> None:
        self.state: _LoopState | None = None
        self.home = (LOOP.generation, kit)

    async def aclose(self, timeout: float) -> None:
        """Close the state of this generation, or only the kit when it has none."""
        state = self.state
        generation, kit = self.home
        if state is not None and state.generation == LOOP.generation:
            await state.aclose(timeout)
        elif generation == LOOP.generation:
            await kit.aclose(0.0)  # recalls on callers' loops only: their clients


# A parent's kits in a forked child: their outbox connection is the parent's, never to be
# used or closed here; kept so that collecting them closes nothing.
_INHERITED: list[AdapterKit] = []


def _abandon(slot: _Slot) -> None:
    """A memory was collected without ``close()``: release its state on the loop."""
    if LOOP.running:
        LOOP.submit(slot.aclose(1.0)).add_done_callback(_consume)


class SyncUserMemory:
    """One user's memory in one session, for code that cannot ``await``.

    Everything runs on one background event loop per process, so the calls below are
    plain functions, safe from any thread (and from inside another event loop):

    - :meth:`capture` records an utterance and returns at once; delivery is batched,
      retried and in order. Every turn carries ``seq``, its capture time, so the
      transcript reads in the order of capture across memories, retries and processes;
    - a person's turn (``"user"``) is *held* while a memory of the same user may
      recall, until a recall that started after it has finished (at most
      ``recall_timeout`` + 1 s): the reply to a message never recalls facts extracted
      from that message;
    - :meth:`recall` (or :meth:`arecall` inside a caller's event loop) returns within
      ``recall_timeout`` seconds, one deadline from the call to the return, and never
      raises. A caller thread without an event loop of its own recalls on a private loop
      of that thread (no hand-over to the background loop, see ``CallerLoops``), unless
      the settings give a ``transport``;
    - :meth:`search`, :meth:`save` and :meth:`clear` block and raise typed errors;
    - :meth:`flush` and :meth:`close` return a :class:`DeliveryReport`.

    Captured turns go through the core's :class:`~memorysync_core.adapters.AdapterKit`
    like every adapter's: with an ``outbox`` (the setting or ``MEMORYSYNC_OUTBOX``) each
    one is written to that file when it is captured, in the capturing thread, and the
    turns an earlier process left there are delivered first, from the first use of the
    background loop (``warm_up``, a capture, ``flush`` or ``close``).

    After ``os.fork`` the child gets its own loop, connection and outbox handle; at
    interpreter exit the live memories are flushed for a bounded time.

    Args:
        settings: The validated settings (``AdapterSettings.build``).
        recalls: Says whether this memory may recall right now (e.g. an agent with a
            model is attached); person turns are held only while some memory of the
            same user may. Default: always.

    Example:
        ```python
        settings = AdapterSettings.build(surface="myframework", user_id="alice")
        memory = SyncUserMemory(settings)
        memory.capture("user", "I live in Lisbon.")
        block = memory.recall("Where should I eat tonight?").block
        memory.capture("assistant", "Try the bacalhau place near you.")
        report = memory.close()
        assert report.all_delivered
        ```
    """

    def __init__(
        self, settings: AdapterSettings, *, recalls: Callable[[], bool] | None = None
    ) -> None:
        if not isinstance(settings, AdapterSettings):
            raise TypeError(f"settings must be AdapterSettings, got {type(settings).__name__}")
        # Validates user, session, top_k, recall_timeout, the key and the outbox.
        kit = AdapterKit(settings, exit_flush=False)  # flushed at exit by this memory
        first = kit.home
        self._settings = settings
        self._scope = first.scope
        self._key: UserKey = (
            first.api.base_url,
            first.api.project_id,
            settings.tenant_id,
            settings.user_id,
        )
        self._recalls = recalls
        self._slot = _Slot(kit)  # its state is touched on the background loop only
        finalizer = weakref.finalize(self, _abandon, self._slot)
        # The exit handler flushes live memories instead (``atexit`` is a documented,
        # writable attribute that typeshed lists as read-only).
        finalizer.atexit = False  # type: ignore[misc]
        self._closed = False
        self._close_lock = threading.Lock()
        self._final: DeliveryReport | None = None
        # Turns captured in this process generation (a forked child starts at 0): every
        # one is delivered, refused or pending, including those still on their way to
        # the loop, which the queue cannot see yet.
        self._captured = (LOOP.generation, 0)
        RECALLERS.add(self._key, self)
        track(self)

    # ------------------------------------------------------------------ attributes

    @property
    def settings(self) -> AdapterSettings:
        """The settings this memory was built from."""
        return self._settings

    @property
    def scope(self) -> str:
        """The transcript scope, ``"<surface>::<session_id>"``."""
        return self._scope

    @property
    def destination(self) -> tuple[str, str | None, str | None, str, str]:
        """(base URL, project, tenant, user, scope): equal for memories writing one transcript."""
        return (*self._key, self._scope)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def __repr__(self) -> str:
        return f"SyncUserMemory(user_id={self._settings.user_id!r}, scope={self._scope!r})"

    def _hold_budget(self) -> float | None:
        if self._closed or (self._recalls is not None and not self._recalls()):
            return None
        return self._settings.recall_timeout

    # ------------------------------------------------------------------ capture

    def capture(self, role: Role, text: str, *, name: str | None = None) -> CapturedTurn | None:
        """Capture ``text`` said by ``role`` now; delivered in the background, never waits.

        Returns the captured turn, or None when the text is empty. ``name`` (the
        speaker's name) is stored in the turn's payload. Raises ValueError for a role
        other than ``"user"`` / ``"assistant"``, RuntimeError once closed.
        """
        if self._closed:
            raise RuntimeError("this memory is closed")
        turn = CapturedTurn.capture(
            role, text, scope=self._scope, name=name, user_id=self._settings.user_id
        )
        if not turn.text:
            return None
        with self._close_lock:
            generation, count = self._captured
            current = LOOP.generation
            self._captured = (current, count + 1 if generation == current else 1)
        self._kit().keep(turn)  # in the outbox before this returns (none: nothing)
        # A person's words feed fact extraction: held until the reply they prompt has
        # recalled (see _holds), so that recall never finds them.
        budget = RECALLERS.budget(self._key) if role == "user" else None
        if budget is None:
            LOOP.call_soon(lambda: self._state().held.add(turn))
        else:
            key, timeout = self._key, budget + HOLD_MARGIN
            _holds.hold_next(
                key,
                lambda mark: LOOP.call_soon(
                    lambda: self._state().held.hold(key, turn, timeout, mark)
                ),
            )
        return turn

    # ------------------------------------------------------------------ recall

    def _wants_recall(self, prompt: object) -> bool:
        return not self._closed and self._settings.wants_recall(prompt)

    def recall(self, prompt: str | None) -> RecallResult:
        """The block for ``prompt`` within ``recall_timeout`` seconds; EMPTY on any failure.

        A prompt that is None, blank or shorter than ``min_prompt_chars`` recalls
        nothing. Either way the person's turns held for this reply are released. From
        the background loop's own thread it returns EMPTY at once (it cannot block).
        """
        deadline = time.monotonic() + self._settings.recall_timeout
        mark = _holds.mark()  # the turns captured before this reply was asked for
        future: concurrent.futures.Future[RecallResult] | None = None
        try:
            if not self._wants_recall(prompt) or LOOP.in_loop_thread():
                return RecallResult.EMPTY
            assert prompt is not None
            own = self._own_loop()
            if own is not None:
                return self._recall_here(own, prompt, deadline)
            context = telemetry.capture_context()
            future = LOOP.submit(self._recall(prompt, deadline, context))
            try:
                return future.result(timeout=max(deadline - time.monotonic(), 0.0))
            except concurrent.futures.TimeoutError:
                return RecallResult.EMPTY
        except Exception as exc:  # never raises (a private loop that failed, say)
            _recall_logger.warning("recall failed: %s", type(exc).__name__)
            return RecallResult.EMPTY
        finally:
            self._after_recall(mark, future)

    def _own_loop(self) -> asyncio.AbstractEventLoop | None:
        """This thread's private loop, when a recall may run on it (see ``CallerLoops``).

        Not with a given transport (the embedded server, a test's): it may hold
        connections, which belong to the loop that opened them (the background one).
        """
        # The first request of a process imports httpx's async backend (a fifth of a
        # second on a busy machine), which no caller's loop could interrupt: until one
        # has ended, recalls wait on the background loop, where the caller keeps its
        # deadline to the millisecond whatever that loop is doing.
        if self._settings.transport is not None or not REQUESTS_MADE.is_set():
            return None
        return CALLER_LOOPS.here()

    def _recall_here(
        self, loop: asyncio.AbstractEventLoop, prompt: str, deadline: float
    ) -> RecallResult:
        """Recall on this thread's own loop, left at the deadline without waiting for it.

        A late recall is cancelled, and its cancellation (closing its connection, say)
        runs on the loop's next turn: returning at the deadline costs no clean-up.
        """
        # The loop runs until the recall is done or the deadline comes, whichever first
        # (no waiting task of its own: the hot path is one recall's loop turns). The
        # recall's own deadline is a backstop only.
        guard = max(deadline - time.monotonic(), 0.0) + _LOOP_GUARD
        task = loop.create_task(self._memory().recall(prompt, timeout=guard))
        this_run = [True]

        def done(_: object) -> None:
            if this_run[0]:  # not a later run of the loop, if it completes after this one
                loop.stop()

        task.add_done_callback(done)
        # The selector counts whole milliseconds and rounds a wait up: asking for half a
        # millisecond less centres the wake-up on the deadline instead of after it.
        timer = loop.call_later(max(deadline - time.monotonic() - _HALF_TICK, 0.0), loop.stop)
        try:
            loop.run_forever()
        finally:
            this_run[0] = False
            timer.cancel()
        if task.done():
            return task.result()
        task.cancel()
        self._over_budget()
        return RecallResult.EMPTY

    async def arecall(self, prompt: str | None) -> RecallResult:
        """:meth:`recall` for a caller inside its own event loop, which keeps running."""
        deadline = time.monotonic() + self._settings.recall_timeout
        mark = _holds.mark()
        future: concurrent.futures.Future[RecallResult] | None = None
        try:
            if not self._wants_recall(prompt):
                return RecallResult.EMPTY
            assert prompt is not None
            context = telemetry.capture_context()
            future = LOOP.submit(self._recall(prompt, deadline, context))
            waiting = asyncio.wrap_future(future)
            await asyncio.wait({waiting}, timeout=max(deadline - time.monotonic(), 0.0))
            if waiting.done():
                return waiting.result()
            # Unhooked from the caller's loop now (that loop may end before the recall);
            # this cancels the recall on the background loop too.
            waiting.cancel()
            self._over_budget()
            return RecallResult.EMPTY
        finally:
            self._after_recall(mark, future)

    def _after_recall(
        self, mark: int, future: concurrent.futures.Future[RecallResult] | None
    ) -> None:
        """The recall finished, was skipped or ran out of time: let held turns go.

        A recall late on the background loop is logged here and cancelled a moment after
        its caller returned, so that the loop thread does not take the interpreter lock
        from a caller that is returning at its deadline.
        """
        key = self._key
        if future is None or future.done():
            _holds.recall_done(key, mark)  # wakes the loop only when turns are held
            return
        self._over_budget()

        def cleanup() -> None:
            future.cancel()
            _holds.recall_done(key, mark)

        LOOP.call_soon(lambda: asyncio.get_running_loop().call_later(_CLEANUP_DELAY, cleanup))

    async def _recall(self, prompt: str, deadline: float, context: object | None) -> RecallResult:
        # The caller enforces the deadline (and cancels this at it); the loop side only
        # must not outlive it if the caller is gone.
        timeout = max(deadline - time.monotonic(), 0.0) + _LOOP_GUARD
        # The caller's trace context does not cross threads by itself: the recall span
        # nests under the caller's span (an application's span around an AG2 chat).
        with telemetry.attached(context):
            return await self._state().memory.recall(prompt, timeout=timeout)

    def _over_budget(self) -> None:
        _recall_logger.warning(
            "recall did not finish within %.2f s; replying without memories this turn",
            self._settings.recall_timeout,
        )

    # ------------------------------------------------------------------ explicit calls

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        min_score: float | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
    ) -> list[RecalledMemory]:
        """Search the user's memories (``since`` / ``until``: said in that window);
        raises the core's typed errors on failure."""
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query must be a non-empty string, got {query!r:.40}")
        TimeWindow.of(since, until)  # a bad window is the caller's error, raised here
        return self._call(
            lambda state: state.memory.search(
                query, k=k, min_score=min_score, since=since, until=until
            )
        )

    def save(
        self, text: str, *, metadata: Mapping[str, Any] | None = None, verbatim: bool = False
    ) -> SaveOutcome:
        """Offer ``text`` as a fact; the server decides whether it is kept. Raises on failure.

        ``verbatim=True``: stored as one memory exactly as given (``UserMemory.save``).
        """
        return self._call(
            lambda state: state.memory.save(text, metadata=metadata, verbatim=verbatim)
        )

    def clear(self, scope: ClearScope | None = None) -> ClearResult:
        """Delete this session's memories and transcript (``"user"``: all the user's).

        Defaults to the settings' ``clear_scope``. Captured turns are flushed first so
        they cannot land after the deletion. Raises on failure.
        """
        chosen = (
            self._settings.clear_scope if scope is None else check_clear_scope(scope, name="scope")
        )
        self.flush()
        return self._call(lambda state: state.memory.clear(chosen))

    def users_data(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Run one of ``UserMemory``'s users'-data methods (``list_memories``,
        ``list_sessions``, ``export``, ``forget_user``, ``import_export``) and wait for it.

        Captured turns are flushed first, so an export sees them and an erase leaves
        none behind. Raises what the method raises.
        """
        if method not in USERS_DATA_METHODS:
            raise ValueError(f"method must be one of {USERS_DATA_METHODS}, got {method!r}")
        self.flush()
        return self._call(lambda state: getattr(state.memory, method)(*args, **kwargs))

    def warm_up(self) -> None:
        """Resolve the tenant and open the connection in the background; never raises."""

        async def warm() -> None:
            state = self._state()
            state.warming = asyncio.current_task()
            await state.memory.api.warm_up()

        if not self._closed:
            LOOP.submit(warm()).add_done_callback(_consume)
            # Attaching is a good moment to close the loops of threads that ended.
            CALLER_LOOPS.settle(patience=0.1)

    # ------------------------------------------------------------------ delivery

    def report(self) -> DeliveryReport:
        """What became of the captured turns so far, without waiting."""
        if self._final is not None:
            return self._final
        generation, captured = self._captured
        state = self._slot.state
        if generation != LOOP.generation:
            return DeliveryReport()
        if state is None or state.generation != generation:
            return DeliveryReport(pending=captured)
        done = state.kit.report()
        settled = done.delivered + done.refused
        # Turns an earlier process left in the outbox count once this one queued them.
        pending = captured + state.kit.taken_over - settled
        return DeliveryReport(done.delivered, done.refused, pending, done.reasons)

    def flush(self, timeout: float = 10.0) -> DeliveryReport:
        """Deliver held turns now and wait up to ``timeout`` seconds for the queue.

        Returns what happened to every turn captured so far: delivered, refused (with
        the reasons; never counted as delivered) and still pending.
        """
        _check_timeout(timeout)
        if LOOP.in_loop_thread():
            raise RuntimeError("flush() cannot be called from the MemorySync background loop")
        if self._final is not None or not (LOOP.running or self._has_outbox()):
            return self.report()
        # With an outbox the loop starts here if nothing started it yet (a capability
        # not attached to an agent): an earlier process's turns are delivered now.
        future = LOOP.submit(self._flush(float(timeout)))
        try:
            return future.result(timeout=timeout + 1.0)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return self.report()

    async def _flush(self, timeout: float) -> DeliveryReport:
        await self._state().flush(timeout)  # takes over what an outbox holds, if any
        return self.report()

    def close(self, timeout: float | None = None) -> DeliveryReport:
        """Flush for up to ``timeout`` seconds, then release the queue and the connection.

        ``timeout=None``: ``MEMORYSYNC_CLOSE_TIMEOUT`` (5 s when unset). Idempotent (a
        second call returns the same report). Afterwards :meth:`capture` and the
        explicit calls raise RuntimeError and :meth:`recall` returns EMPTY.
        """
        if timeout is None:
            timeout = self._kit().close_timeout
        _check_timeout(timeout)
        with self._close_lock:
            if self._closed:
                return self.report()
            self._closed = True
        RECALLERS.discard(self._key, self)
        if LOOP.in_loop_thread() or not (LOOP.running or self._has_outbox()):
            self._final = self.report()
            return self._final
        future = LOOP.submit(self._aclose(float(timeout)))
        try:
            report = future.result(timeout=timeout + 2.0)
        except concurrent.futures.TimeoutError:
            future.cancel()
            report = self.report()
        CALLER_LOOPS.settle()  # this thread's client on its own loop closes there
        self._final = report
        if report.pending:
            _logger.warning("closed with %s captured turns undelivered", report.pending)
        return report

    async def _aclose(self, timeout: float) -> DeliveryReport:
        if self._kit().outbox is not None:
            self._state()  # closing flushes: what an earlier process left, too
        await self._slot.aclose(timeout)
        report = self.report()
        self._slot.state = None
        return report

    def _has_outbox(self) -> bool:
        """True when this memory keeps its turns in an outbox (an earlier process's too)."""
        return self._kit().outbox is not None

    def _flush_at_exit(self, timeout: float) -> int:
        # Bounded by ``timeout`` itself (no grace period): the exit handler shares one
        # deadline among every live memory.
        if self._closed or LOOP.in_loop_thread() or not LOOP.running:
            return 0
        if timeout <= 0:
            return self.report().pending
        future = LOOP.submit(self._flush(timeout))
        try:
            return future.result(timeout=timeout).pending
        except concurrent.futures.TimeoutError:
            future.cancel()
            return self.report().pending

    # ------------------------------------------------------------------ plumbing

    def _kit(self) -> AdapterKit:
        """The kit of this process generation (any thread)."""
        generation, kit = self._slot.home
        if generation == LOOP.generation:
            return kit
        with self._close_lock:
            if self._slot.home[0] != LOOP.generation:  # after a fork: the child's own
                _INHERITED.append(self._slot.home[1])
                self._slot.home = (LOOP.generation, AdapterKit(self._settings, exit_flush=False))
            return self._slot.home[1]

    def _memory(self) -> UserMemory:
        """The memory of this process generation (any thread)."""
        return self._kit().home

    def _state(self) -> _LoopState:
        """This memory's state on the current loop generation (loop thread only)."""
        state = self._slot.state
        generation = LOOP.generation
        if state is not None and state.generation == generation:
            return state
        kit = self._kit()
        # Kept in the outbox when captured: the held turns are submitted as kept.
        held = HeldTurns(lambda turn: kit.submit([turn], kept=True))
        state = _LoopState(generation, kit, held)
        self._slot.state = state
        kit.resume()  # an earlier process's turns go before this one's
        track(self)
        return state

    def _call(self, call: Callable[[_LoopState], Awaitable[T]]) -> T:
        if self._closed:
            raise RuntimeError("this memory is closed")
        if LOOP.in_loop_thread():
            raise RuntimeError("explicit calls cannot run on the MemorySync background loop")

        context = telemetry.capture_context()

        async def run() -> T:
            with telemetry.attached(context):
                return await call(self._state())

        return LOOP.submit(run()).result()


def _check_timeout(timeout: object) -> None:
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not math.isfinite(timeout)
        or timeout < 0
    ):
        raise ValueError(f"timeout must be a finite number of seconds >= 0, got {timeout!r}")


def _consume(future: concurrent.futures.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        _logger.debug("background task failed: %s", type(future.exception()).__name__)
