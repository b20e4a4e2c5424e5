"""Each user's memory vectors held in memory as one matrix, kept in step with the database.

Reading a user's vectors from the database for every recall costs a few
milliseconds per thousand memories (a 256-dimension vector is a 1 KB blob): about
half a second at 100,000. So the first recall for a user reads them once into a
float32 matrix and later recalls only multiply.

The database stays the truth, and other processes may write to it (a second
server, the CLI's ``forget``). The storage counts, per user, the vectors added and
the memories removed (``VectorStore.counters``), with the count of erased users
(erasing a user drops their counters, so they start again); each recall reads
them in the same read session (one snapshot) as anything it loads:

- nothing changed: the matrix is used as it is;
- only vectors added, all newer than the newest one held: those are appended;
- anything else (a memory deleted, an older memory embedded by a backfill, a
  vector replaced, a user erased): the user's matrix is read again.

Held matrices are evicted, least recently used first, past ``max_bytes``.

Concurrent recalls of one user share the product: a probe that arrives while that
user's matrix is being multiplied waits, and the waiting probes go together in the
next product, which reads the matrix once for all of them (``_Products``). The
product is bound by reading the matrix (50 MB at 100,000 memories of 128
dimensions), so several probes cost little more than one; the answers are the same
as one by one.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memorysync_local._recall.embedding import _numpy
from memorysync_local._storage.interface import VectorStore

logger = logging.getLogger("memorysync.local")

# 512 MiB: one user with 500,000 memories of 256 dimensions, or 5,000 users with 100.
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
_USER_LOCKS = 64
# Rows of a block when several probes share a product: 1 MB of 128-dimension vectors.
_BLOCK_ROWS = 2048


@dataclass
class _Held:
    """One user's vectors: the first ``size`` rows of ``matrix`` and ``ids`` are in use."""

    ids: Any  # int64 array of memory ids, in no particular order
    matrix: Any  # float32 array (capacity x dimensions), unit-length rows
    size: int
    newest: int  # the highest memory id held (0 for none)
    added: int
    removed: int
    erasures: int

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.ids.nbytes)


