"""The distribution's version: the one place it is written (hatch reads it at build time)."""

from __future__ import annotations

__version__ = "2.0.0"
