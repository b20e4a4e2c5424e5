"""Idempotency seeds shared by every MemorySync integration, and capture ids."""

from __future__ import annotations

import logging
import re
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
    stripped = _stripped(text, limit)
    if len(stripped) <= limit:
        return stripped
    _logger.debug("truncated a text of %s characters to %s", len(stripped), limit)
    return stripped[:limit]


# A sentence ends at . ! ? or an ellipsis (then closing quotes or brackets, then
# whitespace), at a CJK full stop, question or exclamation mark, or at a line break.
_SENTENCE_END = re.compile(r"[.!?\u2026][\"'\u2019\u201d)\]]*(?=\s)|[\u3002\uff01\uff1f]|(?=\n)")
_LAST_SPACE = re.compile(r"\s\S*\Z")


def sendable_text(text: str, *, limit: int = MAX_TEXT_CHARS) -> str:
    """A text as one request sends it: stripped, and cut at a boundary when too long.

    A text longer than ``limit`` code points is cut at the last sentence end within
    the limit, else at the last whitespace, else at the limit itself, so the server
    never extracts a fact from half a sentence ("Allergic to pea"). The cut is logged
    at WARNING (lengths only). Used by an explicit ``save``; a captured turn is sent
    whole instead, in parts (:func:`split_text`).

    >>> sendable_text("One. Two three four", limit=10)
    'One.'
    """
    stripped = _stripped(text, limit)
    if len(stripped) <= limit:
        return stripped
    end, at = _cut(stripped, limit)
    kept = stripped[:end].rstrip()
    _logger.warning(
        "a text of %s characters is over the %s-character limit: sent its first %s, cut at %s",
        len(stripped),
        limit,
        len(kept),
        at,
    )
    return kept


def split_text(text: str, *, limit: int = MAX_TEXT_CHARS) -> list[str]:
    """``text`` stripped, as consecutive parts of at most ``limit`` code points each.

    Each part ends at the last sentence end within the limit, else at the last
    whitespace (a single over-long sentence is cut between words), else at the limit
    itself. Nothing is dropped but the whitespace at the cuts; a text within the limit
    is one part, an empty text none.

    >>> split_text("One. Two three four", limit=10)
    ['One.', 'Two three', 'four']
    """
    rest = _stripped(text, limit)
    parts: list[str] = []
    while len(rest) > limit:
        end, _ = _cut(rest, limit)
        parts.append(rest[:end].rstrip())
        rest = rest[end:].lstrip()
    if rest:
        parts.append(rest)
    return parts


def _cut(stripped: str, limit: int) -> tuple[int, str]:
    """Where to cut ``stripped`` (longer than ``limit``), and what kind of boundary it is."""
    window = stripped[: limit + 1]  # one more: is the limit itself a boundary?
    ends = [m.end() for m in _SENTENCE_END.finditer(window) if 0 < m.end() <= limit]
    if ends:
        return ends[-1], "a sentence end"
    space = _LAST_SPACE.search(window)
    if space is not None and space.start() > 0:
        return space.start(), "whitespace"
    return limit, "the limit (no whitespace)"


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


def _stripped(text: str, limit: int) -> str:
    """``text`` stripped, after checking both arguments (TypeError / ValueError)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit!r}")
    return text.strip()
