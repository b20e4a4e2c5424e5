"""The ``memories`` table (with its edits, ``memory_revisions``) on SQLite.

Inserting a memory fills the word index by trigger (schema 3 and 7); deleting one
drops its stems, vector and revisions by trigger and counts it in ``vector_changes``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from memorysync_local._storage.records import (
    MEMORY_COLUMNS,
    SAID_TIME_SQL,
    STAMP_COLUMNS,
    MemoryLine,
    MemoryRecord,
    MemorySelection,
    MemoryStamp,
    NewMemory,
    ReadWindow,
    Revision,
)

# A memory line's columns (``records.MemoryLine``).
_LINE = "id, session_id, text, speaker, session_position"
# A new memory's place in its session: after the session's last (None outside one).
_NEXT_POSITION = (
    "CASE WHEN ? IS NULL THEN NULL ELSE (SELECT COALESCE(MAX(session_position), 0) + 1"
    " FROM memories WHERE tenant_id = ? AND user_id = ? AND session_id = ?"
    " AND session_position IS NOT NULL) END"
)


def window_sql(window: ReadWindow) -> tuple[str, list[Any]]:
    """The window as extra ``WHERE`` clauses over ``memories`` and their parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    if not window.history:
        clauses.append("valid_until IS NULL")
    if window.since is not None:
        clauses.append(f"{SAID_TIME_SQL} >= ?")
        params.append(window.since)
    if window.until is not None:
        clauses.append(f"{SAID_TIME_SQL} < ?")
        params.append(window.until)
    return "".join(f" AND {c}" for c in clauses), params


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def _pairs(count: int) -> str:
    return ", ".join(["(?, ?)"] * count)


