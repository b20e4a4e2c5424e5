"""The PostgreSQL ``Storage``: sessions over a connection pool, and the worker id.

A write session is one READ COMMITTED transaction. Before it first touches a user's
rows it takes that user's transaction-scoped advisory lock, so the checks a write
makes (a replayed turn, a claimed client ref, a stored turn, the current facts it
supersedes) hold until it commits, against every other process: one user's writes
take turns, different users' writes run side by side. The unique indexes on turns
and client refs stand behind that as constraints. A read session is one REPEATABLE
READ, read-only transaction: a consistent snapshot, no locks.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg

from memorysync_local._storage.postgres.database import (
    DEFAULT_POOL_SIZE,
    Connection,
    Pool,
    run_locked,
)
from memorysync_local._storage.postgres.errors import translated
from memorysync_local._storage.postgres.jobs import JOBS_CHANNEL, PostgresJobs
from memorysync_local._storage.postgres.memories import PostgresMemories
from memorysync_local._storage.postgres.quota import PostgresQuota, flush_counts
from memorysync_local._storage.postgres.schema import VECTOR_STATEMENTS, hnsw_index
from memorysync_local._storage.postgres.seeds import PostgresSeeds
from memorysync_local._storage.postgres.transcript import PostgresTranscript
from memorysync_local._storage.postgres.users_data import PostgresUsersData
from memorysync_local._storage.postgres.vectors import PostgresVectors
from memorysync_local._storage.postgres.word_index import CommonLexemes, PostgresWordIndex
from memorysync_local._storage.records import StorageFeatures

logger = logging.getLogger("memorysync.local")

POOL_SIZE_ENV = "MEMORYSYNC_POSTGRES_POOL_SIZE"
# "exact" (default): recall by meaning over each user's vectors held in memory, as on
# SQLite (identical ranking). "hnsw": pgvector's HNSW index answers in the database
# (approximate; no process holds a user's vectors).
VECTOR_SEARCH_ENV = "MEMORYSYNC_POSTGRES_VECTOR_SEARCH"
# How often a worker looks at the queue with no notification: jobs claimed by a
# process that died are found this long after at most.
JOB_POLL_SECONDS = 2.0


def owner_key(schema: str, tenant_id: str, user_id: str) -> int:
    """The advisory lock key (a signed 64-bit integer) of one (tenant, user) in the
    tables of ``schema`` (advisory locks span the database; the schema keeps two
    installations in one database apart)."""
    raw = f"{schema}\x00{tenant_id}\x00{user_id}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)


class PostgresSession:
    """One read snapshot or one write transaction on one pooled connection."""

    def __init__(self, storage: PostgresStorage, conn: Connection, *, writing: bool) -> None:
        self.conn = conn
        self.writing = writing
        self._storage = storage
        self._owners: set[tuple[str, str]] = set()
        self._counts: Counter[tuple[str, str]] = Counter()
        # In a read (one snapshot) the highest memory id cannot change: asked once.
        self.indexed_rows: int | None = None
        self.memories = PostgresMemories(self)
        self.transcript = PostgresTranscript(self)
        self.seeds = PostgresSeeds(self)
        self.jobs = PostgresJobs(self)
        self.quota = PostgresQuota(self)
        self.users = PostgresUsersData(self)
        self.words = PostgresWordIndex(self)
        self.vectors = PostgresVectors(self)

    def own(self, tenant_id: str, user_id: str) -> None:
        """In a write: hold this user's lock until the transaction ends."""
        if not self.writing or (tenant_id, user_id) in self._owners:
            return
        key = owner_key(self._storage.schema, tenant_id, user_id)
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
        self._owners.add((tenant_id, user_id))

    def count_later(self, key_id: str, month: str) -> None:
        self._counts[(key_id, month)] += 1

    def pending_adds(self, key_id: str, month: str) -> int:
        return self._counts[(key_id, month)]

    def flush(self) -> None:
        if self._counts:
            flush_counts(self, self._counts)
            self._counts.clear()

    def worker_id(self) -> int:
        return self._storage.worker_id()

    def common_lexemes(self) -> CommonLexemes:
        return self._storage.common_lexemes

    def need_vectors(self) -> None:
        self._storage.need_vectors()

    def hnsw_search(self) -> bool:
        return self._storage.vector_search == "hnsw"

    def need_hnsw(self, model: str, dimensions: int) -> None:
        self._storage.need_hnsw(model, dimensions)


