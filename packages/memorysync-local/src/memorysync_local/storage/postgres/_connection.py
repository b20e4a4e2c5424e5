"""Connections to PostgreSQL (a psycopg 3 pool), the one place psycopg's errors are
translated, and the advisory-locked migration run.

Connections are in autocommit mode; a write is an explicit transaction
(:meth:`Pool.write`), a read that needs one snapshot is a REPEATABLE READ one
(:meth:`Pool.snapshot`). psycopg's errors leave this module only as the
storage-neutral errors (busy, unwritable, corrupt); any other failure (a constraint
the code did not expect, a bug in a statement) stays psycopg's own exception, as
SQLite's do in the SQLite backend. Nothing here logs or raises the URL as given: it
may hold a password (:func:`redact`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from memorysync_local._timeutil import render, utc_now
from memorysync_local.storage.errors import (
    StorageBusy,
    StorageCorrupt,
    StorageError,
    StorageUnwritable,
)
from memorysync_local.storage.postgres._schema import MIGRATION_LOCK, MIGRATIONS, SCHEMA_VERSION

logger = logging.getLogger("memorysync.local")

Connection = psycopg.Connection[dict[str, Any]]
DEFAULT_POOL_SIZE = 10
# How long a request waits for a free pooled connection before answering busy.
POOL_TIMEOUT_SECONDS = 30.0

_UNWRITABLE = {
    "53100": ("full", "the server's storage is full; nothing can be stored until space is freed"),
    "25006": ("read_only", "the server's storage is read-only; nothing can be stored"),
    "58030": ("io_error", "the server's storage failed (I/O error); nothing can be stored"),
}
_BUSY = {"40001", "40P01", "55P03", "57014", "53300", "57P01", "57P02", "57P03"}
_CORRUPT = {"XX001", "XX002"}


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for logs and errors)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def is_postgres_url(target: str) -> bool:
    """Whether a ``--db`` value names a PostgreSQL database rather than a SQLite file."""
    return target.startswith(("postgresql://", "postgres://"))


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


class Pool:
    """A pool of autocommit connections to one database; rows come back as dicts."""

    def __init__(self, url: str, *, size: int = DEFAULT_POOL_SIZE, name: str = "memorysync"):
        if size < 1:
            raise ValueError("the PostgreSQL pool size must be at least 1")
        self.url = url
        self.shown = redact(url)
        self._closed = False
        try:
            migrate(url)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise refused_database(self.shown, exc) from exc
        self._pool: psycopg_pool.ConnectionPool[Connection] = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=size,
            kwargs={"autocommit": True, "row_factory": dict_row},
            timeout=POOL_TIMEOUT_SECONDS,
            name=name,
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=POOL_TIMEOUT_SECONDS)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            self._pool.close()
            raise refused_database(self.shown, exc) from exc

    def __repr__(self) -> str:
        return f"Pool({self.shown!r})"

    @property
    def closed(self) -> bool:
        return self._closed

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """Borrow a connection (autocommit: each statement is its own transaction)."""
        if self._closed:
            raise RuntimeError("the database is closed")
        with translated(), self._pool.connection() as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One READ COMMITTED transaction: committed on success, rolled back on error."""
        with self.connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """One REPEATABLE READ, read-only transaction: every read sees one snapshot."""
        with self.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield conn

    def close(self) -> None:
        """Close every pooled connection. Idempotent."""
        self._closed = True
        self._pool.close()


def migrate(url: str) -> int:
    """Bring the database's schema up to :data:`SCHEMA_VERSION`; the version found.

    Whichever process takes the advisory lock first migrates; the others wait for it,
    then see the versions it recorded. Each version commits with its record, so a
    migration interrupted half-way is redone from that version on.
    """
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT to_regclass('schema_version') IS NOT NULL AND to_regclass('meta') IS NOT NULL"
        ).fetchone()
        if found and found[0]:
            done = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            if done and done[0] == SCHEMA_VERSION:
                return SCHEMA_VERSION  # current: nothing to write (a read-only replica works)
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        try:
            with conn.transaction():
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                found = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            current = int(found[0]) if found and found[0] is not None else 0
            if current > SCHEMA_VERSION:
                raise RuntimeError(
                    f"database schema version {current} is newer than this server's "
                    f"({SCHEMA_VERSION}); upgrade memorysync-local"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                with conn.transaction():
                    for statement in MIGRATIONS[version]:
                        conn.execute(statement.encode())
                    conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
                logger.info("PostgreSQL schema migrated to version %d", version)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('created_at', %s) "
                "ON CONFLICT (key) DO NOTHING",
                (render(utc_now()),),
            )
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
    return current


def run_locked(url: str, statements: tuple[str, ...]) -> None:
    """Run DDL statements once under the migration lock (idempotent DDL only)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        try:
            with conn.transaction():
                for statement in statements:
                    conn.execute(statement.encode())
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def refused_database(shown: str, exc: BaseException) -> StorageError:
    """The error that stops a server from starting on a database (URL redacted)."""
    found = classify(exc)
    detail = _detail(exc)
    if isinstance(found, StorageUnwritable):
        return StorageUnwritable(
            f"cannot write to {shown} ({detail})", detail=detail, reason=found.reason
        )
    return StorageError(f"cannot open {shown} ({detail})", detail=detail)
