"""The plain records the storage interface takes and returns: no driver types in them.

JSON columns (a memory's ``metadata`` and ``tags``, a turn's ``payload``, a job's
context) arrive decoded, as Python values; timestamps are the canonical UTC text
``_timeutil.render`` writes (``2026-01-02T03:04:05.000000Z``), which sorts as time.
The records read back are built from a row by their ``from_row``, on either backend.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol


class Row(Protocol):
    """A fetched row by column name: ``sqlite3.Row`` and psycopg's ``dict_row`` both are."""

    def __getitem__(self, column: str, /) -> Any: ...


def _json_or_none(text: str | None) -> Any:
    return None if text is None else json.loads(text)


@dataclass(frozen=True)
class NewMemory:
    """A memory to store (its id is the storage's to give)."""

    tenant_id: str
    user_id: str
    text: str
    kind: str
    source: str | None
    session_id: str | None
    metadata: dict[str, Any]
    origin: str
    history_id: int | None
    request_id: str | None
    created_at: str
    said_at: str
    attribute: str | None
    # Who said it, when the caller says so (a dialog turn); recall's dialog rules read it.
    speaker: str | None = None


class MemoryLine(NamedTuple):
    """What recall ranks a memory by beside its score: no JSON column to decode.

    ``position`` is the memory's place in its session (1, 2, ... in the order the
    session's memories were written), None outside a session."""

    id: int
    session_id: str | None
    text: str
    speaker: str | None = None
    position: int | None = None


class MemoryStamp(NamedTuple):
    """A memory's id and text with the times a :class:`ReadWindow` reads: what recall
    needs to choose its answers before it reads their whole records."""

    id: int
    text: str
    created_at: str
    said_at: str | None
    valid_until: str | None


# MemoryStamp's columns, in its order.
STAMP_COLUMNS = "id, text, created_at, said_at, valid_until"

# A memory's columns in :meth:`MemoryRecord.from_values`'s order.
MEMORY_COLUMNS = (
    "id, tenant_id, user_id, text, kind, source, session_id, metadata, tags, importance,"
    " origin, history_id, request_id, created_at, said_at, attribute, valid_until,"
    " superseded_by, speaker, session_position"
)


@dataclass(frozen=True)
class MemoryRecord:
    """One stored memory.

    ``valid_until`` is None while the memory is current; once superseded it holds when
    it stopped holding, and ``superseded_by`` the memory that replaced it (None when a
    retraction closed it). ``said_at`` may be None only in rows older than schema 7.
    """

    id: int
    tenant_id: str
    user_id: str
    text: str
    kind: str
    source: str | None
    session_id: str | None
    metadata: dict[str, Any]
    tags: list[Any] | None
    importance: float | None
    origin: str
    history_id: int | None
    request_id: str | None
    created_at: str
    said_at: str | None
    attribute: str | None
    valid_until: str | None
    superseded_by: int | None
    speaker: str | None = None
    position: int | None = None

    @classmethod
    def from_row(cls, row: Row) -> MemoryRecord:
        """A ``memories`` row (every column of this record) with its JSON decoded."""
        return cls(
            id=int(row["id"]),
            tenant_id=row["tenant_id"],
            user_id=row["user_id"],
            text=row["text"],
            kind=row["kind"],
            source=row["source"],
            session_id=row["session_id"],
            metadata=json.loads(row["metadata"]),
            tags=_json_or_none(row["tags"]),
            importance=row["importance"],
            origin=row["origin"],
            history_id=row["history_id"],
            request_id=row["request_id"],
            created_at=row["created_at"],
            said_at=row["said_at"],
            attribute=row["attribute"],
            valid_until=row["valid_until"],
            superseded_by=row["superseded_by"],
            speaker=row["speaker"],
            position=row["session_position"],
        )

    @classmethod
    def from_values(cls, values: Sequence[Any]) -> MemoryRecord:
        """A row's values in ``MEMORY_COLUMNS`` order, with its JSON decoded: half the
        cost of :meth:`from_row`'s twenty lookups by name (a recall reads tens).

        The fields are declared in ``MEMORY_COLUMNS`` order, so the values go in as
        they come; only the id and the two JSON columns (7, 8) are converted."""
        memory_id, *scalars, metadata, tags = values[:9]
        fields: list[Any] = [int(memory_id), *scalars, json.loads(metadata)]
        fields += [_json_or_none(tags), *values[9:]]
        return cls(*fields)


@dataclass(frozen=True)
class _Turn:
    """What a turn says, stored or not."""

    tenant_id: str
    user_id: str
    session_id: str
    source: str
    role: str
    content: str
    content_hash: str
    seq: int | None
    occurred_at: str | None
    payload: Any
    idempotency_key: str | None
    created_at: str
    sort_key: int


