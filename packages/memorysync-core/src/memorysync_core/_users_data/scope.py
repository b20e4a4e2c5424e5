"""What the users'-data calls read from one user's memory, and nothing more.

A :class:`typing.Protocol` rather than ``UserMemory`` itself: ``UserMemory`` calls
these functions, so naming it here would close an import cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .._wire.client import MemorySyncAPI
    from .._wire.retry import RetryPolicy


class UserScope(Protocol):
    """One user on one client, in one session, with its retry policy."""

    @property
    def api(self) -> MemorySyncAPI:
        """The client to call."""
        ...

    @property
    def user_id(self) -> str:
        """The end user whose data it is."""
        ...

    @property
    def scope(self) -> str:
        """The current transcript scope, ``"<surface>::<session_id>"``."""
        ...

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy of explicit calls."""
        ...
