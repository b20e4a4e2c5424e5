"""The storage interface: everything the server reads and writes goes through it.

A backend (``_storage/sqlite``, ``_storage/postgres``) implements :class:`Storage`.
Nothing above this interface imports a database driver or writes SQL, and a
backend lets no driver exception out for the failures the server answers: busy,
unwritable and corrupt storage leave it as :mod:`.errors`' classes (a bug, such as
a malformed statement, may stay the driver's own exception: a logged 500).

Work happens in sessions: ``with storage.read() as s`` or ``with storage.write() as
s``. A session is used by one thread; sessions do not nest (inside one, use it:
a ``:memory:`` SQLite database has one connection, so a nested session would wait
for itself). A session groups the operations by concern, one attribute each:

- ``s.memories`` (:class:`MemoryTable`): memories, their validity, their edits;
- ``s.transcript`` (:class:`TranscriptTable`): conversation turns, verbatim;
- ``s.seeds`` (:class:`IdempotencySeeds`): what makes a retried write a no-op;
- ``s.jobs`` (:class:`JobQueue`): background extraction jobs;
- ``s.quota`` (:class:`QuotaLedger`): adds counted per key and month;
- ``s.users`` (:class:`UsersData`): a tenant's users, their sessions, erasure;
- ``s.words`` (:class:`WordIndex`): candidates and term statistics for word recall;
- ``s.vectors`` (:class:`VectorStore`): memory vectors and their change counters.

Every memory and turn is owned by a (tenant, user); a method given both never reads
or changes another owner's rows. Methods that change data are called in a
``write()`` session only.

Ranking is not the backend's: :mod:`memorysync_local._recall` scores and orders what
``s.words`` and ``s.vectors`` supply, so every backend ranks alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from memorysync_local._storage.records import (
    ErasedUser,
    MemoryLine,
    MemoryRecord,
    MemorySelection,
    MemoryStamp,
    NewMemory,
    NewTurn,
    ReadWindow,
    Revision,
    SessionCounts,
    StorageFeatures,
    StoredJob,
    TurnRecord,
    TurnSelection,
    UserCounts,
    VectorCounters,
)


class Storage(Protocol):
    """One database the server runs on, shared by every thread of the process.

    ``open_storage(target)`` returns one. Several processes may open the same
    database (SQLite: one file on one machine; PostgreSQL: any number of machines).
    """

    @property
    def target(self) -> str:
        """What it was opened on, for messages (a path, ``:memory:``, a URL without
        its password)."""
        ...

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        ...

    @property
    def features(self) -> StorageFeatures:
        """What this backend can do beyond the common interface."""
        ...

    def watch_jobs(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` whenever any process adds a job, until :meth:`close`; called
        only when ``features.job_notifications`` (a backend without it may do nothing)."""
        ...

    def read(self) -> AbstractContextManager[Session]:
        """A session for reads: every read in it sees one consistent snapshot."""
        ...

    def write(self) -> AbstractContextManager[Session]:
        """A session in one transaction: committed when the block ends normally,
        rolled back when it raises. The checks a write makes in it (a replayed turn,
        a claimed client ref, an existing turn, a quota) hold until it commits, even
        against another process writing the same rows: two identical writes through
        two processes store once (SQLite: writers take turns; PostgreSQL: one user's
        writes take turns under an advisory lock, unique indexes on turns and client
        refs behind it, and a limited key's count under its row's lock)."""
        ...

    def created_at(self) -> str:
        """When the database was first created (stable across restarts)."""
        ...

    def close(self) -> None:
        """Release every connection. Idempotent; a session opened after it raises
        ``RuntimeError``."""
        ...


class Session(Protocol):
    """One read snapshot or one write transaction; the operations, by concern."""

    @property
    def memories(self) -> MemoryTable:
        """Memories, their validity and their edits."""
        ...

    @property
    def transcript(self) -> TranscriptTable:
        """Conversation turns."""
        ...

    @property
    def seeds(self) -> IdempotencySeeds:
        """Turn receipts and client refs."""
        ...

    @property
    def jobs(self) -> JobQueue:
        """Background extraction jobs."""
        ...

    @property
    def quota(self) -> QuotaLedger:
        """Monthly add counts per key."""
        ...

    @property
    def users(self) -> UsersData:
        """A tenant's users and sessions; erasure."""
        ...

    @property
    def words(self) -> WordIndex:
        """The word (stem) index."""
        ...

    @property
    def vectors(self) -> VectorStore:
        """Memory vectors."""
        ...


