"""psycopg's errors sorted into the storage-neutral ones (``storage.errors``), once.

Every session and connection of the PostgreSQL backend runs inside :func:`translated`,
so a full disk, a read-only database or replica, contention, a cancelled statement
or a lost connection leave the backend as :class:`StorageUnwritable` /
:class:`StorageBusy`, whatever psycopg called them, and a role that may not create
pgvector's extension as a :class:`StorageError` naming the SQL to run; a database
that cannot be opened becomes :func:`refused_database`'s error, naming it without its
password (:func:`redact`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import psycopg_pool

from memorysync_local._storage.errors import (
    StorageBusy,
    StorageCorrupt,
    StorageError,
    StorageUnwritable,
)
from memorysync_local._storage.postgres.vectors import extension_refused
from memorysync_local._storage.target import shown

_UNWRITABLE = {
    "53100": ("full", "the server's storage is full; nothing can be stored until space is freed"),
    "25006": ("read_only", "the server's storage is read-only; nothing can be stored"),
    "58030": ("io_error", "the server's storage failed (I/O error); nothing can be stored"),
}
_BUSY = {"40001", "40P01", "55P03", "57014", "53300", "57P01", "57P02", "57P03"}
_CORRUPT = {"XX001", "XX002"}


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for logs and errors)."""
    return shown(url)


def classify(exc: BaseException) -> StorageError | None:
    """The storage-neutral error for a psycopg failure, or None for any other failure."""
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return StorageBusy("the database is busy; retry shortly", detail=_detail(exc))
    if not isinstance(exc, psycopg.Error):
        return None
    state = exc.sqlstate or ""
    detail = _detail(exc)
    if state in _UNWRITABLE:
        reason, message = _UNWRITABLE[state]
        return StorageUnwritable(message, detail=detail, reason=reason)
    if state in _CORRUPT:
        return StorageCorrupt("the server's database is damaged", detail=detail)
    if (
        state in _BUSY
        or state.startswith("08")
        or (isinstance(exc, psycopg.OperationalError) and not state)
    ):
        # Contention, a cancelled statement, or the connection lost (a restart, a
        # failover): a retry shortly may well succeed.
        return StorageBusy("the database is busy or unreachable; retry shortly", detail=detail)
    if state == "42501":
        return extension_refused(exc)
    return None


def _detail(exc: BaseException) -> str:
    # The first line only: psycopg's connection errors never carry the password, and
    # the rest (context lines) may quote a user's text.
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


@contextmanager
def translated() -> Iterator[None]:
    """Let psycopg's busy, unwritable and corrupt failures out as the neutral errors."""
    try:
        yield
    except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
        found = classify(exc)
        if found is None:
            raise
        raise found from exc


def refused_database(shown: str, exc: BaseException) -> StorageError:
    """The error that stops a server from starting on a database (URL redacted)."""
    found = classify(exc)
    detail = _detail(exc)
    if isinstance(found, StorageUnwritable):
        return StorageUnwritable(
            f"cannot write to {shown} ({detail})", detail=detail, reason=found.reason
        )
    return StorageError(f"cannot open {shown} ({detail})", detail=detail)
