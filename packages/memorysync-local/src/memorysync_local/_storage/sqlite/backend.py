"""The SQLite backend: :class:`SQLiteStorage`, the storage interface over one file.

A read session is a ``BEGIN`` transaction on a pooled connection (one snapshot);
a write session is ``BEGIN IMMEDIATE``, so writers take turns and a check made in
a write holds until it commits. Each session's parts share its connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from memorysync_local._storage.records import StorageFeatures
from memorysync_local._storage.sqlite.database import Database
from memorysync_local._storage.sqlite.jobs import SQLiteJobs
from memorysync_local._storage.sqlite.memories import SQLiteMemories
from memorysync_local._storage.sqlite.quota import SQLiteQuota
from memorysync_local._storage.sqlite.schema import (
    REVISIONS_DDL,
    SAID_INDEX_DDL,
    add_dialog_columns,
)
from memorysync_local._storage.sqlite.seeds import SQLiteSeeds
from memorysync_local._storage.sqlite.transcript import SQLiteTranscript
from memorysync_local._storage.sqlite.users_data import SQLiteUsersData
from memorysync_local._storage.sqlite.vectors import SQLiteVectors
from memorysync_local._storage.sqlite.word_index import SQLiteWordIndex


class SQLiteSession:
    """One read snapshot or write transaction on one connection, by concern."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.memories = SQLiteMemories(conn)
        self.transcript = SQLiteTranscript(conn)
        self.seeds = SQLiteSeeds(conn)
        self.jobs = SQLiteJobs(conn)
        self.quota = SQLiteQuota(conn)
        self.users = SQLiteUsersData(conn)
        self.words = SQLiteWordIndex(conn)
        self.vectors = SQLiteVectors(conn)


class SQLiteStorage:
    """:class:`~memorysync_local._storage.interface.Storage` over a SQLite file or
    ``:memory:``; ``database`` is the connection pool underneath."""

    def __init__(self, path: str) -> None:
        self.database = Database(path)
        try:
            with self.database.write() as conn:
                for statement in (*REVISIONS_DDL, *SAID_INDEX_DDL):
                    conn.execute(statement)
                add_dialog_columns(conn)
        except BaseException:
            self.database.close()
            raise

    @property
    def target(self) -> str:
        """The file's path (or ``:memory:``)."""
        return self.database.path

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self.database.closed

    @property
    def features(self) -> StorageFeatures:
        """Vectors are ranked in memory; other processes' jobs are found at start."""
        return StorageFeatures(vector_search_in_database=False, job_notifications=False)

    def watch_jobs(self, wake: Callable[[], None]) -> None:
        """No notifications between processes on a file: nothing to watch."""

    @contextmanager
    def read(self) -> Iterator[SQLiteSession]:
        """A read session: one snapshot."""
        with self.database.read() as conn:
            yield SQLiteSession(conn)

    @contextmanager
    def write(self) -> Iterator[SQLiteSession]:
        """A write session: one ``BEGIN IMMEDIATE`` transaction."""
        with self.database.write() as conn:
            yield SQLiteSession(conn)

    def created_at(self) -> str:
        """When the file was created (``meta``'s ``created_at``)."""
        with self.database.connection() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'created_at'").fetchone()
        return str(row[0])

    def close(self) -> None:
        """Close every connection. Idempotent."""
        self.database.close()