class MemoryTable(Protocol):
    """Memories. Ids are positive integers given in increasing order (a newer memory
    has a higher id), never reused while the database lives."""

    def insert(self, memory: NewMemory) -> int:
        """Store one memory, current; its id. The word index is updated in the same
        transaction: its terms are ``_text.analyzer.index_text`` of its text and its
        attribute's words, under its owner. A memory of a session takes the next position
        there (``MemoryLine.position``: 1, 2, ...; one user's writes take turns, so two
        never share one, whatever ids concurrent writers interleave)."""
        ...

    def get(
        self, memory_id: int, tenant_id: str, user_id: str | None = None
    ) -> MemoryRecord | None:
        """The memory when it is the tenant's (and the user's, when given); else None."""
        ...

    def by_ids(
        self, ids: Sequence[int], *, tenant_id: str | None = None, user_id: str | None = None
    ) -> list[MemoryRecord]:
        """The memories among ``ids`` that exist (of that tenant / user when given),
        by id ascending. Unknown ids are left out."""
        ...

    def lines(self, ids: Sequence[int], tenant_id: str, user_id: str) -> list[MemoryLine]:
        """The id, session and text of the user's memories among ``ids``, by id
        ascending: what recall's ranking reads, for many candidates, cheaply."""
        ...

    def stamps(self, ids: Sequence[int], tenant_id: str, user_id: str) -> list[MemoryStamp]:
        """The id, text and times of the user's memories among ``ids``, by id ascending:
        what recall chooses its answers by (no JSON column decoded)."""
        ...

    def at_positions(
        self, tenant_id: str, user_id: str, places: Sequence[tuple[str, int]]
    ) -> list[MemoryLine]:
        """The user's memories at the (session id, position) ``places`` that hold one,
        in no set order: a dialog turn's neighbours in its session."""
        ...

    def said_in(
        self, tenant_id: str, user_id: str, since: str, until: str, limit: int
    ) -> list[MemoryLine]:
        """The user's ``limit`` newest memories said in ``[since, until)`` (their
        ``said_at``, else ``created_at``), newest first."""
        ...

    def page(
        self,
        tenant_id: str,
        user_id: str,
        window: ReadWindow,
        limit: int,
        offset: int,
        contains: str = "",
    ) -> tuple[list[MemoryRecord], int]:
        """The user's memories inside ``window``, newest first (``created_at`` then id,
        descending), ``limit`` of them (0: all) after skipping ``offset``; and how many
        there are in all. ``contains``: only those whose text contains it, ASCII
        letters compared without case."""
        ...

    def in_order(self, tenant_id: str, user_id: str | None) -> list[MemoryRecord]:
        """Every memory of the user (None: of the whole tenant), oldest first
        (``created_at`` then id)."""
        ...

    def newest_ids(self, tenant_id: str, user_id: str, limit: int) -> list[int]:
        """Ids of the user's ``limit`` newest memories, current or not (``created_at``
        then id, descending)."""
        ...

    def latest_said_current(self, tenant_id: str, user_id: str, limit: int) -> list[MemoryRecord]:
        """The user's ``limit`` current memories said last (``said_at`` then id,
        descending)."""
        ...

    def texts_in_session(
        self, tenant_id: str, user_id: str, session_id: str | None
    ) -> list[tuple[int, str]]:
        """(id, text) of the user's memories written in ``session_id`` (None: those
        written without one), by id ascending."""
        ...

    def count(self, tenant_id: str) -> int:
        """How many memories the tenant has."""
        ...

    def label(self, ids: Sequence[int], tags: Sequence[str], importance: float | None) -> None:
        """Set the tags and the importance of the memories ``ids``."""
        ...

    def update_fields(
        self,
        memory_id: int,
        *,
        tags: Sequence[Any] | None,
        importance: float | None,
        metadata: Mapping[str, Any],
        source: str | None,
    ) -> None:
        """Replace a memory's tags, importance, metadata and source (all four)."""
        ...

    def delete(
        self, tenant_id: str, user_id: str, selection: MemorySelection, *, dry_run: bool = False
    ) -> list[int]:
        """Delete the user's memories ``selection`` takes (with their words, vectors and
        revisions); their ids ascending. ``dry_run``: only say which."""
        ...

    def delete_derived(self, tenant_id: str, user_id: str, turn_ids: Sequence[int]) -> list[int]:
        """Delete the user's memories drawn from the turns ``turn_ids``; their ids
        ascending."""
        ...

    # --- validity (the logic is memorysync_local._service.validity's) -----------

    def current_on_attribute(
        self, tenant_id: str, user_id: str, attribute: str, *, besides: int
    ) -> list[int]:
        """Ids of the user's current memories stating ``attribute``, but ``besides``."""
        ...

    def said_later_on_attribute(
        self, tenant_id: str, user_id: str, attribute: str, *, besides: int, said_after: str
    ) -> tuple[int, str] | None:
        """(id, said_at) of the user's current memory on ``attribute`` said last, when
        it was said after ``said_after`` (``besides`` excluded); else None. Ties on
        ``said_at``: the highest id."""
        ...

    def current_said_by(self, tenant_id: str, user_id: str, said_at: str) -> list[MemoryRecord]:
        """The user's current memories said at or before ``said_at``, said last first
        (``said_at`` then id, descending)."""
        ...

    def close(self, ids: Sequence[int], until: str, superseded_by: int | None) -> None:
        """Mark the memories ``ids`` superseded: ``valid_until`` = ``until``,
        ``superseded_by`` as given."""
        ...

    # --- edits by the official client's routes -----------------------------------

    def revisions(self, memory_id: int) -> list[Revision]:
        """The memory's recorded edits, oldest first."""
        ...

    def last_revised_at(self, memory_id: int) -> str | None:
        """When the memory was last edited; None if never."""
        ...

    def add_revision(self, revision: Revision) -> None:
        """Record one edit of a memory (deleted with the memory)."""
        ...