@dataclass(frozen=True)
class NewTurn(_Turn):
    """A transcript turn to store verbatim."""


@dataclass(frozen=True)
class TurnRecord(_Turn):
    """One stored transcript turn; ``id`` is the storage's row id (positive)."""

    id: int

    @classmethod
    def from_row(cls, row: Row) -> TurnRecord:
        """A ``history`` row with its payload decoded."""
        return cls(
            id=int(row["id"]),
            tenant_id=row["tenant_id"],
            user_id=row["user_id"],
            session_id=row["session_id"],
            source=row["source"],
            role=row["role"],
            content=row["content"],
            content_hash=row["content_hash"],
            seq=row["seq"],
            occurred_at=row["occurred_at"],
            payload=_json_or_none(row["payload"]),
            idempotency_key=row["idempotency_key"],
            created_at=row["created_at"],
            sort_key=int(row["sort_key"]),
        )


@dataclass(frozen=True)
class StoredJob:
    """One stored extraction job: a turn's text and the context its facts get."""

    id: int
    text: str
    context: dict[str, Any]
    created_at: str

    @classmethod
    def from_row(cls, row: Row) -> StoredJob:
        """An ``extraction_jobs`` row's id, text, context (decoded) and created_at."""
        return cls(
            id=int(row["id"]),
            text=str(row["text"]),
            context=json.loads(row["context"]),
            created_at=str(row["created_at"]),
        )


@dataclass(frozen=True)
class Revision:
    """One recorded edit of a memory (the official client's ``history(id)``)."""

    memory_id: int
    changed_fields: list[str]
    diff: dict[str, Any]
    created_at: str

    @classmethod
    def from_row(cls, row: Row) -> Revision:
        """A ``memory_revisions`` row with its JSON decoded."""
        return cls(
            memory_id=int(row["memory_id"]),
            changed_fields=json.loads(row["changed_fields"]),
            diff=json.loads(row["diff"]),
            created_at=row["created_at"],
        )


@dataclass(frozen=True)
class UserCounts:
    """A user of a tenant with how many memories and transcript turns they have."""

    user_id: str
    memories: int
    turns: int


@dataclass(frozen=True)
class SessionCounts:
    """One session of a user: its turns and memories, and the first and last write."""

    session_id: str
    turns: int
    memories: int
    first_at: str | None
    last_at: str | None


@dataclass(frozen=True)
class ErasedUser:
    """What erasing a user removed (``sessions``: how many sessions they had)."""

    memories: int
    turns: int
    sessions: int
    jobs: int


@dataclass(frozen=True)
class VectorCounters:
    """The vector counters of one user (see :class:`~.interface.VectorStore`)."""

    added: int
    removed: int
    erasures: int


@dataclass(frozen=True)
class MemorySelection:
    """Which of a user's memories a delete takes: ``ids`` when given (the filters are
    then ignored), else every memory matching all the filters given (none: all).

    ``before`` / ``after`` compare ``created_at`` strictly.
    """

    ids: tuple[int, ...] | None = None
    session_id: str | None = None
    source: str | None = None
    before: str | None = None
    after: str | None = None


@dataclass(frozen=True)
class StorageFeatures:
    """What a backend can do beyond the interface every backend implements (as Django's
    ``connection.features``); callers branch on these flags, never on a probe.

    ``vector_search_in_database``: ``VectorStore.nearest_in_database`` may answer (else it
    always returns None and recall ranks vectors in memory). ``job_notifications``:
    ``Storage.watch_jobs`` tells this process of jobs other processes add.
    """

    vector_search_in_database: bool = False
    job_notifications: bool = False


# A memory's time in SQL, the one definition both backends filter on (``ReadWindow.admits``
# is the same rule in Python): rows older than schema 7 may have no ``said_at``.
SAID_TIME_SQL = "COALESCE(said_at, created_at)"


@dataclass(frozen=True)
class ReadWindow:
    """Which memories a read returns: current ones (or all, ``history``), said in
    ``[since, until)`` when given (canonical timestamps, as ``_timeutil.render``).

    A memory's time is its ``said_at`` (``created_at`` when a row has none).
    """

    history: bool = False
    since: str | None = None
    until: str | None = None

    def admits(self, memory: MemoryRecord | MemoryStamp) -> bool:
        """Whether one memory is inside this window."""
        if not self.history and memory.valid_until is not None:
            return False
        said = memory.said_at or memory.created_at
        if self.since is not None and said < self.since:
            return False
        return self.until is None or said < self.until


CURRENT = ReadWindow()


@dataclass(frozen=True)
class TurnSelection:
    """Which of a user's turns a delete takes: a whole session, or turns by row id;
    either narrowed to one ``source`` when given."""

    session_id: str | None = None
    turn_ids: tuple[int, ...] = field(default_factory=tuple)
    source: str | None = None
