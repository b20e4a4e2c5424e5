"""A person's turn reaches fact extraction only after the reply it prompts has recalled.

Capture and recall both run on the background loop. Without ordering, the delivery of
the message being answered could win the race and the recall would find the fact just
extracted from it. So a person's turn captured while some memory of the same user may
recall is *held*: it goes to the delivery queue when a recall for that user has started
after it and finished (or was skipped or abandoned), and at the latest after the
longest recall budget plus :data:`HOLD_MARGIN` seconds, so it is never stuck.
``flush`` and ``close`` release held turns at once. Each memory keeps its turns in
capture order: a turn captured after a held one waits behind it.

A held turn gets its *mark* (an increasing number) when it is captured, in the capturing
thread, and a recall takes the latest mark when it starts, in the recalling thread: a
recall releases exactly the turns captured before it started, wherever it runs.
:func:`hold_next`, :func:`mark`, :func:`recall_done` and :class:`Recallers` may be called
from any thread; everything else runs on the background loop's thread only.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from .._delivery.turns import CapturedTurn
from .loop import LOOP

# Seconds a held turn may wait beyond the recall budget (the reply starts a little
# after its message is captured).
HOLD_MARGIN = 1.0

UserKey = tuple[str, str | None, str | None, str]


class _Recaller(Protocol):
    def _hold_budget(self) -> float | None: ...


class Recallers:
    """Which memories may recall for a user (any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_user: dict[UserKey, weakref.WeakSet[_Recaller]] = {}

    def add(self, key: UserKey, memory: _Recaller) -> None:
        """``memory`` may recall for ``key``'s user."""
        with self._lock:
            self._by_user.setdefault(key, weakref.WeakSet()).add(memory)

    def discard(self, key: UserKey, memory: _Recaller) -> None:
        """``memory`` recalls no more (closed)."""
        with self._lock:
            members = self._by_user.get(key)
            if members is not None:
                members.discard(memory)
                if not members:
                    del self._by_user[key]

    def budget(self, key: UserKey) -> float | None:
        """The longest recall budget among ``key``'s live recallers; None when none recalls."""
        with self._lock:
            members = list(self._by_user.get(key, ()))
        budgets = [b for b in (m._hold_budget() for m in members) if b is not None]
        return max(budgets) if budgets else None


RECALLERS = Recallers()


@dataclass(eq=False)
class _Entry:
    turn: CapturedTurn
    mark: int | None  # None: not held, only queued behind a held turn
    released: bool
    timer: asyncio.TimerHandle | None = field(default=None)


class HeldTurns:
    """One memory's captured turns on their way to its delivery queue, in order."""

    def __init__(self, submit: Callable[[CapturedTurn], object]) -> None:
        self._submit = submit
        self._entries: collections.deque[_Entry] = collections.deque()

    @property
    def count(self) -> int:
        """Turns captured and not yet handed to the delivery queue."""
        return len(self._entries)

    def add(self, turn: CapturedTurn) -> None:
        """Queue ``turn`` now, or behind the held turns captured before it."""
        if self._entries:
            self._entries.append(_Entry(turn, None, released=True))
        else:
            self._submit(turn)

    def hold(self, key: UserKey, turn: CapturedTurn, timeout: float, mark: int) -> None:
        """Hold ``turn`` (its mark from :func:`hold_next`) until a recall for ``key`` that
        started after it has finished."""
        entry = _Entry(turn, mark, released=False)
        entry.timer = asyncio.get_running_loop().call_later(timeout, self._expire, entry)
        self._entries.append(entry)
        _holding.setdefault(key, weakref.WeakSet()).add(self)

    def release(self, upto: int | None = None) -> None:
        """Release the turns held at or before mark ``upto`` (None: all) and queue them."""
        for entry in self._entries:
            if not entry.released and (upto is None or (entry.mark or 0) <= upto):
                self._open(entry)
        self._drain()

    def _expire(self, entry: _Entry) -> None:
        entry.timer = None
        self._open(entry)
        self._drain()

    def _open(self, entry: _Entry) -> None:
        entry.released = True
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None

    def _drain(self) -> None:
        while self._entries and self._entries[0].released:
            self._submit(self._entries.popleft().turn)


_marks = 0
_marks_lock = threading.Lock()
# Per user: the mark of the latest held turn no release has covered yet. A recall that
# finds nothing here has nothing to release and does not wake the background loop.
_uncovered: dict[UserKey, int] = {}
_holding: dict[UserKey, weakref.WeakSet[HeldTurns]] = {}


def hold_next(key: UserKey, schedule: Callable[[int], object]) -> None:
    """Give a person's turn of ``key``'s user the next mark and ``schedule(mark)`` its hold.

    Both happen under one lock, so turns reach the loop in the order of their marks,
    whichever threads capture them (any thread).
    """
    global _marks
    with _marks_lock:
        _marks += 1
        _uncovered[key] = _marks
        schedule(_marks)


def mark() -> int:
    """The latest mark so far: a recall starting now releases up to this mark (any thread)."""
    return _marks


def recall_done(key: UserKey, upto: int) -> None:
    """A recall for ``key``'s user that started at mark ``upto`` finished, was skipped or
    was abandoned: release, on the loop, what was held before it started (any thread)."""
    with _marks_lock:
        latest = _uncovered.get(key)
        if latest is None:
            return
        if latest <= upto:
            del _uncovered[key]
        LOOP.call_soon(lambda: release(key, upto))


def release(key: UserKey, upto: int | None) -> None:
    """Release what ``key``'s user has held at or before mark ``upto`` (None: everything)."""
    limit = _marks if upto is None else upto
    holders = _holding.get(key)
    if holders is None:
        return
    for held in list(holders):
        held.release(limit)
        if not held.count:
            holders.discard(held)
    if not holders:
        del _holding[key]


def _after_fork() -> None:
    global _marks_lock
    # The parent's held turns belong to a loop that does not exist in the child, and its
    # lock may have been held by a thread the child does not have.
    _holding.clear()
    _uncovered.clear()
    _marks_lock = threading.Lock()


LOOP.on_fork(_after_fork)