class TranscriptTable(Protocol):
    """Conversation turns, stored verbatim. A turn's place in its session is its
    ``sort_key``, then its id (arrival)."""

    def find_by_key(
        self, tenant_id: str, user_id: str, session_id: str, idempotency_key: str
    ) -> TurnRecord | None:
        """The session's turn stored with this idempotency key, if any."""
        ...

    def find_by_seq(
        self,
        tenant_id: str,
        user_id: str,
        session_id: str,
        *,
        seq: int,
        role: str,
        content_hash: str,
    ) -> TurnRecord | None:
        """The session's first stored turn (lowest id) with this seq, role and content
        hash, if any (the contract's retry rule, whatever the idempotency keys)."""
        ...

    def insert(self, turn: NewTurn) -> TurnRecord:
        """Store one turn; the stored record (with its id). The caller has checked it
        is new (``find_by_key`` / ``find_by_seq``) in the same write."""
        ...

    def exists(self, turn_id: int) -> bool:
        """Whether the turn is still stored."""
        ...

    def latest(
        self, tenant_id: str, user_id: str, session_id: str, source: str | None, limit: int
    ) -> tuple[list[TurnRecord], int]:
        """The session's last ``limit`` turns (0: all), of ``source`` when given, in
        conversation order (oldest first); and how many there are in all."""
        ...

    def delete(self, tenant_id: str, user_id: str, selection: TurnSelection) -> list[int]:
        """Delete the user's turns ``selection`` takes; their ids ascending."""
        ...


class IdempotencySeeds(Protocol):
    """What makes a retried write store nothing new."""

    def claim_turn(
        self,
        tenant_id: str,
        user_id: str,
        *,
        speaker: str,
        occurred_at: str,
        text_hash: str,
        request_id: str,
        received_at: str,
        window_start: str,
    ) -> bool:
        """Record an ``add_turn`` receipt; False (recording nothing) when the same
        (tenant, user, speaker, occurred_at, text_hash) was received at or after
        ``window_start``: a replay."""
        ...

    def claimed_ref(self, tenant_id: str, user_id: str, client_ref: str) -> list[int] | None:
        """The memory ids an earlier add with ``client_ref`` stored; None if unclaimed."""
        ...

    def claim_ref(
        self, tenant_id: str, user_id: str, client_ref: str, memory_ids: Sequence[int]
    ) -> None:
        """Record that the add with ``client_ref`` stored (or repeated) ``memory_ids``.
        The caller saw the ref unclaimed in the same write."""
        ...

    def release_ref(self, tenant_id: str, user_id: str, client_ref: str) -> None:
        """Forget a client ref (its memories are all gone)."""
        ...


class JobQueue(Protocol):
    """Background extraction jobs, written in the transaction of the turn they come from,
    so an acknowledged turn's extraction survives a crash."""

    def add(self, text: str, context: Mapping[str, Any], created_at: str) -> int:
        """Store one job; its id (ids increase: the oldest job has the lowest)."""
        ...

    def claim_next(self) -> StoredJob | None:
        """The oldest job no live worker holds, now held by the caller; None when none.

        Called in a write session. One process (SQLite): the oldest job. Several
        (PostgreSQL): a job held by a process that died is claimable again, and no job
        is held by two live workers at once.
        """
        ...

    def finish(self, job_id: int) -> bool:
        """Delete a job; True when it was still stored (its facts may be stored in the
        same write), False when it is gone (cancelled, or done by another worker)."""
        ...

    def count(self, tenant_id: str | None = None, user_id: str | None = None) -> int:
        """Jobs not done: all of them, the tenant's, or one user's."""
        ...

    def cancel(self, tenant_id: str, user_id: str) -> int:
        """Delete the user's jobs; how many."""
        ...


