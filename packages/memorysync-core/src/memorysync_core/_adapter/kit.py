"""``AdapterKit``: what every async adapter instance holds, built once here.

An adapter instance has settings, a home memory (the configured user and session),
memories of other sessions and users over the same connection, and queued capture:
the turns a hook captured are delivered in the background, in order, each batch
grouped by user and session, and whatever is still queued when the interpreter exits
is delivered by the core's exit handler within one shared deadline. AutoGen, ag2 1.x
and Agent Framework all use this one kit; so does the classic AG2 capability, whose
hooks cannot await, through :class:`~memorysync_core.SyncUserMemory` (which runs the
kit on its background loop).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from .._delivery import outbox as _outbox
from .._delivery.outbox import Outbox, OutboxDamaged, keys_of
from .._delivery.queue import DeliveryQueue, DeliveryReport
from .._delivery.turns import CapturedTurn
from .._errors import AuthError, MemorySyncError, ValidationError
from .._sync.loop import track, untrack
from .._user_memory import UserMemory
from .._wire.config import resolve_close_timeout, resolve_outbox
from .._wire.retry import RetryPolicy
from .settings import AdapterSettings

_logger = logging.getLogger("memorysync.delivery")
_T = TypeVar("_T")


class AdapterAttributes:
    """``settings`` and ``user_id``, as every adapter shows them, read from the
    :class:`~memorysync_core.AdapterSettings` the adapter holds as ``self._settings``."""

    _settings: AdapterSettings

    @property
    def settings(self) -> AdapterSettings:
        """Every setting, validated (``memorysync_core.AdapterSettings``; no key in repr)."""
        return self._settings

    @property
    def user_id(self) -> str:
        """The end user the memories belong to."""
        return self._settings.user_id


class AdapterKit:
    """One adapter instance's memories and queued capture.

    ``memory_for`` gives the core :class:`UserMemory` of any session and user over the
    one connection; ``submit`` queues captured turns and never raises; ``report``,
    ``flush`` and ``aclose`` say what became of them. With ``transcript=False`` in
    the settings only the user's turns are sent, to fact extraction. With an
    ``outbox`` (the setting or ``MEMORYSYNC_OUTBOX``) every queued turn is also kept in
    that SQLite file until the server has it, and the turns an earlier process left
    there are delivered first (see :mod:`memorysync_core._delivery.outbox`).

    Example:
        ```python
        kit = AdapterKit(AdapterSettings.build(surface="myframework", user_id="alice"))
        memory = kit.memory_for("chat-1")
        kit.submit([memory.capture("user", "I live in Lisbon.")])
        report = await kit.aclose()
        ```
    """

    def __init__(self, settings: AdapterSettings, *, exit_flush: bool = True) -> None:
        """``exit_flush=False``: the owner flushes the kit at exit itself (the synchronous
        face, whose queue lives on its background loop, not on the exiting thread)."""
        if not isinstance(settings, AdapterSettings):
            raise TypeError(f"settings must be an AdapterSettings, got {type(settings).__name__}")
        self.settings = settings
        self.home = settings.open()  # validates the user, the session and the key
        self._prefix = settings.surface + "::"
        self._queue: DeliveryQueue | None = None
        self._policy = RetryPolicy()
        self._exit_flush = exit_flush
        # What a close without a timeout waits for the server at most: a server that is
        # down must not hold the application's shutdown for long.
        self.close_timeout = resolve_close_timeout()
        self.outbox = _open_outbox(settings, self.home)
        self._outbox_warned: set[str] = set()  # one WARNING per kind of outbox failure
        self.taken_over = 0  # turns an earlier process left in the outbox, queued here
        self._closed = DeliveryReport()  # what queues closed earlier ended with

    def memory_for(self, session_id: str | None = None, user_id: str | None = None) -> UserMemory:
        """The memory of ``user_id`` in ``session_id`` (None: the settings' ones)."""
        home = self.home
        session = home.session_id if session_id is None else session_id
        user = home.user_id if user_id is None else user_id
        if session == home.session_id and user == home.user_id:
            return home
        return UserMemory(
            home.api,
            user_id=user,
            session_id=session,
            surface=home.surface,
            top_k=home.top_k,
            recall_timeout=home.recall_timeout,
            renderer=home.renderer,
        )

    # ------------------------------------------------------------------ capture

    def submit(self, turns: Iterable[CapturedTurn], *, kept: bool = False) -> int:
        """Queue ``turns`` for background delivery; how many were queued. Never raises.

        Must be called on a running event loop; anything else (no loop, a full queue)
        is logged at WARNING and shows in :meth:`report` when the queue saw it.
        ``kept=True``: the turns are already in the outbox (see :meth:`keep`).
        """
        queued = 0
        try:
            queue = self._ensure_queue()
            for turn in turns:
                if turn.text:
                    if not kept:
                        self.keep(turn)
                    queued += queue.submit(turn)
        except Exception as exc:  # the hot path: log, never raise into the turn
            _logger.warning("capture skipped (%s: %s)", type(exc).__name__, exc)
        return queued

    def resume(self) -> None:
        """Start delivering: first what an earlier process left in the outbox, if any.

        Called by the first :meth:`submit` or :meth:`flush`; an owner may call it
        earlier (on a running event loop) so that an earlier process's turns go out
        before anything is captured.
        """
        self._ensure_queue()

    def _ensure_queue(self) -> DeliveryQueue:
        queue = self._queue
        if queue is None:
            queue = self._queue = DeliveryQueue(self._deliver, policy=self._policy)
            if self._exit_flush:
                track(self)  # again after an aclose(): the kit stays usable
            # What an earlier process left (or this one released) goes first.
            for turn in self._on_outbox("read", lambda outbox: outbox.take_over()) or ():
                self.taken_over += queue.submit(turn)
        return queue

    def _on_outbox(self, what: str, action: Callable[[Outbox], _T]) -> _T | None:
        """``action`` on the outbox; None (and a WARNING once per kind) when it fails.

        The outbox is a safety net: its failure never costs a turn the network can
        deliver, never raises, and is said once. A damaged file it moved aside and
        replaced gets the turns this kit still holds in memory.
        """
        outbox = self.outbox
        if outbox is None:
            return None
        aside = len(outbox.set_aside)
        try:
            result: _T | None = action(outbox)
        except OutboxDamaged as exc:
            self.outbox = None
            _logger.warning("%s: captured turns are kept in memory only from now on", exc)
            return None
        except (sqlite3.Error, OSError) as exc:
            kind = f"{what}:{type(exc).__name__}"
            level = logging.DEBUG if kind in self._outbox_warned else logging.WARNING
            self._outbox_warned.add(kind)
            _logger.log(
                level,
                "outbox %s failed (%s: %s): the turns are kept in memory meanwhile "
                "(further failures of this kind are logged at DEBUG)",
                what,
                type(exc).__name__,
                exc,
            )
            result = None
        if len(outbox.set_aside) > aside and self._queue is not None:
            held = self._queue.queued()
            self._on_outbox("write", lambda box: [box.keep(turn) for turn in held])
        return result

    def keep(self, turn: CapturedTurn) -> None:
        """Write ``turn`` to the outbox now (any thread; nothing without an outbox).

        :meth:`submit` does it; an owner that queues a turn later (the synchronous
        face holds a person's turn for a moment) keeps it when it is captured, then
        submits it with ``kept=True``. Never raises: a failed write is a WARNING.
        """
        kept = self._on_outbox("write", lambda box: box.keep(turn))
        outbox = self.outbox
        if kept is False and outbox is not None:
            _logger.warning(
                "outbox %s is full (%s turns): a new %s turn is kept in memory only "
                "(%s so far); it is lost if the process ends before delivering it",
                outbox.path,
                _outbox.MAX_OUTBOX_TURNS,  # read through its module: one setting, one patch
                turn.role,
                outbox.overflowed,
            )

    async def _deliver(self, batch: Sequence[CapturedTurn]) -> None:
        # A batch may span users and sessions: each goes to its own transcript.
        def key(turn: CapturedTurn) -> tuple[str | None, str]:
            return turn.user_id, turn.scope

        self._on_outbox("lease", lambda box: box.renew())  # nobody else takes these rows
        for (user_id, scope), group in itertools.groupby(batch, key=key):
            memory = self.memory_for(scope.removeprefix(self._prefix), user_id)
            turns = list(group)
            try:
                if self.settings.transcript:
                    await memory.record_turns(turns, extract=True)
                else:
                    await memory.extract_turns(turns)
            except MemorySyncError as exc:
                if self._refused_for_good(exc, len(batch)):
                    self._forget(turns)
                raise
            self._forget(turns)

    def _refused_for_good(self, exc: MemorySyncError, size: int) -> bool:
        # A wrong key stays in the outbox: a later start with the right key delivers it.
        # A refused batch of several is split and retried by the queue.
        if self._policy.is_retryable(exc) or isinstance(exc, AuthError):
            return False
        return not (isinstance(exc, ValidationError) and size > 1)

    def _forget(self, turns: Sequence[CapturedTurn]) -> None:
        self._on_outbox("delete", lambda box: box.done(keys_of(turns)))

    # ------------------------------------------------------------------ outcome

    @property
    def pending(self) -> int:
        """Captured turns not yet delivered (or refused)."""
        return 0 if self._queue is None else self._queue.pending

    def report(self) -> DeliveryReport:
        """Delivered, refused (with the reasons) and pending turns since the kit was made."""
        if self._queue is None:
            return self._closed
        return _sum(self._closed, self._queue.report())

    async def flush(self, timeout: float | None = 10.0) -> DeliveryReport:
        """Wait until every queued turn is delivered or refused (or ``timeout`` passes).

        With an outbox, the turns an earlier process left in it are queued first.
        """
        if self._queue is not None or self.outbox is not None:
            await self._ensure_queue().flush(timeout)
        return self.report()

    async def aclose(self, timeout: float | None = None) -> DeliveryReport:
        """Deliver what is queued (up to ``timeout``), release the connection.

        ``timeout=None``: ``MEMORYSYNC_CLOSE_TIMEOUT`` seconds (5 when unset), read when
        the kit was made; what is still queued then is ``pending`` in the report (and
        stays in the outbox, if there is one).

        Returns the report of the turns submitted since the previous ``aclose`` (an
        empty one when there were none); :meth:`report` keeps counting every turn.
        Idempotent; the kit stays usable (a later ``submit`` starts a new queue).
        """
        queue, self._queue = self._queue, None
        report = DeliveryReport()
        if queue is not None:
            report = await queue.aclose(self.close_timeout if timeout is None else timeout)
            self._closed = _sum(self._closed, report)
        self._on_outbox("release", lambda box: box.release())  # the next start delivers it
        untrack(self)
        await self.home.aclose()
        return report

    def _flush_at_exit(self, timeout: float) -> int:
        # The application's loop has ended: deliver on a fresh one, within the deadline.
        queue = self._queue
        if queue is None or not queue.pending:
            return 0
        try:
            # aclose() is bounded itself; the margin covers releasing the connection.
            asyncio.run(asyncio.wait_for(self.aclose(timeout), timeout + 1.0))
        except Exception as exc:  # exit goes on whatever happens
            _logger.warning("flush at exit failed: %s", type(exc).__name__)
        return queue.pending


def _sum(first: DeliveryReport, second: DeliveryReport) -> DeliveryReport:
    """Two queues' reports as one."""
    return DeliveryReport(
        delivered=first.delivered + second.delivered,
        refused=first.refused + second.refused,
        pending=first.pending + second.pending,
        reasons=tuple(dict.fromkeys(first.reasons + second.reasons)),
    )


def _open_outbox(settings: AdapterSettings, home: UserMemory) -> Outbox | None:
    """The outbox of ``settings`` (or ``MEMORYSYNC_OUTBOX``), None when there is none."""
    path = resolve_outbox(settings.outbox)
    if path is None:
        return None
    api = home.api
    destination = "|".join(
        (api.base_url, api.project_id or "", settings.tenant_id or "", settings.surface)
    )
    try:
        return Outbox(path, destination=destination)
    except OutboxDamaged as exc:
        _logger.warning("%s: captured turns are kept in memory only", exc)
        return None
    except (OSError, sqlite3.Error) as exc:
        raise ValueError(f"outbox {path!r} cannot be opened as a SQLite file: {exc}") from exc
