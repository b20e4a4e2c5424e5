"""Each user's memory vectors held in memory as one matrix, kept in step with the database.

Reading a user's vectors from the database for every recall costs a few
milliseconds per thousand memories (a vector of the shipped model's 128 dimensions is
a 512-byte blob): about half a second at 100,000. So the first recall for a user
reads them once into a float32 matrix and later recalls only multiply.

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

A user with many vectors (``quantize_from`` rows, 10,000 by default) is searched in
two passes that give the same answer as one exact product: a first pass over int8
codes of the rows (a quarter of the bytes; NumKong's SIMD kernels), then the exact
float32 product over the rows that pass could not rule out. Each row keeps how far
its codes may be from it (``_Codes``), so the first pass knows every cosine within
a bound: a row whose highest possible cosine is below the ``limit``-th lowest
possible one cannot be among the nearest and is not read again. The exact pass
computes the same float32 sums as a product over every row, so the cosines, the
order and the ties (to the newest) are the ones exact search gives.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memorysync_local._recall.embedding import _numpy
from memorysync_local._storage.interface import VectorStore

logger = logging.getLogger("memorysync.local")

# 512 MiB: one user with about 600,000 memories of 128 dimensions (about 860 bytes a
# row with its int8 codes, 85.7 MB at 100,000), or 10,000 users with 100 (no codes).
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
_USER_LOCKS = 64
# Rows of a block when several probes share a product: 1 MB of 128-dimension vectors.
_BLOCK_ROWS = 2048
# Codes are packed for NumKong's matrix kernels (``dots_pack``) in blocks of this many
# rows (1 MB at 128 dimensions): a packed block reads about twice as fast as ``cdist``
# over the same codes, and 20 probes together about five times as fast. A block is
# packed once, when it is full; the rows after the last full one go through ``cdist``.
_PACK_ROWS = 8192
# From this many rows, a user's search starts with a pass over int8 codes: below it,
# the float32 product reads little (2.5 MB at 128 dimensions) and codes would not pay.
QUANTIZE_FROM = 10_000
# What the float32 sums may differ from the exact cosine (128 products of numbers
# below 1 in float32: under 1e-5) and the first pass's own float32 rounding: margin.
_SLACK = 1e-4


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
    codes: _Codes | None = None  # int8 codes of the first ``codes.size`` rows

    @property
    def nbytes(self) -> int:
        coded = self.codes.nbytes if self.codes is not None else 0
        return int(self.matrix.nbytes + self.ids.nbytes + coded)


@dataclass
class _Codes:
    """int8 codes of a matrix's first ``size`` rows, and what bounds their error.

    Row i is ``codes[i] * inverse[i]`` plus a residual of length ``errors[i]``;
    ``norms[i]`` is the length of ``codes[i] * inverse[i]``. Rows past ``size`` are
    free room (written only by whoever extends these codes, unseen by readers)."""

    codes: Any  # int8 (capacity x dimensions)
    inverse: Any  # float32 (capacity): the row's step between two codes
    norms: Any  # float32 (capacity)
    errors: Any  # float32 (capacity)
    size: int
    # Full blocks of ``_PACK_ROWS`` codes from row 0, each packed (``dots_pack``).
    packed: tuple[Any, ...] = ()

    @property
    def nbytes(self) -> int:
        arrays = (self.codes, self.inverse, self.norms, self.errors)
        packed = sum(int(block.nbytes) for block in self.packed)
        return int(sum(array.nbytes for array in arrays)) + packed


class VectorIndex:
    """Nearest-neighbour search over each user's vectors of one model, held in memory."""

    def __init__(
        self,
        model: str,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        quantize_from: int = QUANTIZE_FROM,
    ) -> None:
        self.model = model
        self.max_bytes = max_bytes
        self.quantize_from = quantize_from
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
        ids, matrix, codes = self._current(vectors, tenant, user_id)
        if not len(ids) or limit <= 0:
            return []
        if matrix.shape[1] != probe.size:
            logger.warning("stored vectors do not match model %s; run without them", self.model)
            return []
        ticket = self._products.run((tenant, user_id), _Ticket(matrix, probe, codes, limit))
        cosines = ticket.cosines
        # ``rows``: the rows the exact pass read (all of them when None).
        if ticket.rows is not None:
            ids = ids[ticket.rows]
        if len(ids) > limit:
            # Every row as close as the limit-th: the ties across the cut go to the
            # newest too (argpartition alone would keep any of them).
            cut = np.partition(cosines, len(ids) - limit)[len(ids) - limit]
            top = np.flatnonzero(cosines >= cut)
        else:
            top = np.arange(len(ids))
        # Best cosine first; equal cosines: the higher (newer) id first.
        order = top[np.lexsort((-ids[top], -cosines[top]))][:limit]
        return [(int(ids[i]), float(cosines[i])) for i in order]

    def _current(
        self, vectors: VectorStore, tenant: str, user_id: str
    ) -> tuple[Any, Any, _Codes | None]:
        """The user's ids, matrix and int8 codes (None below ``quantize_from`` rows),
        brought up to date (views and codes safe to read unlocked)."""
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
            coded = held.codes.size if held.codes is not None else 0
            wanted = held.size >= max(self.quantize_from, 1) and held.matrix.shape[1]
            if wanted and coded < held.size:
                held = replace(held, codes=_coded(held.codes, held.matrix, held.size))
            with self._lock:
                self._held[key] = held
                self._held.move_to_end(key)
                self._evict(keep=key)
        codes = held.codes if held.codes is not None and held.codes.size == held.size else None
        return held.ids[: held.size], held.matrix[: held.size], codes

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
            return replace(held, added=added)
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
        return _Held(ids, matrix, needed, newest, added, held.removed, held.erasures, held.codes)

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


