"""SQLite's errors sorted into the storage-neutral ones (``_storage.errors``), once.

Every statement the SQLite backend runs is inside :func:`storage_errors` (the
connection pool wraps each session in it), so busy, unwritable and corrupt storage
leave the backend as :class:`StorageBusy`, :class:`StorageUnwritable` and
:class:`StorageCorrupt`, whatever SQLite called them; a file that cannot be opened
becomes :func:`refused_file`'s error, naming the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from memorysync_local._storage.errors import (
    StorageBusy,
    StorageCorrupt,
    StorageError,
    StorageUnwritable,
)

# SQLite's primary result codes (https://sqlite.org/rescode.html).
_BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = (
    5, 6, 8, 10, 11, 13, 14, 26,
)  # fmt: skip
# The same by message, for Pythons (3.10) whose sqlite3 errors carry no code.
_BY_MESSAGE = (
    ("database is locked", _BUSY),
    ("database table is locked", _LOCKED),
    ("database or disk is full", _FULL),
    ("readonly database", _READONLY),
    ("disk i/o error", _IOERR),
    ("database disk image is malformed", _CORRUPT),
    ("file is not a database", _NOTADB),
    ("unable to open database file", _CANTOPEN),
)


_UNWRITABLE = {
    _FULL: ("full", "the server's storage is full; nothing can be stored until space is freed"),
    _READONLY: ("read_only", "the server's storage is read-only; nothing can be stored"),
    _IOERR: ("io_error", "the server's storage failed (I/O error); nothing can be stored"),
    _CANTOPEN: ("io_error", "the server's storage failed (I/O error); nothing can be stored"),
}


def _code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF  # an extended code's low byte is its primary code
    text = str(exc).lower()
    return next((found for words, found in _BY_MESSAGE if words in text), None)


def classify(exc: sqlite3.Error) -> StorageError | None:
    """The storage-neutral error for a SQLite error, or None for any other failure
    (a constraint, a bug in a statement), which stays the driver's own exception."""
    code = _code(exc)
    detail = str(exc)
    if code in (_BUSY, _LOCKED):
        return StorageBusy("the database is busy; retry shortly", detail=detail)
    if code in _UNWRITABLE:
        reason, message = _UNWRITABLE[code]
        return StorageUnwritable(message, detail=detail, reason=reason)
    if code in (_CORRUPT, _NOTADB):
        return StorageCorrupt("the server's database file is damaged", detail=detail)
    return None


@contextmanager
def storage_errors() -> Iterator[None]:
    """Let SQLite's busy, unwritable and corrupt failures out as the neutral errors."""
    try:
        yield
    except sqlite3.Error as exc:
        found = classify(exc)
        if found is None:
            raise
        raise found from exc


def refused_file(path: str, exc: sqlite3.Error) -> StorageError:
    """The error that stops a server from starting on ``path``, naming the file."""
    found = classify(exc)
    detail = str(exc)
    if isinstance(found, StorageCorrupt):
        return StorageCorrupt(
            f"{path} is not a usable SQLite database ({detail}); memorysync-local will "
            "not start on it: restore it from a backup or move it away",
            detail=detail,
        )
    if isinstance(found, StorageUnwritable):
        return StorageUnwritable(
            f"cannot open {path} for writing ({detail})", detail=detail, reason=found.reason
        )
    if isinstance(found, StorageBusy):
        return StorageBusy(f"{path} stayed locked by another process ({detail})", detail=detail)
    return StorageError(f"cannot open {path} ({detail})", detail=detail)
