"""The operation a caller asked for, so a transport failure can say what did not happen.

A connection error first surfaced as ``GET /org/projects -> connection error``: an
internal route the caller never named, and no server address. Public calls are marked
with :func:`operation`; the outermost one names the failure, which then reads
``could not add a turn at https://...: GET /org/projects -> connection error: ...``.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from .._errors import APIConnectionError, APITimeoutError

P = ParamSpec("P")
R = TypeVar("R")

_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "memorysync_operation", default=None
)


def operation(label: str) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Mark an async public call as the operation ``label`` ("add a turn", "clear memories").

    Only the outermost marked call counts: ``UserMemory.clear`` stays "clear memories"
    through the listing and the deletes it makes.
    """

    def wrap(call: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(call)
        async def marked(*args: P.args, **kwargs: P.kwargs) -> R:
            if _CURRENT.get() is not None:
                return await call(*args, **kwargs)
            token = _CURRENT.set(label)
            try:
                return await call(*args, **kwargs)
            finally:
                _CURRENT.reset(token)

        return marked

    return wrap


def with_operation(exc: APIConnectionError, base_url: str) -> APIConnectionError:
    """``exc`` again, its message led by the current operation and the server's address."""
    label = _CURRENT.get()
    lead = f"could not {label} at {base_url}" if label else f"no answer from {base_url}"
    cls = APITimeoutError if isinstance(exc, APITimeoutError) else APIConnectionError
    return cls(f"{lead}: {exc.message}", route=exc.route)
