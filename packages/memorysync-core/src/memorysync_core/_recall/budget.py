"""Recall under one deadline: tenant resolution + POST recall + rendering, never raising."""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .. import _telemetry as telemetry
from .._errors import MemorySyncError, RateLimitError
from .._wire.deadline import within
from .render import ContextRenderer, RecalledMemory, parse_memories

if TYPE_CHECKING:
    from .._wire.client import MemorySyncAPI

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

    Example:
        ```python
        result = await recall_within_budget(
            api, user_id="alice", prompt="Plan my trip", k=5, timeout=1.2,
            renderer=ContextRenderer(),
        )
        if result:
            system_message = result.block
        ```
    """
    if not isinstance(prompt, str) or not prompt.strip():
        return RecallResult.EMPTY
    budget = timeout if isinstance(timeout, (int, float)) and math.isfinite(timeout) else 0.0
    attributes: dict[str, telemetry.AttributeValue] = {}
    if telemetry.tracing():  # the digest and the dict cost nothing when nobody traces
        attributes = {
            "memorysync.surface": api.source,
            "memorysync.top_k": k if k is not None else 0,
            "memorysync.budget_s": budget,
            **telemetry.user_attributes(user_id),
            **telemetry.query_attributes(prompt),
        }
    loop = asyncio.get_running_loop()
    started = loop.time()
    with telemetry.span("memorysync.recall", attributes) as current:
        result, outcome = await _recall(api, user_id, prompt, k, budget, renderer)
        current.set_attributes(
            {
                "memorysync.outcome": outcome,
                "memorysync.budget_exhausted": outcome == "timeout",
                "memorysync.memories": len(result.memories),
                "memorysync.rendered_chars": len(result.block),
            }
        )
    metrics = telemetry.instruments()
    if metrics is not None:
        surface = {"memorysync.surface": api.source}
        metrics.recall_duration.record((loop.time() - started) * 1000.0, surface)
        if outcome == "timeout":
            metrics.budget_exhausted.add(1, surface)
    return result


async def _recall(
    api: MemorySyncAPI,
    user_id: str,
    prompt: str,
    k: int | None,
    budget: float,
    renderer: ContextRenderer,
) -> tuple[RecallResult, str]:
    """The recall and how it ended: ``ok``, ``empty``, ``timeout`` or the failure's kind."""

    async def steps() -> RecallResult:
        answer = await api.recall(user_id=user_id, prompt=prompt, k=k)
        return _result_from(answer, renderer)

    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        # One deadline over every step.
        result = await within(max(budget, 0.0), steps())
        return result, "ok" if result else "empty"
    except asyncio.TimeoutError:
        _logger.warning(
            "recall skipped: no answer within the %.3f s budget (waited %.3f s)",
            budget,
            loop.time() - started,
        )
        return RecallResult.EMPTY, "timeout"
    except RateLimitError as exc:
        _logger.warning(
            "recall skipped: rate limited (429, retry_after=%s, request_id=%s)",
            exc.retry_after,
            exc.request_id,
        )
        return RecallResult.EMPTY, "rate_limited"
    except MemorySyncError as exc:
        _logger.warning("recall skipped: %s (request_id=%s)", exc.message, exc.request_id)
        return RecallResult.EMPTY, type(exc).__name__
    except _Malformed as exc:
        _logger.warning("recall skipped: malformed answer (%s)", exc.what)
        return RecallResult.EMPTY, "malformed"
    except (ValueError, TypeError) as exc:
        _logger.warning("recall skipped: bad input (%s)", type(exc).__name__)
        return RecallResult.EMPTY, "bad_input"


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
