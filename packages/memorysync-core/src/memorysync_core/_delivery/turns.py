"""A captured turn: its text, seed, capture id and ``seq``, fixed once and resent on retries."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from .seeds import assistant_turn_seed, new_capture_id, split_text, user_turn_seed

Role = Literal["user", "assistant"]


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

    def next(self, count: int = 1) -> int:
        """The first of ``count`` consecutive numbers, all above every earlier one."""
        with self._lock:
            # Bumped past the previous value: two captures in one microsecond, or a
            # clock stepped back, still give increasing numbers.
            first = max(time.time_ns() // 1000, self._last + 1)
            self._last = first + count - 1
            return first

    def after_fork_in_child(self) -> None:
        # A thread of the parent may have held the lock at fork time.
        self._lock = threading.Lock()


_SEQ = _SeqClock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_SEQ.after_fork_in_child)


def next_seq(count: int = 1) -> int:
    """The next ``seq``: the capture time in microseconds, above every earlier one.

    ``count`` reserves that many consecutive values (one per part of a long turn).
    """
    return _SEQ.next(count)


@dataclass(frozen=True)
class TurnPart:
    """One request's worth of a captured turn: its text, seed and ``seq``."""

    text: str
    seed: str
    seq: int | None


@dataclass(frozen=True)
class CapturedTurn:
    """One utterance as captured, with everything its delivery needs to be idempotent.

    Build one with :meth:`capture`; a retry re-sends the same object, so the same
    ``idempotency_key``, ``seed``, ``seq`` and ``occurred_at``. ``seq`` is the capture
    time in microseconds since the Unix epoch, bumped so that it strictly increases
    within the process: the server lists a session's turns by it, so the transcript
    reads in the order the turns were captured, whatever order they arrive in.

    ``text`` is the whole utterance (stripped). One longer than the contract's
    16,000-character limit is sent as several consecutive :meth:`parts`, each cut at a
    sentence end (or between words), each with its own seed (``<seed>~p<n>``) and
    ``seq`` (reserved at capture), so a retry resends every part with the same
    identity and nothing is stored twice. ``user_id`` names the user whose memory
    the turn belongs to, when it was captured through a ``UserMemory``.

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
    user_id: str | None = None

    @classmethod
    def capture(
        cls,
        role: Role,
        text: str,
        *,
        scope: str,
        capture_id: str | None = None,
        name: str | None = None,
        user_id: str | None = None,
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
        kept = text.strip()
        seq = next_seq(max(len(split_text(kept)), 1))
        return cls(
            role=role,
            text=kept,
            scope=scope,
            # The contract's seed (its hard cut, like every client); parts derive theirs.
            seed=seed_of(scope, text),
            capture_id=capture_id if capture_id is not None else new_capture_id(),
            occurred_at=iso_from_micros(seq),
            name=name,
            seq=seq,
            user_id=user_id,
        )

    def parts(self) -> list[TurnPart]:
        """What the turn sends: one part, or one per cut of a long text (see above)."""
        texts = split_text(self.text)
        if len(texts) == 1:
            return [TurnPart(texts[0], self.seed, self.seq)]
        return [
            TurnPart(
                text,
                f"{self.seed}~p{number}",
                None if self.seq is None else self.seq + number - 1,
            )
            for number, text in enumerate(texts, start=1)
        ]

    @property
    def idempotency_key(self) -> str:
        """``"<seed>:<capture_id>"``: the same on every retry, new for a genuine repeat."""
        return f"{self.seed}:{self.capture_id}"

    def history_items(self) -> list[dict[str, Any]]:
        """The turn as items of ``POST /v1/history/append``'s ``turns``, one per part."""
        items: list[dict[str, Any]] = []
        for part in self.parts():
            item: dict[str, Any] = {
                "role": self.role,
                "content": part.text,
                "occurred_at": self.occurred_at,
                "idempotency_key": f"{part.seed}:{self.capture_id}",
            }
            if part.seq is not None:
                item["seq"] = part.seq
            if self.name is not None:
                item["payload"] = {"name": self.name}
            items.append(item)
        return items
