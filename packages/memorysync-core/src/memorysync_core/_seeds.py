"""Idempotency seeds shared by every MemorySync integration, and capture ids."""

from __future__ import annotations

import logging
import uuid

MAX_TEXT_CHARS = 16_000

_logger = logging.getLogger("memorysync.seeds")

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = 0xFFFFFFFFFFFFFFFF


def truncate_text(text: str, *, limit: int = MAX_TEXT_CHARS) -> str:
    """Normalise a turn's text: ``str.strip()``, then cut to ``limit`` code points.

    Cutting is logged (DEBUG, lengths only). Every seed and every body built from a
    captured turn goes through this one function.

    >>> truncate_text("  hello  ")
    'hello'
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit!r}")
    stripped = text.strip()
    if len(stripped) <= limit:
        return stripped
    _logger.debug("truncated a text of %s characters to %s", len(stripped), limit)
    return stripped[:limit]


def fnv1a64(text: str) -> str:
    """64-bit FNV-1a over the UTF-16 code units of ``text``, as 16 lower-case hex digits.

    >>> fnv1a64("a")
    'af63dc4c8601ec8c'
    """
    data = text.encode("utf-16-le", "surrogatepass")
    value = _FNV_OFFSET
    for index in range(0, len(data), 2):
        value ^= data[index] | (data[index + 1] << 8)
        value = (value * _FNV_PRIME) & _MASK
    return f"{value:016x}"


def user_turn_seed(scope: str, text: str) -> str:
    """The seed of a user's utterance: ``human@<scope>#h<fnv1a64("human:" + text)>``."""
    return f"human@{scope}#h{fnv1a64('human:' + truncate_text(text))}"


def assistant_turn_seed(scope: str, text: str) -> str:
    """The seed of an assistant's utterance: ``ai@<scope>#h<fnv1a64("ai:" + text)>``."""
    return f"ai@{scope}#h{fnv1a64('ai:' + truncate_text(text))}"


def new_capture_id() -> str:
    """A fresh capture id (32 hex digits), minted once per captured turn."""
    return uuid.uuid4().hex
