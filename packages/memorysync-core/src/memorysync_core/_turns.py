"""A captured turn: its text, seed, capture id and ``seq``, fixed once and resent on retries."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from ._seeds import assistant_turn_seed, new_capture_id, sendable_text, user_turn_seed

Role = Literal["user", "assistant"]


def utc_now_iso() -> str:
    """The current time as ISO 8601 UTC with a ``Z`` suffix (millisecond precision)."""
    return iso_from_micros(time.time_ns() // 1000)


def iso_from_micros(micros: int) -> str:
    """``micros`` (microseconds since the Unix epoch) as ISO 8601 UTC, milliseconds, ``Z``."""
    moment = datetime.fromtimestamp(micros // 1_000_000, timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{micros % 1_000_000 // 1000:03d}Z"


class _SeqClock:
    """Capture times in microseconds since the Unix epoch, strictly increasing per process.

    One clock for every memory of the process, so turns captured by different memories
    (or capabilities) of one conversation sort in the order they were captured.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> int:
        with self._lock:
            # Bumped past the previous value: two captures in one microsecond, or a
            # clock stepped back, still give increasing numbers.
            self._last = max(time.time_ns() // 1000, self._last + 1)
            return self._last

    def after_fork_in_child(self) -> None:
        # A thread of the parent may have held the lock at fork time.
        self._lock = threading.Lock()


_SEQ = _SeqClock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_SEQ.after_fork_in_child)


def next_seq() -> int:
    """The next ``seq``: the capture time in microseconds, above every earlier one."""
    return _SEQ.next()


@dataclass(frozen=True)
class CapturedTurn:
    """One utterance as captured, with everything its delivery needs to be idempotent.

    Build one with :meth:`capture`; a retry re-sends the same object, so the same
    ``idempotency_key``, ``seed``, ``seq`` and ``occurred_at``. ``seq`` is the capture
    time in microseconds since the Unix epoch, bumped so that it strictly increases
    within the process: the server lists a session's turns by it, so the transcript
    reads in the order the turns were captured, whatever order they arrive in.

    >>> turn = CapturedTurn.capture("user", " I prefer window seats. ", scope="ag2::trip")
    >>> turn.text, turn.seed.startswith("human@ag2::trip#h")
    ('I prefer window seats.', True)
    """

    role: Role
    text: str
    scope: str
    seed: str
    capture_id: str
    occurred_at: str
    name: str | None = None
    seq: int | None = None

    @classmethod
    def capture(
        cls,
        role: Role,
        text: str,
        *,
        scope: str,
        capture_id: str | None = None,
        name: str | None = None,
    ) -> CapturedTurn:
        """Capture ``text`` spoken by ``role`` in ``scope`` now.

        ``capture_id`` (e.g. the application's own turn id) defaults to a fresh one.
        """
        if role not in ("user", "assistant"):
            raise ValueError(f"role must be 'user' or 'assistant', got {role!r}")
        if not isinstance(scope, str) or not scope:
            raise ValueError(f"scope must be a non-empty string, got {scope!r}")
        if capture_id is not None and (not isinstance(capture_id, str) or not capture_id):
            raise ValueError(f"capture_id (turn_id) must be a non-empty string, got {capture_id!r}")
        if not isinstance(text, str):
            raise TypeError(f"text must be a string, got {type(text).__name__}")
        seed_of = user_turn_seed if role == "user" else assistant_turn_seed
        seq = next_seq()
        return cls(
            role=role,
            # Sent: cut at a sentence end. Seed: the contract's hard cut, like every client.
            text=sendable_text(text),
            scope=scope,
            seed=seed_of(scope, text),
            capture_id=capture_id if capture_id is not None else new_capture_id(),
            occurred_at=iso_from_micros(seq),
            name=name,
            seq=seq,
        )

    @property
    def idempotency_key(self) -> str:
        """``"<seed>:<capture_id>"``: the same on every retry, new for a genuine repeat."""
        return f"{self.seed}:{self.capture_id}"

    def history_item(self) -> dict[str, Any]:
        """The turn as one item of ``POST /v1/history/append``'s ``turns``."""
        item: dict[str, Any] = {
            "role": self.role,
            "content": self.text,
            "occurred_at": self.occurred_at,
            "idempotency_key": self.idempotency_key,
        }
        if self.seq is not None:
            item["seq"] = self.seq
        if self.name is not None:
            item["payload"] = {"name": self.name}
        return item
