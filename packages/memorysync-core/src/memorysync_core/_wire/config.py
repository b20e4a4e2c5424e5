"""Configuration from arguments or the environment."""

from __future__ import annotations

import os

DEFAULT_BASE_URL = "https://api.memorysync.io"
ENV_API_KEY = "MEMORYSYNC_API_KEY"
ENV_BASE_URL = "MEMORYSYNC_BASE_URL"
ENV_PROJECT_ID = "MEMORYSYNC_PROJECT_ID"


def resolve_api_key(api_key: str | None) -> str:
    """The explicit key, else ``MEMORYSYNC_API_KEY``; a missing or blank key is a ValueError."""
    if api_key is not None and not isinstance(api_key, str):
        raise TypeError(f"api_key must be a string, got {type(api_key).__name__}")
    key = api_key if api_key is not None else os.environ.get(ENV_API_KEY)
    if key is None or not key.strip():
        raise ValueError(
            "api_key is missing or blank: pass api_key=... or set the "
            f"{ENV_API_KEY} environment variable (keys look like 'ms_...')"
        )
    key = key.strip()
    if not all("!" <= char <= "~" for char in key):
        # Never echo it: a key with a stray newline or space is still mostly a secret.
        raise ValueError(
            "api_key contains a character that cannot be sent in an HTTP header "
            "(whitespace, a control character or non-ASCII); check how it was copied"
        )
    return key


def resolve_base_url(base_url: str | None) -> str:
    """The explicit URL, else ``MEMORYSYNC_BASE_URL``, else the hosted service; no trailing /."""
    url = base_url if base_url is not None else os.environ.get(ENV_BASE_URL) or DEFAULT_BASE_URL
    if not isinstance(url, str):
        raise TypeError(f"base_url must be a string, got {type(url).__name__}")
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must start with http:// or https://, got {url!r}")
    return url


def resolve_project_id(project_id: str | None) -> str | None:
    """The explicit project id, else ``MEMORYSYNC_PROJECT_ID``, else None (blank = None)."""
    value = project_id if project_id is not None else os.environ.get(ENV_PROJECT_ID)
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"project_id must be a string, got {type(value).__name__}")
    return value.strip() or None


ENV_OUTBOX = "MEMORYSYNC_OUTBOX"


def resolve_outbox(outbox: str | None) -> str | None:
    """The explicit outbox path, else ``MEMORYSYNC_OUTBOX``, else None (no outbox)."""
    value = outbox if outbox is not None else os.environ.get(ENV_OUTBOX)
    return value or None


ENV_CLOSE_TIMEOUT = "MEMORYSYNC_CLOSE_TIMEOUT"
DEFAULT_CLOSE_TIMEOUT = 5.0


def resolve_close_timeout() -> float:
    """``MEMORYSYNC_CLOSE_TIMEOUT`` (seconds >= 0), else 5 s: how long a close waits.

    A value that is not a finite number >= 0 is a ValueError naming the variable.
    """
    text = os.environ.get(ENV_CLOSE_TIMEOUT, "").strip()
    if not text:
        return DEFAULT_CLOSE_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ValueError(
            f"{ENV_CLOSE_TIMEOUT} must be a number of seconds >= 0 (e.g. 5), got {text!r:.40}"
        )
    return value
