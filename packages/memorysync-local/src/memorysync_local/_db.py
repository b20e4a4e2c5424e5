"""SQLite connections (WAL, thread-safe pool) and the schema with its migrations.

A file database gets one connection per concurrent user, taken from a pool:
WAL lets readers run beside the single writer, and writers serialise on
``BEGIN IMMEDIATE`` with a busy timeout. ``:memory:`` is one private database
per :class:`Database`, so it gets exactly one connection that requests take in
turn (a pool of one), which is correct from any thread or event loop.

SQLite's failures leave this module as the storage-neutral errors of
``_storage_errors`` (busy, unwritable, corrupt); a file that cannot be opened and
migrated stops the server from starting, with an error naming the file.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from memorysync_local._attributes import attribute_words
from memorysync_local._backfill import backfill_stems
from memorysync_local._stemming import index_text, owner_token
from memorysync_local._storage_errors import refused_file, storage_errors
from memorysync_local._timeutil import render, rendered_micros, utc_now
from memorysync_local._validity import backfill_attributes

SCHEMA_VERSION = 7
BUSY_TIMEOUT_SECONDS = 30.0
# History ids are rendered h_<HISTORY_ID_BASE + rowid>, as the hosted service's are.
HISTORY_ID_BASE = 1_000_000_000_000

_MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE memories (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        text TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'other',
        source TEXT,
        session_id TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        tags TEXT,
        importance REAL,
        origin TEXT NOT NULL,
        history_id INTEGER,
        request_id TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX memories_by_user ON memories (tenant_id, user_id, created_at, id);
    CREATE INDEX memories_by_history ON memories (history_id) WHERE history_id IS NOT NULL;
    CREATE VIRTUAL TABLE memories_fts USING fts5 (
        text, content='memories', content_rowid='id', tokenize='porter unicode61'
    );
    CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, text) VALUES (new.id, new.text);
    END;
    CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END;
    CREATE TABLE turn_receipts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        speaker TEXT NOT NULL,
        occurred_at TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        request_id TEXT NOT NULL,
        received_at TEXT NOT NULL
    );
    CREATE INDEX turn_receipts_replay
        ON turn_receipts (tenant_id, user_id, speaker, occurred_at, text_hash, received_at);
    CREATE TABLE history (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        source TEXT NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        seq INTEGER,
        occurred_at TEXT,
        payload TEXT,
        idempotency_key TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX history_by_session ON history (tenant_id, user_id, session_id, seq, id);
    CREATE UNIQUE INDEX history_idempotency_key
        ON history (tenant_id, user_id, session_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    CREATE UNIQUE INDEX history_seq_role_content
        ON history (tenant_id, user_id, session_id, seq, role, content_hash)
        WHERE seq IS NOT NULL AND idempotency_key IS NULL;
    CREATE TABLE client_refs (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        client_ref TEXT NOT NULL,
        memory_ids TEXT NOT NULL,
        PRIMARY KEY (tenant_id, user_id, client_ref)
    );
    CREATE TABLE usage (
        key_id TEXT NOT NULL,
        month TEXT NOT NULL,
        adds INTEGER NOT NULL DEFAULT 0,
        refused INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (key_id, month)
    );
    """,
    # Conversation order: a stored sort key (seq, else occurred_at, else created_at,
    # the times in integer microseconds since the epoch) and an index that lists a
    # session in that order. The seq lookup index serves the contract's retry rule
    # (same seq + role + content, whatever the idempotency keys); the old unique
    # index stays as it was, so existing rows never make the upgrade fail.
    2: """
    ALTER TABLE history ADD COLUMN sort_key INTEGER;
    UPDATE history SET sort_key = COALESCE(seq, ms_micros(occurred_at), ms_micros(created_at));
    DROP INDEX history_by_session;
    CREATE INDEX history_in_order ON history (tenant_id, user_id, session_id, sort_key, id);
    CREATE INDEX history_by_seq ON history (tenant_id, user_id, session_id, seq, role)
        WHERE seq IS NOT NULL;
    """,
    # Recall by word forms (memorysync_local._stemming): each memory's derivational
    # stems, searched by prefix, and a token of its owner so that a search reads only
    # that user's postings. Filled for existing memories by backfill_stems (_AFTER).
    3: """
    CREATE VIRTUAL TABLE memories_stems USING fts5 (
        owner, stems, tokenize='unicode61', prefix='3 4 5'
    );
    CREATE TRIGGER memories_stems_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_stems (rowid, owner, stems)
        VALUES (new.id, ms_owner(new.tenant_id, new.user_id), ms_stems(new.text));
    END;
    CREATE TRIGGER memories_stems_ad AFTER DELETE ON memories BEGIN
        DELETE FROM memories_stems WHERE rowid = old.id;
    END;
    """,
    # Background extraction (--async-extraction) that survives a crash: each job is
    # written in the same transaction as the turn it comes from, and deleted in the
    # transaction that stores its facts.
    4: """
    CREATE TABLE extraction_jobs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        text TEXT NOT NULL,
        context TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    """,
    # Recall by meaning (memorysync_local._vectors): one vector per memory, with the
    # embedder that made it; written with the memory when an embedder is configured,
    # filled for older memories at start (backfill_vectors), deleted with the memory.
    5: """
    CREATE TABLE memory_vectors (
        memory_id INTEGER PRIMARY KEY,
        model TEXT NOT NULL,
        vector BLOB NOT NULL
    );
    CREATE TRIGGER memory_vectors_ad AFTER DELETE ON memories BEGIN
        DELETE FROM memory_vectors WHERE memory_id = old.id;
    END;
    """,
    # Per user, how many vectors were added and memories removed: each recall by
    # meaning reads its user's row to keep its in-memory matrix in step with the file
    # (memorysync_local._vector_index), whichever process wrote. Erasing a user deletes
    # their row; meta's vector_erasures then counts up, so no held matrix outlives it.
    6: """
    CREATE TABLE vector_changes (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        added INTEGER NOT NULL DEFAULT 0,
        removed INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (tenant_id, user_id)
    );
    CREATE TRIGGER vector_changes_ai AFTER INSERT ON memory_vectors BEGIN
        INSERT INTO vector_changes (tenant_id, user_id, added)
        SELECT tenant_id, user_id, 1 FROM memories WHERE id = new.memory_id
        ON CONFLICT (tenant_id, user_id) DO UPDATE SET added = added + 1;
    END;
    CREATE TRIGGER vector_changes_ad AFTER DELETE ON memories BEGIN
        INSERT INTO vector_changes (tenant_id, user_id, removed)
        VALUES (old.tenant_id, old.user_id, 1)
        ON CONFLICT (tenant_id, user_id) DO UPDATE SET removed = removed + 1;
    END;
    CREATE TRIGGER vector_changes_erased AFTER DELETE ON vector_changes BEGIN
        INSERT INTO meta (key, value) VALUES ('vector_erasures', '1')
        ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1;
    END;
    """,
    # Memory that stays true (memorysync_local._validity): when each memory was said,
    # the attribute it states, and, once a newer fact or a retraction closed it, when
    # it stopped holding and what replaced it (valid_until NULL = current). A memory's
    # stems also index its attribute's words (_attributes.attribute_words). Existing
    # memories are said when written; their attributes are filled by
    # backfill_attributes (_AFTER), which also supersedes all but the newest.
    7: """
    ALTER TABLE memories ADD COLUMN said_at TEXT;
    ALTER TABLE memories ADD COLUMN attribute TEXT;
    ALTER TABLE memories ADD COLUMN valid_until TEXT;
    ALTER TABLE memories ADD COLUMN superseded_by INTEGER;
    UPDATE memories SET said_at = created_at;
    CREATE INDEX memories_current_attribute ON memories (tenant_id, user_id, attribute)
        WHERE valid_until IS NULL AND attribute IS NOT NULL;
    DROP TRIGGER memories_stems_ai;
    CREATE TRIGGER memories_stems_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_stems (rowid, owner, stems)
        VALUES (
            new.id,
            ms_owner(new.tenant_id, new.user_id),
            ms_stems(new.text || ' ' || ms_attribute_words(new.attribute))
        );
    END;
    """,
}
# Python steps that run after a version's statements, in the same transaction.
_AFTER: dict[int, Callable[[sqlite3.Connection], object]] = {
    3: backfill_stems,
    7: backfill_attributes,
}


class Database:
    """A thread-safe handle on one SQLite database (a path or ``:memory:``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._memory = path == ":memory:" or path.startswith("file::memory:") or path == ""
        self._pool: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        if not self._memory:
            _create_private(path)
        try:
            first = self._open()
            self._migrate(first)
        except sqlite3.Error as exc:
            self.close()
            raise refused_file(path, exc) from exc
        self._pool.put(first)

    @property
    def in_memory(self) -> bool:
        return self._memory

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
            if current > SCHEMA_VERSION:
                raise RuntimeError(
                    f"database schema version {current} is newer than this server's "
                    f"({SCHEMA_VERSION}); upgrade memorysync-local"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _statements(_MIGRATIONS[version]):
                    conn.execute(statement)
                if version in _AFTER:
                    _AFTER[version](conn)
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
