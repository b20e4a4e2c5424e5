"""SQLite connections (WAL, thread-safe pool), and the schema brought up to date.

A file database gets one connection per concurrent user, taken from a pool:
WAL lets readers run beside the single writer, and writers serialise on
``BEGIN IMMEDIATE`` with a busy timeout. ``:memory:`` is one private database
per :class:`Database`, so it gets exactly one connection that requests take in
turn (a pool of one), which is correct from any thread or event loop.

SQLite's failures leave this module as the storage-neutral errors (``errors.py``:
busy, unwritable, corrupt); a file that cannot be opened and migrated stops the
server from starting, with an error naming the file.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memorysync_local._storage.schema_version import refuse_newer
from memorysync_local._storage.sqlite.backfill import reindex_words
from memorysync_local._storage.sqlite.errors import refused_file, storage_errors
from memorysync_local._storage.sqlite.paths import is_private_memory
from memorysync_local._storage.sqlite.schema import AFTER, MIGRATIONS, SCHEMA_VERSION
from memorysync_local._text.analyzer import index_text
from memorysync_local._text.attributes import attribute_words
from memorysync_local._text.owner import owner_token
from memorysync_local._timeutil import render, rendered_micros, utc_now

__all__ = ["BUSY_TIMEOUT_SECONDS", "SCHEMA_VERSION", "Database"]

BUSY_TIMEOUT_SECONDS = 30.0


class Database:
    """A thread-safe handle on one SQLite database (a path or ``:memory:``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._memory = is_private_memory(path)
        self._pool: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        if not self._memory:
            _create_private(path)
        try:
            first = self._open()
            self._migrate(first)
            # The word index made again if another analyzer made it (resumable).
            reindex_words(first)
        except sqlite3.Error as exc:
            self.close()
            raise refused_file(path, exc) from exc
        self._pool.put(first)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            ":memory:" if self._memory else self.path,
            timeout=BUSY_TIMEOUT_SECONDS,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            self._configure(conn)
        except BaseException:
            conn.close()  # a damaged file fails here: the refusal must not leak it
            raise
        with self._lock:
            self._all.append(conn)
        return conn

    def _configure(self, conn: sqlite3.Connection) -> None:
        """The functions, pragmas and row type every connection of this database has."""
        conn.row_factory = sqlite3.Row
        # For migrations that compute a sort key from a stored timestamp.
        conn.create_function("ms_micros", 1, _micros_or_none, deterministic=True)
        # The stems index's triggers compute each memory's stems and owner token.
        conn.create_function("ms_stems", 1, index_text, deterministic=True)
        conn.create_function("ms_owner", 2, owner_token, deterministic=True)
        conn.create_function("ms_attribute_words", 1, attribute_words, deterministic=True)
        if not self._memory:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            # Reads straight from the OS page cache, shared by every pooled connection
            # (each would otherwise warm a private cache): recall at 100k memories
            # under 20 concurrent clients, p99 about 100 -> 60-90 ms.
            conn.execute("PRAGMA mmap_size=268435456")
        conn.execute("PRAGMA foreign_keys=ON")

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """Borrow a connection (autocommit mode; use :meth:`write` for transactions)."""
        if self._closed:
            raise RuntimeError("the database is closed")
        try:
            conn = self._pool.get_nowait()
        except queue.Empty:
            # One connection for :memory: (it is the database); grow the pool for files.
            with storage_errors():
                conn = self._pool.get() if self._memory else self._open()
        try:
            with storage_errors():
                yield conn
        finally:
            if conn.in_transaction:
                conn.rollback()
            self._pool.put(conn)

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction (``BEGIN``): its reads see one snapshot of the file."""
        with self.connection() as conn:
            conn.execute("BEGIN")
            yield conn
            # Not a rollback: a temp table made meanwhile (the vocabulary view) is kept.
            conn.commit()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on error."""
        with self.connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.rollback()
                raise
            conn.commit()

    def close(self) -> None:
        """Close every connection this handle opened. Idempotent."""
        self._closed = True
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            current = int(row[0]) if row and row[0] is not None else 0
            refuse_newer(current, SCHEMA_VERSION)
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _statements(MIGRATIONS[version]):
                    conn.execute(statement)
                if version in AFTER:
                    AFTER[version](conn)
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
            conn.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('created_at', ?)",
                (render(utc_now()),),
            )
        except BaseException:
            conn.rollback()
            raise
        conn.commit()


def _create_private(path: str) -> None:
    """Create the database file 0600 (and each missing folder 0700) before SQLite does.

    SQLite creates a new file with the umask's usual 0644, readable by every local
    user, and gives the ``-wal`` and ``-shm`` files the database file's mode; so a
    file that starts 0600 keeps all three private. An existing file is left as it is.
    """
    target = Path(path)
    missing = []
    folder = target.parent
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700)
    try:
        fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def _micros_or_none(rendered: object) -> int | None:
    """``ms_micros(text)`` in SQL: microseconds since the epoch of a stored timestamp."""
    if not isinstance(rendered, str):
        return None
    try:
        return rendered_micros(rendered)
    except (ValueError, OverflowError):
        return None


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (triggers contain inner semicolons)."""
    statements: list[str] = []
    buffer = ""
    for line in script.strip().splitlines():
        buffer += line + "\n"
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