class QuotaLedger(Protocol):
    """Adds counted per key id (``_plans.key_id``) and month (``YYYY-MM``)."""

    def count_add(self, key_id: str, month: str, limit: int | None) -> bool:
        """Count one add unless the key already has ``limit`` adds this month (None: no
        limit): True when counted; False when refused (the refusal is counted)."""
        ...

    def usage(self, key_id: str, month: str) -> tuple[int, int]:
        """(adds, refusals) of the key in the month; (0, 0) when none."""
        ...


class UsersData(Protocol):
    """A tenant's users as the users'-data routes, the CLI and the inspector see them.

    A user's *sessions* are the union of their transcript sessions and the
    ``session_id`` of their memories.
    """

    def users(self, tenant_id: str) -> list[UserCounts]:
        """Every user with a memory or a turn in the tenant, by user id."""
        ...

    def known(self, tenant_id: str, user_id: str) -> bool:
        """Whether the tenant stores a memory or a turn of the user."""
        ...

    def sessions(self, tenant_id: str, user_id: str) -> list[str]:
        """The user's session ids, sorted."""
        ...

    def session_counts(self, tenant_id: str, user_id: str, session_id: str) -> SessionCounts:
        """The session's turns and memories, and its first and last ``created_at``."""
        ...

    def erase(self, tenant_id: str, user_id: str) -> ErasedUser:
        """Delete every memory, turn, job, turn receipt, client ref and vector counter of
        the user (in this write: all or nothing). A second call erases nothing."""
        ...

    def erase_session(self, tenant_id: str, user_id: str, session_id: str) -> tuple[int, int]:
        """Delete the session's turns, the memories written in it and those drawn from
        its turns; (memories, turns) deleted."""
        ...


class WordIndex(Protocol):
    """Each memory's terms (``_text.analyzer.index_text``), matched exactly.

    A prompt term (``_text.analyzer.query_stems``) is one or more forms joined by
    ``|``; it matches an indexed term equal to one of them (``_text.analyzer.Matcher``;
    ``_text.analyzer.vocabulary_ranges`` gives the same as ranges of terms).
    """

    def newest_matching(
        self, tenant_id: str, user_id: str, stems: Sequence[str], limit: int
    ) -> dict[int, str]:
        """The user's ``limit`` newest memories (highest ids) matching every one of
        ``stems``: memory id -> its indexed stems (space-separated)."""
        ...

    def indexed_rows(self) -> int:
        """The highest memory id in the index (0 when empty): the collection size
        BM25's inverse document frequency uses."""
        ...

    def documents(self, low: str, high: str) -> int:
        """The sum, over indexed terms ``t`` with ``low <= t < high``, of how many
        memories have ``t`` among their stems (a memory with two such terms counts
        twice), over every user."""
        ...


class VectorStore(Protocol):
    """One vector per memory and model: unit-length float32, as bytes
    (``_recall.vectors.pack``).

    Per user, two counters only grow: vectors ``added`` and memories ``removed``; and
    ``erasures`` counts erased users database-wide (erasing a user drops their
    counters). A process holding a user's vectors in memory compares them to know
    whether its copy is current (``_recall.vector_index``).
    """

    def put(self, model: str, vectors: Sequence[tuple[int, bytes]]) -> None:
        """Store (memory id, vector) pairs made by ``model``, replacing a memory's older
        vector; a memory deleted meanwhile gets none. Counts each as added."""
        ...

    def missing_count(self, model: str) -> int:
        """How many memories (of every user) have no vector from ``model``."""
        ...

    def missing(self, model: str, after_id: int, limit: int) -> list[tuple[int, str]]:
        """(id, text) of up to ``limit`` memories past ``after_id`` with no vector from
        ``model``, by id ascending."""
        ...

    def counters(self, tenant_id: str, user_id: str) -> VectorCounters:
        """The user's counters (zeros when none) and the erasures."""
        ...

    def added_since(
        self, tenant_id: str, user_id: str, after_id: int
    ) -> list[tuple[int, str, bytes]]:
        """(memory id, model, vector) of the user's vectors of memories past
        ``after_id``, any model, by memory id ascending."""
        ...

    def of_user(self, tenant_id: str, user_id: str, model: str) -> list[tuple[int, bytes]]:
        """(memory id, vector) of every vector of the user from ``model``, in no order."""
        ...

    def nearest_in_database(
        self, tenant_id: str, user_id: str, model: str, probe: bytes, limit: int
    ) -> list[tuple[int, float]] | None:
        """The user's ``limit`` memories nearest ``probe`` (unit float32 bytes), (memory
        id, cosine), best first, ties to the newest; None when the database does not
        answer (always, without ``StorageFeatures.vector_search_in_database``)."""
        ...
