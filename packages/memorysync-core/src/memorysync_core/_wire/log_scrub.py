"""Keeps API keys out of httpx's and httpcore's own log records.

At DEBUG, httpcore logs each response's headers; a hostile or broken server that
echoes the key (in ``x-request-id``, say) would put it in the application's log.
Every :class:`~memorysync_core.MemorySyncAPI` registers its key here, and a filter
on those libraries' loggers replaces it with ``***`` before any handler sees the
record. The filter costs nothing unless those loggers are enabled for DEBUG.
"""

from __future__ import annotations

import logging
import threading

from .transport import scrub

# httpcore logs through one logger per module; a logger's filters do not reach its
# children, so each is named.
_LOGGERS = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)
_keys: set[str] = set()
_lock = threading.Lock()


class _KeyScrubber(logging.Filter):
    """Rewrites a record whose message holds a registered key, with the key as ``***``."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except (TypeError, ValueError):
            return True  # a malformed record: logging reports it as it always does
        scrubbed = text
        for key in tuple(_keys):
            scrubbed = scrub(scrubbed, key)
        if scrubbed != text:
            record.msg, record.args = scrubbed, None
        return True


_FILTER = _KeyScrubber()


def guard_key(api_key: str) -> None:
    """Scrub ``api_key`` from httpx's and httpcore's records from now on."""
    with _lock:
        if api_key:
            _keys.add(api_key)
        for name in _LOGGERS:
            logger = logging.getLogger(name)
            if _FILTER not in logger.filters:
                logger.addFilter(_FILTER)