def _coded(old: _Codes | None, matrix: Any, size: int) -> _Codes:
    """Codes of ``matrix``'s first ``size`` rows: ``old``'s, extended by the rows past
    them (in ``old``'s arrays while they have room: rows past ``old.size`` are unseen)."""
    np = _numpy()
    start = 0 if old is None else old.size
    width = matrix.shape[1]
    if old is not None and size <= len(old.codes):
        codes = old
    else:
        # Grow by a quarter, as the matrix does.
        capacity = max(size, (len(old.codes) if old else 0) * 5 // 4, 64)
        inverse, norms, errors = (np.zeros(capacity, dtype=np.float32) for _ in range(3))
        packed = old.packed if old is not None else ()
        codes = _Codes(
            np.zeros((capacity, width), dtype=np.int8), inverse, norms, errors, 0, packed
        )
        if old is not None:
            for mine, theirs in zip(_arrays(codes), _arrays(old), strict=True):
                mine[:start] = theirs[:start]
    for low in range(start, size, _BLOCK_ROWS):
        high = min(low + _BLOCK_ROWS, size)
        _code_rows(matrix[low:high], codes, low)
    return _Codes(codes.codes, codes.inverse, codes.norms, codes.errors, size, _packed(codes, size))


def _packed(codes: _Codes, size: int) -> tuple[Any, ...]:
    """``codes.packed`` and the blocks of the first ``size`` rows that are now full,
    each packed (a copy: later growth of the arrays leaves it as it is)."""
    import numkong  # deferred: only users past ``quantize_from`` rows need it

    blocks = list(codes.packed)
    for low in range(len(blocks) * _PACK_ROWS, size - _PACK_ROWS + 1, _PACK_ROWS):
        blocks.append(numkong.dots_pack(codes.codes[low : low + _PACK_ROWS]))
    return tuple(blocks)


def _code_rows(rows: Any, codes: _Codes, at: int) -> None:
    """Write the codes of float32 ``rows`` into ``codes`` from row ``at`` on.

    In float32: its rounding (about 1e-7 of each value) is far inside ``_SLACK``."""
    np = _numpy()
    # Each row its own step, so that its largest value gets code 127.
    peak = np.abs(rows).max(axis=1)
    inverse = np.where(peak > 0, peak / np.float32(127.0), np.float32(1.0)).astype(np.float32)
    scaled = rows / inverse[:, None]
    code = np.clip(np.rint(scaled, out=scaled), -127, 127, out=scaled).astype(np.int8)
    back = code * inverse[:, None]  # what the codes stand for
    rest = rows - back
    end = at + len(rows)
    codes.codes[at:end] = code
    codes.inverse[at:end] = inverse
    codes.norms[at:end] = np.sqrt(np.einsum("ij,ij->i", back, back))
    codes.errors[at:end] = np.sqrt(np.einsum("ij,ij->i", rest, rest))


def _arrays(codes: _Codes) -> tuple[Any, Any, Any, Any]:
    return codes.codes, codes.inverse, codes.norms, codes.errors


def _candidates(codes: _Codes, dots: Any, probe: _Probe, limit: int) -> Any | None:
    """The rows that may be among the ``limit`` nearest to ``probe``, given the int8
    products ``dots`` of the rows' codes with the probe's (None: every row may be).

    With row = codes x inverse + residual, and the same for the probe, a cosine is the
    codes' product scaled, within norm(row's codes) x error(probe) + error(row) x
    norm(probe) of it (Cauchy-Schwarz on the two residual terms), plus ``_SLACK``."""
    np = _numpy()
    n = codes.size
    if n <= limit:
        return None
    # In place where it can be (100,000 rows: each temporary array is 400 KB); the
    # same float32 operations, in the same order, as written out plainly.
    approx = np.multiply(dots, codes.inverse[:n])
    approx *= np.float32(probe.inverse)
    slack = np.multiply(codes.norms[:n], np.float32(probe.error))
    slack += np.multiply(codes.errors[:n], np.float32(probe.norm))
    slack += np.float32(_SLACK)
    lowest = np.subtract(approx, slack)
    lowest.partition(n - limit)
    floor = lowest[n - limit]  # the limit-th best lowest cosine
    approx += slack
    rows = np.flatnonzero(approx >= floor)
    # Too many left to gain from gathering them: the exact product over every row.
    return None if 2 * len(rows) > n else rows


@dataclass
class _Probe:
    """A probe's int8 codes, step, length and error (as ``_coded`` makes a row's)."""

    codes: Any
    inverse: float
    norm: float
    error: float

    @classmethod
    def of(cls, probe: Any) -> _Probe:
        np = _numpy()
        exact = np.asarray(probe, dtype=np.float64)
        peak = float(np.abs(exact).max())
        inverse = float(np.float32(peak / 127.0 if peak > 0 else 1.0))
        code = np.clip(np.rint(exact / inverse), -127, 127).astype(np.int8)
        error = float(np.linalg.norm(exact - code * inverse))
        return cls(code, inverse, float(np.linalg.norm(exact)), error)


def _code_products(codes: _Codes, probes: Sequence[_Probe]) -> Any:
    """The int8 products of every probe's codes with the rows' (probes x rows, float32:
    exact, as they stay below 2**24)."""
    import numkong  # deferred: only users past ``quantize_from`` rows need it

    np = _numpy()
    coded = np.stack([probe.codes for probe in probes])
    found = np.empty((len(probes), codes.size), dtype=np.float32)
    for number, block in enumerate(codes.packed):
        low = number * _PACK_ROWS
        found[:, low : low + _PACK_ROWS] = numkong.dots_packed(coded, block)  # int32
    tail = len(codes.packed) * _PACK_ROWS
    if tail < codes.size:
        rest = codes.codes[tail : codes.size]
        found[:, tail:] = numkong.cdist(coded, rest, metric="dot", out_dtype="float32")
    return found


@dataclass
class _Ticket:
    """One recall's probe waiting for its cosines (or to lead the next product).

    With ``codes`` (the int8 codes of every row of ``matrix``) and a ``limit``, only
    the rows that may be among the ``limit`` nearest are given cosines: ``rows``
    (positions in ``matrix``, ascending; None for every row)."""

    matrix: Any
    probe: Any
    codes: _Codes | None = None
    limit: int = 0
    ready: threading.Event = field(default_factory=threading.Event)
    cosines: Any = None
    rows: Any = None
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
        """The cosines of ``probe`` with every row of ``matrix``."""
        return self.run(key, _Ticket(matrix, probe)).cosines

    def run(self, key: tuple[str, str], ticket: _Ticket) -> _Ticket:
        """``ticket`` answered (its ``cosines`` and ``rows`` set)."""
        with self._lock:
            self._queues.setdefault(key, []).append(ticket)
            lead = key not in self._leading
            self._leading.add(key)
        if not lead:
            ticket.ready.wait()
            if ticket.error is not None:
                raise ticket.error
            if ticket.cosines is not None:
                return ticket
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
        return ticket

    def _multiply(self, batch: list[_Ticket]) -> None:
        np = _numpy()
        # Probes against the same view of the matrix go together (a recall that
        # appended rows meanwhile holds a longer view: it goes on its own).
        groups: dict[tuple[int, tuple[int, ...]], list[_Ticket]] = {}
        for ticket in batch:
            view = (ticket.matrix.__array_interface__["data"][0], ticket.matrix.shape)
            groups.setdefault(view, []).append(ticket)
        for tickets in groups.values():
            coded = [t for t in tickets if t.codes is not None and t.limit > 0]
            codes = coded[0].codes if coded else None
            if codes is not None:
                # One pass over the codes for every probe; each then reads its own rows.
                probes = [_Probe.of(t.probe) for t in coded]
                dots = _code_products(codes, probes)
                for ticket, probe, row_dots in zip(coded, probes, dots, strict=True):
                    rows = _candidates(codes, row_dots, probe, ticket.limit)
                    if rows is not None:
                        # The same float32 sums, row by row, as the product over all rows.
                        ticket.rows = rows
                        ticket.cosines = np.einsum("ij,j->i", ticket.matrix[rows], ticket.probe)
                tickets = [t for t in tickets if t.cosines is None]
                if len(coded) > 1:
                    with self._lock:
                        self.shared += len(coded)
            if not tickets:
                continue
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