class VectorIndex:
    """Nearest-neighbour search over each user's vectors of one model, held in memory."""

    def __init__(self, model: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.model = model
        self.max_bytes = max_bytes
        self._held: OrderedDict[tuple[str, str], _Held] = OrderedDict()
        self._lock = threading.Lock()  # guards _held
        # One user's matrix is brought up to date by one thread at a time (a first
        # read at 100k memories takes most of a second), without stalling other users.
        self._user_locks = [threading.Lock() for _ in range(_USER_LOCKS)]
        self._products = _Products()
        self.reloads = 0  # full reads of a user's vectors, for tests and the bench

    def nearest(
        self,
        vectors: VectorStore,
        tenant: str,
        user_id: str,
        probe: Any,
        limit: int,
    ) -> list[tuple[int, float]]:
        """The user's ``limit`` memories closest to the unit vector ``probe``:
        (memory id, cosine), best first; ties go to the newest memory.

        ``vectors`` is a read session's: the counters and the rows it loads are
        then one snapshot."""
        np = _numpy()
        # A backend that can answer in the database (PostgreSQL's HNSW mode) does; one
        # that declares no vector search (StorageFeatures) answers None.
        probe_bytes = probe.astype(np.float32).tobytes()
        found = vectors.nearest_in_database(tenant, user_id, self.model, probe_bytes, limit)
        if found is not None:
            return found
        ids, matrix = self._current(vectors, tenant, user_id)
        if not len(ids) or limit <= 0:
            return []
        if matrix.shape[1] != probe.size:
            logger.warning("stored vectors do not match model %s; run without them", self.model)
            return []
        cosines = self._products.cosines((tenant, user_id), matrix, probe)
        if len(ids) > limit:
            top = np.argpartition(-cosines, limit - 1)[:limit]
        else:
            top = np.arange(len(ids))
        # Best cosine first; equal cosines: the higher (newer) id first.
        order = top[np.lexsort((-ids[top], -cosines[top]))]
        return [(int(ids[i]), float(cosines[i])) for i in order]

    def _current(self, vectors: VectorStore, tenant: str, user_id: str) -> tuple[Any, Any]:
        """The user's ids and matrix, brought up to date (views safe to read unlocked)."""
        key = (tenant, user_id)
        counters = vectors.counters(tenant, user_id)
        added, removed, erasures = counters.added, counters.removed, counters.erasures
        with self._user_locks[hash(key) % _USER_LOCKS]:
            with self._lock:
                held = self._held.get(key)
            if held is not None and erasures != held.erasures:
                held = None
            # The counters only grow: a matrix at or past this snapshot's is current.
            if held is not None and (added > held.added or removed > held.removed):
                held = self._caught_up(vectors, tenant, user_id, held, added, removed)
            if held is None:
                held = self._load(vectors, tenant, user_id, added, removed, erasures)
            with self._lock:
                self._held[key] = held
                self._held.move_to_end(key)
                self._evict(keep=key)
        return held.ids[: held.size], held.matrix[: held.size]

    def _caught_up(
        self,
        vectors: VectorStore,
        tenant: str,
        user_id: str,
        held: _Held,
        added: int,
        removed: int,
    ) -> _Held | None:
        """``held`` with the vectors added since appended, or None if it must be reread."""
        if removed != held.removed or not held.size:  # (an empty matrix has no width yet)
            return None
        rows = vectors.added_since(tenant, user_id, held.newest)
        if len(rows) != added - held.added:
            return None  # an older memory was (re)embedded: reread
        ours = [(memory_id, blob) for memory_id, model, blob in rows if model == self.model]
        return self._appended(held, ours, added)

    def _appended(self, held: _Held, rows: Sequence[tuple[int, bytes]], added: int) -> _Held:
        np = _numpy()
        width = held.matrix.shape[1]
        fresh = _matrix(rows, width)
        if fresh is None or not rows:  # a vector of another length is left out
            return _Held(
                held.ids, held.matrix, held.size, held.newest, added, held.removed, held.erasures
            )
        new_ids, new_rows = fresh
        needed = held.size + len(rows)
        ids, matrix = held.ids, held.matrix
        # A freshly read matrix is the rows' own read-only buffer, with no room to spare.
        if needed > len(ids) or not matrix.flags.writeable:
            # Grow by a quarter: appends stay amortised O(1) without doubling memory.
            capacity = max(needed, len(ids) + len(ids) // 4, 64)
            ids = np.zeros(capacity, dtype=np.int64)
            ids[: held.size] = held.ids[: held.size]
            matrix = np.zeros((capacity, width), dtype=np.float32)
            matrix[: held.size] = held.matrix[: held.size]
        # Rows past ``size`` are invisible to readers of the old views: safe to write.
        ids[held.size : needed] = new_ids
        matrix[held.size : needed] = new_rows
        newest = max(held.newest, int(new_ids.max()))
        return _Held(ids, matrix, needed, newest, added, held.removed, held.erasures)

    def _load(
        self,
        vectors: VectorStore,
        tenant: str,
        user_id: str,
        added: int,
        removed: int,
        erasures: int,
    ) -> _Held:
        np = _numpy()
        with self._lock:
            self.reloads += 1
        pairs = vectors.of_user(tenant, user_id, self.model)
        width = len(pairs[0][1]) // 4 if pairs else 0
        loaded = _matrix(pairs, width)
        if loaded is None:
            logger.warning("stored vectors do not match model %s; run without them", self.model)
            loaded = (np.zeros(0, dtype=np.int64), np.zeros((0, width), dtype=np.float32))
        ids, matrix = loaded
        newest = int(ids.max()) if len(ids) else 0
        return _Held(ids, matrix, len(ids), newest, added, removed, erasures)

    def _evict(self, *, keep: tuple[str, str]) -> None:
        total = sum(held.nbytes for held in self._held.values())
        for key in list(self._held):
            if total <= self.max_bytes:
                break
            if key != keep:
                total -= self._held.pop(key).nbytes


def _matrix(rows: Sequence[tuple[int, bytes]], width: int) -> tuple[Any, Any] | None:
    """(ids, float32 rows) from (id, blob) pairs; None if a blob is not ``width`` floats.

    The rows are a read-only view of one joined buffer (no second copy)."""
    np = _numpy()
    if any(len(blob) != 4 * width for _, blob in rows):
        return None
    ids = np.fromiter((i for i, _ in rows), dtype=np.int64, count=len(rows))
    flat = np.frombuffer(b"".join([blob for _, blob in rows]), dtype=np.float32)
    return ids, flat.reshape(len(rows), width)


@dataclass
class _Ticket:
    """One recall's probe waiting for its cosines (or to lead the next product)."""

    matrix: Any
    probe: Any
    ready: threading.Event = field(default_factory=threading.Event)
    cosines: Any = None
    error: BaseException | None = None


class _Products:
    """Matrix products by user: one at a time per user, with the probes that queued
    meanwhile taken together (a leader takes the queue; when done, it hands the
    next queue to one of its waiters)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[tuple[str, str], list[_Ticket]] = {}
        self._leading: set[tuple[str, str]] = set()
        self.shared = 0  # probes answered by a product with others, for tests and the bench

    def cosines(self, key: tuple[str, str], matrix: Any, probe: Any) -> Any:
        ticket = _Ticket(matrix, probe)
        with self._lock:
            self._queues.setdefault(key, []).append(ticket)
            lead = key not in self._leading
            self._leading.add(key)
        if not lead:
            ticket.ready.wait()
            if ticket.error is not None:
                raise ticket.error
            if ticket.cosines is not None:
                return ticket.cosines
            # Woken without an answer: this ticket leads the next product.
        with self._lock:
            batch = self._queues.pop(key)
        try:
            self._multiply(batch)
        except BaseException as exc:
            for other in batch:
                other.error = exc
            raise
        finally:
            with self._lock:
                waiting = self._queues.get(key)
                if waiting:
                    waiting[0].ready.set()
                else:
                    self._leading.discard(key)
            for other in batch:
                if other is not ticket:
                    other.ready.set()
        return ticket.cosines

    def _multiply(self, batch: list[_Ticket]) -> None:
        np = _numpy()
        # Probes against the same view of the matrix go together (a recall that
        # appended rows meanwhile holds a longer view: it goes on its own).
        groups: dict[tuple[int, tuple[int, ...]], list[_Ticket]] = {}
        for ticket in batch:
            view = (ticket.matrix.__array_interface__["data"][0], ticket.matrix.shape)
            groups.setdefault(view, []).append(ticket)
        for tickets in groups.values():
            matrix = tickets[0].matrix
            if len(tickets) == 1:
                # numpy's own loop, not BLAS, for one probe: as fast (bound by memory
                # bandwidth), and concurrent users' recalls do not fight over OpenBLAS's
                # threads (bench item 10, 20 clients at 100k memories: p50 315 -> 122 ms).
                tickets[0].cosines = np.einsum("ij,j->i", matrix, tickets[0].probe)
                continue
            # Several probes: the matrix is read once, a block of rows at a time (1 MB,
            # which stays in the CPU's cache) for every probe. Not one BLAS product:
            # OpenBLAS's threads fight concurrent recalls (and each other) on a busy
            # machine; this loop is numpy's own and gives the same sums as one by one.
            results = [np.empty(len(matrix), dtype=np.float32) for _ in tickets]
            for start in range(0, len(matrix), _BLOCK_ROWS):
                block = matrix[start : start + _BLOCK_ROWS]
                for result, ticket in zip(results, tickets, strict=True):
                    np.einsum(
                        "ij,j->i", block, ticket.probe, out=result[start : start + _BLOCK_ROWS]
                    )
            for result, ticket in zip(results, tickets, strict=True):
                ticket.cosines = result
            with self._lock:
                self.shared += len(tickets)
