"""The distribution's version, sent in the User-Agent."""

from __future__ import annotations

__version__ = "2.0.0"
