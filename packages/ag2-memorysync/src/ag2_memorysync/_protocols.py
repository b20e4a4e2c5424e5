"""The parts of AG2's classic agents this package touches, described rather than imported.

AG2 is never a dependency: whichever classic distribution the application installed
(``autogen`` 0.14.1, ``ag2`` 0.9-0.14.0) provides objects that match these shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class HookableAgent(Protocol):
    """An agent with AG2's hook system (``ConversableAgent`` and its subclasses)."""

    @property
    def name(self) -> str:
        """The agent's name, as it appears in relayed messages."""
        ...

    def register_hook(self, hookable_method: str, hook: Callable[..., Any]) -> None:
        """Add ``hook`` to the hook list named ``hookable_method``."""
        ...

    def register_reply(
        self,
        trigger: Any,
        reply_func: Callable[..., Any],
        position: int = 0,
        config: Any | None = None,
        reset_config: Callable[..., Any] | None = None,
        *,
        ignore_async_in_sync_chat: bool = False,
    ) -> None:
        """Insert ``reply_func`` into the agent's reply-function list at ``position``."""
        ...