class PostgresStorage:
    """``Storage`` on one PostgreSQL database, shared by any number of processes.

    Example:
        ```python
        storage = open_postgres("postgresql://app@db.internal/memories")
        with storage.read() as session:
            session.memories.count("local")
        storage.close()
        ```
    """

    shared = True  # other processes may write the same database

    def __init__(self, url: str, *, pool_size: int | None = None) -> None:
        size = pool_size if pool_size is not None else _pool_size_from_env()
        self.vector_search = _vector_search_from_env()
        self._pool = Pool(url, size=size)
        self._url = url
        try:
            with self._pool.connection() as conn:
                found = conn.execute("SELECT current_schema() AS name").fetchone()
        except BaseException:
            self._pool.close()
            raise
        self.schema = str(found["name"]) if found else "public"
        self._lock = threading.Lock()
        self._vectors_ready = False
        self._hnsw_ready: set[tuple[str, int]] = set()
        self._worker: _Worker | None = None
        self.common_lexemes = CommonLexemes()

    def __repr__(self) -> str:
        return f"PostgresStorage({self._pool.shown!r})"

    @property
    def target(self) -> str:
        return self._pool.shown

    @property
    def closed(self) -> bool:
        return self._pool.closed

    @contextmanager
    def read(self) -> Iterator[PostgresSession]:
        with self._pool.snapshot() as conn, translated():
            yield PostgresSession(self, conn, writing=False)

    @contextmanager
    def write(self) -> Iterator[PostgresSession]:
        with self._pool.write() as conn, translated():
            session = PostgresSession(self, conn, writing=True)
            yield session
            session.flush()

    def created_at(self) -> str:
        with self._pool.connection() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'created_at'").fetchone()
        assert row is not None
        return str(row["value"])

    def need_vectors(self) -> None:
        """Create the vector table (and the pgvector extension) once, if missing."""
        if self._vectors_ready:
            return
        with self._lock:
            if not self._vectors_ready:
                with self._pool.connection() as conn:
                    found = conn.execute(
                        "SELECT EXISTS (SELECT 1 FROM pg_trigger "
                        "WHERE tgrelid = to_regclass('memory_vectors') "
                        "AND tgname = 'vector_changes_ai') AS made"
                    ).fetchone()
                if not (found and found["made"]):  # else no DDL, no lock, no privilege
                    with translated():
                        run_locked(self._url, VECTOR_STATEMENTS)
                self._vectors_ready = True

    def need_hnsw(self, model: str, dimensions: int) -> None:
        """Create the HNSW index over one model's vectors once, if missing (the first
        recall in ``hnsw`` mode; building it over many stored vectors takes a while)."""
        if (model, dimensions) in self._hnsw_ready:
            return
        self.need_vectors()
        with self._lock:
            if (model, dimensions) not in self._hnsw_ready:
                name, ddl = hnsw_index(model, dimensions)
                with self._pool.connection() as conn:
                    found = conn.execute("SELECT to_regclass(%s) IS NOT NULL AS made", (name,))
                    made = found.fetchone()
                if not (made and made["made"]):
                    with translated():
                        run_locked(self._url, (ddl,))
                self._hnsw_ready.add((model, dimensions))

    def worker_id(self) -> int:
        """This process's worker id: the backend pid of a connection it holds open."""
        with self._lock:
            if self._pool.closed:
                raise RuntimeError("the database is closed")
            if self._worker is None:
                self._worker = _Worker(self._url)
            return self._worker.pid

    @property
    def features(self) -> StorageFeatures:
        """Jobs are notified (LISTEN/NOTIFY); vectors searched in the database in HNSW
        mode (``MEMORYSYNC_POSTGRES_VECTOR_SEARCH=hnsw``)."""
        return StorageFeatures(
            vector_search_in_database=self.vector_search == "hnsw", job_notifications=True
        )

    def watch_jobs(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` whenever any process adds a job, and every few seconds (to
        find jobs a dead process had claimed); until :meth:`close`."""
        self.worker_id()
        assert self._worker is not None
        self._worker.watch(wake)

    def close(self) -> None:
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()
        self._pool.close()


class _Worker:
    """A connection held for the process's lifetime: its pid marks the jobs this process
    claimed (they are free again once it is gone), and it listens for new jobs. Lost
    (a restart, a failover), it is opened again: jobs claimed under the old pid are
    then free for anyone, and whoever finishes one first stores its facts."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listening = False
        with translated():
            self._conn, self.pid = self._connect()

    def _connect(self) -> tuple[psycopg.Connection[Any], int]:
        # Named, so an operator (and the tests) can tell whose claims are whose.
        conn = psycopg.connect(
            self._url, autocommit=True, application_name=f"memorysync-worker-{os.getpid()}"
        )
        try:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            if self._listening:
                conn.execute(f"LISTEN {JOBS_CHANNEL}")
        except BaseException:
            conn.close()
            raise
        assert row is not None
        return conn, int(row[0])

    def watch(self, wake: Callable[[], None]) -> None:
        if self._thread is not None:
            return
        self._conn.execute(f"LISTEN {JOBS_CHANNEL}")
        self._listening = True
        self._thread = threading.Thread(
            target=self._listen, args=(wake,), name="memorysync-jobs-listen", daemon=True
        )
        self._thread.start()

    def _listen(self, wake: Callable[[], None]) -> None:
        while not self._stop.is_set():
            try:
                for _ in self._conn.notifies(timeout=JOB_POLL_SECONDS, stop_after=1):
                    break
            except psycopg.Error:
                if self._stop.wait(JOB_POLL_SECONDS):
                    return
                self._reconnect()
            if not self._stop.is_set():
                wake()

    def _reconnect(self) -> None:
        try:
            conn, pid = self._connect()
        except psycopg.Error as exc:
            # DEBUG: the extraction worker logs the outage once, and its end.
            logger.debug("the job queue's connection is lost (%s); retrying", type(exc).__name__)
            return
        old, self._conn, self.pid = self._conn, conn, pid
        old.close()
        logger.info("the job queue's connection was lost and is open again")

    def close(self) -> None:
        """Stop listening (a notification to ourselves ends the wait) and disconnect."""
        self._stop.set()
        if self._thread is not None:
            try:
                with psycopg.connect(self._url, autocommit=True) as conn:
                    conn.execute(f"NOTIFY {JOBS_CHANNEL}")
            except psycopg.Error:
                pass  # the database is gone: the wait ends at its timeout
            self._thread.join()
        self._conn.close()


def _vector_search_from_env() -> str:
    chosen = os.environ.get(VECTOR_SEARCH_ENV, "exact").strip().lower() or "exact"
    if chosen not in ("exact", "hnsw"):
        raise ValueError(f"{VECTOR_SEARCH_ENV} must be 'exact' or 'hnsw', not {chosen!r}")
    return chosen


def _pool_size_from_env() -> int:
    raw = os.environ.get(POOL_SIZE_ENV, "")
    if not raw:
        return DEFAULT_POOL_SIZE
    try:
        size = int(raw)
    except ValueError:
        raise ValueError(f"{POOL_SIZE_ENV} must be a whole number, not {raw!r}") from None
    if size < 1:
        raise ValueError(f"{POOL_SIZE_ENV} must be at least 1, not {size}")
    return size


def open_postgres(target: str, *, pool_size: int | None = None) -> PostgresStorage:
    """Open (migrating it as needed) the PostgreSQL database at ``target``."""
    return PostgresStorage(target, pool_size=pool_size)


if TYPE_CHECKING:  # PostgresStorage implements the interface, its session the tables' one
    from memorysync_local._storage.interface import Storage
    from memorysync_local._storage.postgres.session import PgSession

    _: type[Storage] = PostgresStorage
    _session: type[PgSession] = PostgresSession
