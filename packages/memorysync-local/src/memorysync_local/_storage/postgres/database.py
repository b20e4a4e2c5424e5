"""Connections to PostgreSQL (a psycopg 3 pool) and the advisory-locked migrations.

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

import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from memorysync_local._storage.postgres.errors import redact, refused_database, translated
from memorysync_local._storage.postgres.schema import (
    DIALOG_DONE,
    DIALOG_STATEMENTS,
    MIGRATION_LOCK,
    MIGRATIONS,
    SCHEMA_VERSION,
)
from memorysync_local._storage.postgres.word_index import reindex_words
from memorysync_local._storage.schema_version import refuse_newer
from memorysync_local._timeutil import render, utc_now

logger = logging.getLogger("memorysync.local")

Connection = psycopg.Connection[dict[str, Any]]
DEFAULT_POOL_SIZE = 10
# How long a request waits for a free pooled connection, and a write for a lock another
# process holds (a user's, a limited key's row), before answering busy (503): as long
# as the SQLite backend waits for the file's write lock.
POOL_TIMEOUT_SECONDS = 30.0
LOCK_TIMEOUT_SECONDS = 30.0


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
            reindex_words(url)  # the word index made again if another analyzer made it
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
            configure=_configure,
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
        with self.connection() as conn:
            # One statement opens it (a recall's hot path: a round trip less than
            # BEGIN then SET TRANSACTION); a read has nothing to roll back but its snapshot.
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield conn
            finally:
                if not conn.broken:  # a lost connection ends its transaction itself
                    conn.execute("ROLLBACK")

    def close(self) -> None:
        """Close every pooled connection. Idempotent."""
        self._closed = True
        self._pool.close()


def _configure(conn: Connection) -> None:
    """Every pooled connection: a lock wait past ``LOCK_TIMEOUT_SECONDS`` fails (busy)."""
    milliseconds = str(max(1, round(LOCK_TIMEOUT_SECONDS * 1000)))
    conn.execute("SELECT set_config('lock_timeout', %s, false)", (milliseconds,))


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
            dialog = conn.execute(DIALOG_DONE).fetchone()
            if done and done[0] == SCHEMA_VERSION and dialog and dialog[0]:
                return SCHEMA_VERSION  # current: nothing to write (a read-only replica works)
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        try:
            with conn.transaction():
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                found = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            current = int(found[0]) if found and found[0] is not None else 0
            refuse_newer(current, SCHEMA_VERSION)
            for version in range(current + 1, SCHEMA_VERSION + 1):
                with conn.transaction():
                    for statement in MIGRATIONS[version]:
                        conn.execute(statement.encode())
                    conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
                logger.info("PostgreSQL schema migrated to version %d", version)
            with conn.transaction():
                for statement in DIALOG_STATEMENTS:
                    conn.execute(statement.encode())
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
