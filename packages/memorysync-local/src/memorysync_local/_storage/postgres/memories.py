"""Memories on PostgreSQL (``MemoryTable``).

Every method that names an owner first takes that owner's lock in a write session
(:meth:`~.backend.PostgresSession.own`), so one user's writes through several processes
take turns, as every write does on SQLite.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memorysync_local._storage.postgres.word_index import memory_stems
from memorysync_local._storage.records import (
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

if TYPE_CHECKING:
    from memorysync_local._storage.postgres.session import PgSession

# Every column of a memory record: never the word index's (stems, stems_tsv), which a
# record does not carry and whose text form is costly to produce and to read.
MEMORY_COLUMNS = (
    "id, tenant_id, user_id, text, kind, source, session_id, metadata, tags, importance, "
    "origin, history_id, request_id, created_at, said_at, attribute, valid_until, "
    "superseded_by, speaker, session_position"
)
# A memory line's columns (``records.MemoryLine``).
_LINE = "id, session_id, text, speaker, session_position"
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = "abcdefghijklmnopqrstuvwxyz"


def _window(window: ReadWindow) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if not window.history:
        clauses.append("valid_until IS NULL")
    if window.since is not None:
        clauses.append(f"{SAID_TIME_SQL} >= %s")
        params.append(window.since)
    if window.until is not None:
        clauses.append(f"{SAID_TIME_SQL} < %s")
        params.append(window.until)
    return "".join(f" AND {c}" for c in clauses), params


class PostgresMemories:
    """``MemoryTable`` over one session's connection."""

    def __init__(self, session: PgSession) -> None:
        self._s = session

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[MemoryRecord]:
        return [MemoryRecord.from_row(r) for r in self._s.conn.execute(sql, params).fetchall()]

    def insert(self, memory: NewMemory) -> int:
        self._s.own(memory.tenant_id, memory.user_id)
        stems = memory_stems(memory.text, memory.attribute)
        row = self._s.conn.execute(
            "INSERT INTO memories (tenant_id, user_id, text, kind, source, session_id, "
            "metadata, origin, history_id, request_id, created_at, said_at, attribute, stems, "
            "speaker, session_position) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
            # The session's next position: the owner's lock (own, above) is held.
            "CASE WHEN %s::text IS NULL THEN NULL ELSE (SELECT COALESCE(MAX(session_position), "
            "0) + 1 FROM memories WHERE tenant_id = %s AND user_id = %s AND session_id = %s "
            "AND session_position IS NOT NULL) END) RETURNING id",
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
                stems,
                memory.speaker,
                memory.session_id,
                memory.tenant_id,
                memory.user_id,
                memory.session_id,
            ),
        ).fetchone()
        assert row is not None
        return int(row["id"])

    def get(
        self, memory_id: int, tenant_id: str, user_id: str | None = None
    ) -> MemoryRecord | None:
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = %s AND tenant_id = %s"
        params: list[Any] = [memory_id, tenant_id]
        if user_id is not None:
            sql += " AND user_id = %s"
            params.append(user_id)
        found = self._all(sql, params)
        return found[0] if found else None

    def by_ids(
        self, ids: Sequence[int], *, tenant_id: str | None = None, user_id: str | None = None
    ) -> list[MemoryRecord]:
        if not ids:
            return []
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ANY(%s)"
        params: list[Any] = [list(ids)]
        if tenant_id is not None:
            sql += " AND tenant_id = %s"
            params.append(tenant_id)
        if user_id is not None:
            sql += " AND user_id = %s"
            params.append(user_id)
        return self._all(sql + " ORDER BY id", params)

    def lines(self, ids: Sequence[int], tenant_id: str, user_id: str) -> list[MemoryLine]:
        if not ids:
            return []
        return self._lines(
            "id = ANY(%s) AND tenant_id = %s AND user_id = %s ORDER BY id",
            [list(ids), tenant_id, user_id],
        )

    def stamps(self, ids: Sequence[int], tenant_id: str, user_id: str) -> list[MemoryStamp]:
        if not ids:
            return []
        rows = self._s.conn.execute(
            f"SELECT {STAMP_COLUMNS} FROM memories"
            " WHERE id = ANY(%s) AND tenant_id = %s AND user_id = %s ORDER BY id",
            [list(ids), tenant_id, user_id],
        ).fetchall()
        return [
            MemoryStamp(
                row["id"], row["text"], row["created_at"], row["said_at"], row["valid_until"]
            )
            for row in rows
        ]

    def at_positions(
        self, tenant_id: str, user_id: str, places: Sequence[tuple[str, int]]
    ) -> list[MemoryLine]:
        if not places:
            return []
        return self._lines(
            "tenant_id = %s AND user_id = %s AND session_position IS NOT NULL"
            " AND (session_id, session_position) IN"
            " (SELECT * FROM unnest(%s::text[], %s::bigint[]))",
            [tenant_id, user_id, [place[0] for place in places], [place[1] for place in places]],
        )

    def said_in(
        self, tenant_id: str, user_id: str, since: str, until: str, limit: int
    ) -> list[MemoryLine]:
        return self._lines(
            f"tenant_id = %s AND user_id = %s AND {SAID_TIME_SQL} >= %s"
            f" AND {SAID_TIME_SQL} < %s ORDER BY id DESC LIMIT %s",
            [tenant_id, user_id, since, until, limit],
        )

    def _lines(self, where: str, params: Sequence[Any]) -> list[MemoryLine]:
        rows = self._s.conn.execute(
            f"SELECT {_LINE} FROM memories WHERE {where}",
            params,
        ).fetchall()
        return [
            MemoryLine(
                row["id"], row["session_id"], row["text"], row["speaker"], row["session_position"]
            )
            for row in rows
        ]

    def page(
        self,
        tenant_id: str,
        user_id: str,
        window: ReadWindow,
        limit: int,
        offset: int,
        contains: str = "",
    ) -> tuple[list[MemoryRecord], int]:
        extra, params = _window(window)
        where = f"tenant_id = %s AND user_id = %s{extra}"
        args: list[Any] = [tenant_id, user_id, *params]
        if contains:
            # SQLite's lower() folds ASCII letters only: the same here, whatever the locale.
            where += f" AND strpos(translate(text, '{_UPPER}', '{_LOWER}'), %s) > 0"
            args.append(contains.translate(str.maketrans(_UPPER, _LOWER)))
        conn = self._s.conn
        total_row = conn.execute(f"SELECT COUNT(*) AS n FROM memories WHERE {where}", args)
        total = int(total_row.fetchone()["n"])  # type: ignore[index]
        rows = self._all(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {where} "
            "ORDER BY created_at DESC, id DESC LIMIT %s OFFSET %s",
            [*args, limit if limit > 0 else None, max(offset, 0)],
        )
        return rows, total

    def in_order(self, tenant_id: str, user_id: str | None) -> list[MemoryRecord]:
        if user_id is None:
            return self._all(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE tenant_id = %s "
                "ORDER BY created_at, id",
                [tenant_id],
            )
        return self._all(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE tenant_id = %s AND user_id = %s "
            "ORDER BY created_at, id",
            [tenant_id, user_id],
        )

    def newest_ids(self, tenant_id: str, user_id: str, limit: int) -> list[int]:
        rows = self._s.conn.execute(
            "SELECT id FROM memories WHERE tenant_id = %s AND user_id = %s "
            "ORDER BY created_at DESC, id DESC LIMIT %s",
            (tenant_id, user_id, limit),
        ).fetchall()
        return [int(r["id"]) for r in rows]

    def latest_said_current(self, tenant_id: str, user_id: str, limit: int) -> list[MemoryRecord]:
        return self._all(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE tenant_id = %s AND user_id = %s "
            "AND valid_until IS NULL ORDER BY said_at DESC NULLS LAST, id DESC LIMIT %s",
            [tenant_id, user_id, limit],
        )

    def texts_in_session(
        self, tenant_id: str, user_id: str, session_id: str | None
    ) -> list[tuple[int, str]]:
        rows = self._s.conn.execute(
            "SELECT id, text FROM memories WHERE tenant_id = %s AND user_id = %s "
            "AND session_id IS NOT DISTINCT FROM %s ORDER BY id",
            (tenant_id, user_id, session_id),
        ).fetchall()
        return [(int(r["id"]), str(r["text"])) for r in rows]

    def count(self, tenant_id: str) -> int:
        row = self._s.conn.execute(
            "SELECT COUNT(*) AS n FROM memories WHERE tenant_id = %s", (tenant_id,)
        ).fetchone()
        return int(row["n"]) if row else 0

    def label(self, ids: Sequence[int], tags: Sequence[str], importance: float | None) -> None:
        if ids:
            self._s.conn.execute(
                "UPDATE memories SET tags = %s, importance = %s WHERE id = ANY(%s)",
                (json.dumps(list(tags)), importance, list(ids)),
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
        self._s.conn.execute(
            "UPDATE memories SET tags = %s, importance = %s, metadata = %s, source = %s "
            "WHERE id = %s",
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
        self._s.own(tenant_id, user_id)
        clauses = ["tenant_id = %s", "user_id = %s"]
        params: list[Any] = [tenant_id, user_id]
        if selection.ids is not None:
            clauses.append("id = ANY(%s)")
            params.append(list(selection.ids))
        else:
            for value, clause in (
                (selection.session_id, "session_id = %s"),
                (selection.source, "source = %s"),
                (selection.before, "created_at < %s"),
                (selection.after, "created_at > %s"),
            ):
                if value is not None:
                    clauses.append(clause)
                    params.append(value)
        where = " AND ".join(clauses)
        if dry_run:
            sql = f"SELECT id FROM memories WHERE {where}"
        else:
            sql = f"DELETE FROM memories WHERE {where} RETURNING id"
        return sorted(int(r["id"]) for r in self._s.conn.execute(sql, params).fetchall())

    def delete_derived(self, tenant_id: str, user_id: str, turn_ids: Sequence[int]) -> list[int]:
        if not turn_ids:
            return []
        self._s.own(tenant_id, user_id)
        rows = self._s.conn.execute(
            "DELETE FROM memories WHERE tenant_id = %s AND user_id = %s "
            "AND history_id = ANY(%s) RETURNING id",
            (tenant_id, user_id, list(turn_ids)),
        ).fetchall()
        return sorted(int(r["id"]) for r in rows)

    def current_on_attribute(
        self, tenant_id: str, user_id: str, attribute: str, *, besides: int
    ) -> list[int]:
        rows = self._s.conn.execute(
            "SELECT id FROM memories WHERE tenant_id = %s AND user_id = %s AND attribute = %s "
            "AND valid_until IS NULL AND id != %s ORDER BY id",
            (tenant_id, user_id, attribute, besides),
        ).fetchall()
        return [int(r["id"]) for r in rows]

    def said_later_on_attribute(
        self, tenant_id: str, user_id: str, attribute: str, *, besides: int, said_after: str
    ) -> tuple[int, str] | None:
        row = self._s.conn.execute(
            "SELECT id, said_at FROM memories WHERE tenant_id = %s AND user_id = %s "
            "AND attribute = %s AND valid_until IS NULL AND id != %s AND said_at > %s "
            "ORDER BY said_at DESC, id DESC LIMIT 1",
            (tenant_id, user_id, attribute, besides, said_after),
        ).fetchone()
        return None if row is None else (int(row["id"]), str(row["said_at"]))

    def current_said_by(self, tenant_id: str, user_id: str, said_at: str) -> list[MemoryRecord]:
        return self._all(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE tenant_id = %s AND user_id = %s "
            "AND valid_until IS NULL AND said_at <= %s ORDER BY said_at DESC, id DESC",
            [tenant_id, user_id, said_at],
        )

    def close(self, ids: Sequence[int], until: str, superseded_by: int | None) -> None:
        if ids:
            self._s.conn.execute(
                "UPDATE memories SET valid_until = %s, superseded_by = %s WHERE id = ANY(%s)",
                (until, superseded_by, list(ids)),
            )

    def revisions(self, memory_id: int) -> list[Revision]:
        rows = self._s.conn.execute(
            "SELECT * FROM memory_revisions WHERE memory_id = %s ORDER BY id", (memory_id,)
        ).fetchall()
        return [Revision.from_row(r) for r in rows]

    def last_revised_at(self, memory_id: int) -> str | None:
        row = self._s.conn.execute(
            "SELECT MAX(created_at) AS at FROM memory_revisions WHERE memory_id = %s",
            (memory_id,),
        ).fetchone()
        return None if row is None else row["at"]

    def add_revision(self, revision: Revision) -> None:
        self._s.conn.execute(
            "INSERT INTO memory_revisions (memory_id, changed_fields, diff, created_at) "
            "VALUES (%s, %s, %s, %s)",
            (
                revision.memory_id,
                json.dumps(revision.changed_fields),
                json.dumps(revision.diff, ensure_ascii=False),
                revision.created_at,
            ),
        )
