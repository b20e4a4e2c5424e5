"""A captured turn: its text, seed and capture id, fixed once and resent on every retry."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from ._seeds import assistant_turn_seed, new_capture_id, truncate_text, user_turn_seed

Role = Literal["user", "assistant"]


def utc_now_iso() -> str:
    """The current time as ISO 8601 UTC with a ``Z`` suffix (millisecond precision)."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class CapturedTurn:
    """One utterance as captured, with everything its delivery needs to be idempotent.

    Build one with :meth:`capture`; a retry re-sends the same object, so the same
    ``idempotency_key``, ``seed`` and ``occurred_at``.

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
        normalized = truncate_text(text)
        seed_of = user_turn_seed if role == "user" else assistant_turn_seed
        return cls(
            role=role,
            text=normalized,
            scope=scope,
            seed=seed_of(scope, normalized),
            capture_id=capture_id if capture_id is not None else new_capture_id(),
            occurred_at=utc_now_iso(),
            name=name,
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
        if self.name is not None:
            item["payload"] = {"name": self.name}
        return item
