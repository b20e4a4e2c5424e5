"""Storage failures in words every backend shares.

The HTTP layer (``_http/errors.py``) answers these, never a driver's own exceptions;
each backend translates its engine's errors into them, once, where it talks to the
engine (``_storage/sqlite/errors.py`` for SQLite), so every backend gives the same
answers for the same trouble.

- :class:`StorageBusy`: contention (a lock held too long); retrying soon may succeed.
- :class:`StorageUnwritable`: the storage cannot take writes now: full, read-only or
  failing (I/O error). It lasts until an operator acts; reads may still work.
- :class:`StorageCorrupt`: the database is not usable; the server refuses it.

A database that cannot be opened raises one of these (or :class:`StorageError`
itself) naming it, and the server does not start.
"""

from __future__ import annotations


class StorageError(Exception):
    """A storage failure; ``detail`` is the backend's own message (for the log)."""

    def __init__(self, message: str, *, detail: str) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class StorageBusy(StorageError):
    """Contention: another writer holds the database. Retrying shortly may succeed."""


class StorageUnwritable(StorageError):
    """The storage cannot take writes: ``reason`` is ``"full"``, ``"read_only"`` or
    ``"io_error"``. Not worth retrying until an operator frees space or fixes it."""

    def __init__(self, message: str, *, detail: str, reason: str) -> None:
        super().__init__(message, detail=detail)
        self.reason = reason


class StorageCorrupt(StorageError):
    """The database is damaged or is not a database at all."""