class SQLiteMemories:
    """:class:`~memorysync_local._storage.interface.MemoryTable` on one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def insert(self, memory: NewMemory) -> int:
        """Store one memory; its id (the stems trigger indexes it). In a session it takes
        the next position there (writers take turns, so no two share one)."""
        cursor = self._conn.execute(
            "INSERT INTO memories (tenant_id, user_id, text, kind, source, session_id, "
            "metadata, origin, history_id, request_id, created_at, said_at, attribute, "
            "speaker, session_position) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            f"{_NEXT_POSITION})",
            (
                memory.tenant_id,
                memory.user_id,
                memory.text,
                memory.kind,
                memory.source,
                memory.session_id,
                json.dumps(memory.metadata, ensure_ascii=False),
                memory.origin,
                memory.history_id,
                memory.request_id,
                memory.created_at,
                memory.said_at,
                memory.attribute,
                memory.speaker,
                memory.session_id,
                memory.tenant_id,
                memory.user_id,
                memory.session_id,
            ),
        )
        return int(cursor.lastrowid or 0)

    def get(
        self, memory_id: int, tenant_id: str, user_id: str | None = None
    ) -> MemoryRecord | None:
        """The memory when it is the tenant's (and the user's, when given)."""
        where, params = _owner(tenant_id, user_id)
        row = self._conn.execute(
            f"SELECT * FROM memories WHERE id = ? AND {where}", [memory_id, *params]
        ).fetchone()
        return None if row is None else MemoryRecord.from_row(row)

    def by_ids(
        self, ids: Sequence[int], *, tenant_id: str | None = None, user_id: str | None = None
    ) -> list[MemoryRecord]:
        """The memories among ``ids`` that exist (and are the owner's), by id."""
        if not ids:
            return []
        where = f"id IN ({_marks(len(ids))})"
        params: list[Any] = list(ids)
        # "+" keeps SQLite on the rowid lookups: the (tenant, user) index would scan
        # every memory of the user first.
        if tenant_id is not None:
            where += " AND +tenant_id = ?"
            params.append(tenant_id)
        if user_id is not None:
            where += " AND +user_id = ?"
            params.append(user_id)
        cursor = self._conn.cursor()
        cursor.row_factory = None  # plain tuples: from_values reads them by position
        rows = cursor.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {where} ORDER BY id", params
        ).fetchall()
        return [MemoryRecord.from_values(row) for row in rows]

    def lines(self, ids: Sequence[int], tenant_id: str, user_id: str) -> list[MemoryLine]:
        """The id, session and text of the user's memories among ``ids``."""
        if not ids:
            return []
        cursor = self._conn.cursor()
        cursor.row_factory = None  # plain tuples, in MemoryLine's order
        rows = cursor.execute(
            f"SELECT {_LINE} FROM memories WHERE id IN ({_marks(len(ids))})"
            " AND +tenant_id = ? AND +user_id = ? ORDER BY id",  # "+": see by_ids
            [*ids, tenant_id, user_id],
        ).fetchall()
        return [MemoryLine._make(row) for row in rows]

    def stamps(self, ids: Sequence[int], tenant_id: str, user_id: str) -> list[MemoryStamp]:
        """The id, text and times of the user's memories among ``ids``."""
        if not ids:
            return []
        cursor = self._conn.cursor()
        cursor.row_factory = None  # plain tuples, in MemoryStamp's order
        rows = cursor.execute(
            f"SELECT {STAMP_COLUMNS} FROM memories WHERE id IN ({_marks(len(ids))})"
            " AND +tenant_id = ? AND +user_id = ? ORDER BY id",  # "+": see by_ids
            [*ids, tenant_id, user_id],
        ).fetchall()
        return [MemoryStamp._make(row) for row in rows]

    def at_positions(
        self, tenant_id: str, user_id: str, places: Sequence[tuple[str, int]]
    ) -> list[MemoryLine]:
        """The user's memories at (session, position) ``places``."""
        if not places:
            return []
        # CROSS JOIN: one index lookup per place (an IN list would scan the user's rows).
        columns = ", ".join(f"m.{column}" for column in _LINE.split(", "))
        rows = self._conn.execute(
            f"SELECT {columns} FROM (VALUES {_pairs(len(places))}) AS p"
            " CROSS JOIN memories AS m ON m.tenant_id = ? AND m.user_id = ?"
            " AND m.session_id = p.column1 AND m.session_position = p.column2",
            [*(value for place in places for value in place), tenant_id, user_id],
        ).fetchall()
        return [MemoryLine(*row) for row in rows]

    def said_in(
        self, tenant_id: str, user_id: str, since: str, until: str, limit: int
    ) -> list[MemoryLine]:
        """The user's newest memories said in ``[since, until)``, newest first."""
        rows = self._conn.execute(
            f"SELECT {_LINE} FROM memories WHERE tenant_id = ? AND user_id = ?"
            f" AND {SAID_TIME_SQL} >= ? AND {SAID_TIME_SQL} < ?"
            " ORDER BY id DESC LIMIT ?",
            [tenant_id, user_id, since, until, limit],
        ).fetchall()
        return [MemoryLine(*row) for row in rows]

    def page(
        self,
        tenant_id: str,
        user_id: str,
        window: ReadWindow,
        limit: int,
        offset: int,
        contains: str = "",
    ) -> tuple[list[MemoryRecord], int]:
        """The user's memories in ``window``, newest first; and how many in all."""
        extra, params = window_sql(window)
        where = f"tenant_id = ? AND user_id = ?{extra}"
        args: list[Any] = [tenant_id, user_id, *params]
        if contains:
            where += " AND instr(lower(text), lower(?)) > 0"
            args.append(contains)
        total = int(
            self._conn.execute(f"SELECT COUNT(*) FROM memories WHERE {where}", args).fetchone()[0]
        )
        rows = self._conn.execute(
            f"SELECT * FROM memories WHERE {where} "
            "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
            (*args, limit if limit > 0 else -1, offset),
        ).fetchall()
        return [MemoryRecord.from_row(row) for row in rows], total

    def in_order(self, tenant_id: str, user_id: str | None) -> list[MemoryRecord]:
        """Every memory of the user (or tenant), oldest first."""
        where, params = _owner(tenant_id, user_id)
        rows = self._conn.execute(
            f"SELECT * FROM memories WHERE {where} ORDER BY created_at, id", params
        ).fetchall()
        return [MemoryRecord.from_row(row) for row in rows]

    def newest_ids(self, tenant_id: str, user_id: str, limit: int) -> list[int]:
        """Ids of the user's newest memories."""
        rows = self._conn.execute(
            "SELECT id FROM memories WHERE tenant_id = ? AND user_id = ? "
            "ORDER BY created_at DESC, id DESC LIMIT ?",
            (tenant_id, user_id, limit),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def latest_said_current(self, tenant_id: str, user_id: str, limit: int) -> list[MemoryRecord]:
        """The user's current memories said last."""
        rows = self._conn.execute(
            "SELECT * FROM memories WHERE tenant_id = ? AND user_id = ? AND valid_until IS NULL "
            "ORDER BY said_at DESC, id DESC LIMIT ?",
            (tenant_id, user_id, limit),
        ).fetchall()
        return [MemoryRecord.from_row(row) for row in rows]

    def texts_in_session(
        self, tenant_id: str, user_id: str, session_id: str | None
    ) -> list[tuple[int, str]]:
        """(id, text) of the user's memories of one session."""
        rows = self._conn.execute(
            "SELECT id, text FROM memories WHERE tenant_id = ? AND user_id = ? "
            "AND session_id IS ? ORDER BY id",
            (tenant_id, user_id, session_id),
        ).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows]

    def count(self, tenant_id: str) -> int:
        """How many memories the tenant has."""
        row = self._conn.execute(
            "SELECT COUNT(*) FROM memories WHERE tenant_id = ?", (tenant_id,)
        ).fetchone()
        return int(row[0])

    def label(self, ids: Sequence[int], tags: Sequence[str], importance: float | None) -> None:
        """Set the tags and importance of some memories."""
        self._conn.executemany(
            "UPDATE memories SET tags = ?, importance = ? WHERE id = ?",
            [(json.dumps(list(tags)), importance, i) for i in ids],
        )

    def update_fields(
        self,
        memory_id: int,
        *,
        tags: Sequence[Any] | None,
        importance: float | None,
        metadata: Mapping[str, Any],
        source: str | None,
    ) -> None:
        """Replace a memory's tags, importance, metadata and source."""
        self._conn.execute(
            "UPDATE memories SET tags = ?, importance = ?, metadata = ?, source = ? WHERE id = ?",
            (
                None if tags is None else json.dumps(list(tags)),
                importance,
                json.dumps(dict(metadata), ensure_ascii=False),
                source,
                memory_id,
            ),
        )

    def delete(
        self, tenant_id: str, user_id: str, selection: MemorySelection, *, dry_run: bool = False
    ) -> list[int]:
        """Delete (or list) the user's selected memories; their ids."""
        clauses = ["tenant_id = ?", "user_id = ?"]
        params: list[Any] = [tenant_id, user_id]
        if selection.ids is not None:
            clauses.append(f"id IN ({_marks(len(selection.ids))})")
            params.extend(selection.ids)
        else:
            for value, clause in (
                (selection.session_id, "session_id = ?"),
                (selection.source, "source = ?"),
                (selection.before, "created_at < ?"),
                (selection.after, "created_at > ?"),
            ):
                if value is not None:
                    clauses.append(clause)
                    params.append(value)
        where = " AND ".join(clauses)
        ids = [
            int(row[0])
            for row in self._conn.execute(
                f"SELECT id FROM memories WHERE {where} ORDER BY id", params
            ).fetchall()
        ]
        if ids and not dry_run:
            self._conn.execute(f"DELETE FROM memories WHERE {where}", params)
        return ids

    def delete_derived(self, tenant_id: str, user_id: str, turn_ids: Sequence[int]) -> list[int]:
        """Delete the user's memories drawn from some turns; their ids."""
        if not turn_ids:
            return []
        where = f"tenant_id = ? AND user_id = ? AND history_id IN ({_marks(len(turn_ids))})"
        params = (tenant_id, user_id, *turn_ids)
        ids = [
            int(r[0])
            for r in self._conn.execute(
                f"SELECT id FROM memories WHERE {where} ORDER BY id", params
            )
        ]
        self._conn.execute(f"DELETE FROM memories WHERE {where}", params)
        return ids

    def current_on_attribute(
        self, tenant_id: str, user_id: str, attribute: str, *, besides: int
    ) -> list[int]:
        """Ids of the user's current memories on ``attribute`` but ``besides``."""
        return [
            int(r[0])
            for r in self._conn.execute(
                "SELECT id FROM memories WHERE tenant_id = ? AND user_id = ? AND attribute = ? "
                "AND valid_until IS NULL AND id != ?",
                (tenant_id, user_id, attribute, besides),
            )
        ]

    def said_later_on_attribute(
        self, tenant_id: str, user_id: str, attribute: str, *, besides: int, said_after: str
    ) -> tuple[int, str] | None:
        """The current memory on ``attribute`` said last, when said after ``said_after``."""
        row = self._conn.execute(
            "SELECT id, said_at FROM memories WHERE tenant_id = ? AND user_id = ? "
            "AND attribute = ? AND valid_until IS NULL AND id != ? AND said_at > ? "
            "ORDER BY said_at DESC, id DESC LIMIT 1",
            (tenant_id, user_id, attribute, besides, said_after),
        ).fetchone()
        return None if row is None else (int(row["id"]), str(row["said_at"]))

    def current_said_by(self, tenant_id: str, user_id: str, said_at: str) -> list[MemoryRecord]:
        """The user's current memories said at or before ``said_at``, said last first."""
        rows = self._conn.execute(
            "SELECT * FROM memories WHERE tenant_id = ? AND user_id = ? "
            "AND valid_until IS NULL AND said_at <= ? ORDER BY said_at DESC, id DESC",
            (tenant_id, user_id, said_at),
        ).fetchall()
        return [MemoryRecord.from_row(row) for row in rows]

    def close(self, ids: Sequence[int], until: str, superseded_by: int | None) -> None:
        """Mark memories superseded."""
        self._conn.executemany(
            "UPDATE memories SET valid_until = ?, superseded_by = ? WHERE id = ?",
            [(until, superseded_by, memory_id) for memory_id in ids],
        )

    def revisions(self, memory_id: int) -> list[Revision]:
        """The memory's recorded edits, oldest first."""
        rows = self._conn.execute(
            "SELECT * FROM memory_revisions WHERE memory_id = ? ORDER BY id", (memory_id,)
        ).fetchall()
        return [Revision.from_row(row) for row in rows]

    def last_revised_at(self, memory_id: int) -> str | None:
        """When the memory was last edited."""
        row = self._conn.execute(
            "SELECT MAX(created_at) FROM memory_revisions WHERE memory_id = ?", (memory_id,)
        ).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def add_revision(self, revision: Revision) -> None:
        """Record one edit of a memory."""
        self._conn.execute(
            "INSERT INTO memory_revisions (memory_id, changed_fields, diff, created_at) "
            "VALUES (?, ?, ?, ?)",
            (
                revision.memory_id,
                json.dumps(revision.changed_fields),
                json.dumps(revision.diff, ensure_ascii=False),
                revision.created_at,
            ),
        )


def _owner(tenant_id: str, user_id: str | None) -> tuple[str, list[Any]]:
    if user_id is None:
        return "tenant_id = ?", [tenant_id]
    return "tenant_id = ? AND user_id = ?", [tenant_id, user_id]
