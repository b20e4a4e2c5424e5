"""Recall under one deadline: tenant resolution + POST recall + rendering, never raising."""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ._errors import MemorySyncError, RateLimitError
from ._render import ContextRenderer, RecalledMemory, parse_memories

if TYPE_CHECKING:
    from ._client import MemorySyncAPI

_logger = logging.getLogger("memorysync.recall")


@dataclass(frozen=True)
class RecallResult:
    """The block to inject and the memories it came from; falsy when there is no block."""

    block: str
    memories: tuple[RecalledMemory, ...] = ()

    EMPTY: ClassVar[RecallResult]

    def __bool__(self) -> bool:
        return bool(self.block)


RecallResult.EMPTY = RecallResult("", ())


class _Malformed(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


async def recall_within_budget(
    api: MemorySyncAPI,
    *,
    user_id: str,
    prompt: str,
    k: int | None,
    timeout: float,
    renderer: ContextRenderer,
) -> RecallResult:
    """Recall for ``prompt`` within ``timeout`` seconds in total; never raises.

    One deadline covers tenant resolution, the request and parsing. On timeout, any
    MemorySync error (429 included) or a malformed answer the result is
    ``RecallResult.EMPTY`` and one WARNING is logged on ``memorysync.recall``; an empty
    answer logs nothing. Only the caller's own cancellation propagates.

    Example::

        result = await recall_within_budget(
            api, user_id="alice", prompt="Plan my trip", k=5, timeout=1.2,
            renderer=ContextRenderer(),
        )
        if result:
            system_message = result.block
    """
    if not isinstance(prompt, str) or not prompt.strip():
        return RecallResult.EMPTY
    budget = timeout if isinstance(timeout, (int, float)) and math.isfinite(timeout) else 0.0

    async def steps() -> RecallResult:
        answer = await api.recall(user_id=user_id, prompt=prompt, k=k)
        return _result_from(answer, renderer)

    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        # wait_for over ONE coroutine: the budget covers every step, on 3.10 as well.
        return await asyncio.wait_for(steps(), max(budget, 0.0))
    except asyncio.TimeoutError:
        _logger.warning(
            "recall skipped: no answer within the %.3f s budget (waited %.3f s)",
            budget,
            loop.time() - started,
        )
    except RateLimitError as exc:
        _logger.warning(
            "recall skipped: rate limited (429, retry_after=%s, request_id=%s)",
            exc.retry_after,
            exc.request_id,
        )
    except MemorySyncError as exc:
        _logger.warning("recall skipped: %s (request_id=%s)", exc.message, exc.request_id)
    except _Malformed as exc:
        _logger.warning("recall skipped: malformed answer (%s)", exc.what)
    except (ValueError, TypeError) as exc:
        _logger.warning("recall skipped: bad input (%s)", type(exc).__name__)
    return RecallResult.EMPTY


def _result_from(answer: object, renderer: ContextRenderer) -> RecallResult:
    if not isinstance(answer, dict):
        raise _Malformed("the answer is not an object")
    memories = parse_memories(answer.get("memories", []))
    if memories is None:
        raise _Malformed("'memories' is not a list")
    context = answer.get("context")
    if context is None:
        # No server rendering: fall back to one line per memory.
        context = "\n".join("- " + m.text.strip() for m in memories)
    if not isinstance(context, str):
        raise _Malformed("'context' is not a string")
    block, kept = renderer.render(context, memories)
    if not block:
        return RecallResult.EMPTY
    return RecallResult(block, kept)
