"""A recall's time window (``since`` / ``until``): checked, sent, and applied again here.

The window is a memorysync-local extension of recall and query (docs/wire-protocol.md,
"Memory that stays true"): the fields are sent only when set. The answer is filtered
again on each memory's ``said_at`` (else ``created_at``), so a server that ignores
the fields still gives an answer inside the window, as far as it tells the times.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .render import RecalledMemory

Moment = _dt.datetime | str


def _instant(name: str, value: Moment) -> _dt.datetime:
    if isinstance(value, _dt.datetime):
        moment = value
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            moment = _dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{name} must be an ISO 8601 date-time, got {value!r:.60}") from None
    else:
        raise ValueError(
            f"{name} must be a datetime or an ISO 8601 string, got {type(value).__name__}"
        )
    if moment.tzinfo is None:
        raise ValueError(
            f"{name} must carry a time zone (e.g. 2026-03-14T00:00:00Z), got {value!s:.60}"
        )
    return moment.astimezone(_dt.timezone.utc)


def iso_moment(name: str, value: Moment) -> str:
    """``value`` as the wire's ISO 8601 text: a datetime (with a time zone) in UTC with
    ``Z``; a string as given (the server checks it). ValueError names ``name``."""
    if isinstance(value, str):
        return value
    if not isinstance(value, _dt.datetime):
        raise ValueError(
            f"{name} must be a datetime or an ISO 8601 string, got {type(value).__name__}"
        )
    return _instant(name, value).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class TimeWindow:
    """Memories said at or after ``since`` and before ``until`` (either may be None).

    >>> TimeWindow.of("2026-03-01T00:00:00Z", None).fields()
    {'since': '2026-03-01T00:00:00Z'}
    """

    since: _dt.datetime | None = None
    until: _dt.datetime | None = None

    @classmethod
    def of(cls, since: Moment | None, until: Moment | None) -> TimeWindow:
        """Check and read both ends; a ValueError names a bad one or a reversed window."""
        start = None if since is None else _instant("since", since)
        end = None if until is None else _instant("until", until)
        if start is not None and end is not None and end <= start:
            raise ValueError(f"until ({until!s}) must be after since ({since!s})")
        return cls(start, end)

    def fields(self) -> dict[str, str]:
        """The body fields for the set ends (UTC, ``Z``)."""
        return {
            name: moment.isoformat().replace("+00:00", "Z")
            for name, moment in (("since", self.since), ("until", self.until))
            if moment is not None
        }

    def keep(self, memories: Sequence[RecalledMemory]) -> list[RecalledMemory]:
        """The memories inside the window; one whose time is unknown or unreadable stays."""
        if self.since is None and self.until is None:
            return list(memories)
        return [m for m in memories if self._admits(m.said_at)]

    def _admits(self, said_at: str | None) -> bool:
        if said_at is None:
            return True
        try:
            moment = _instant("said_at", said_at)
        except ValueError:
            return True
        if self.since is not None and moment < self.since:
            return False
        return self.until is None or moment < self.until
