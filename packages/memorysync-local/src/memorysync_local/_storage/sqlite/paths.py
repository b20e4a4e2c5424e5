"""What a SQLite target names, read without opening it (a leaf: imports nothing of ours)."""

from __future__ import annotations


def is_private_memory(target: str) -> bool:
    """True for a SQLite database kept in memory (``:memory:``): private to the process
    and the connection that opened it, so no other process can share it."""
    return target in (":memory:", "") or target.startswith("file::memory:")
