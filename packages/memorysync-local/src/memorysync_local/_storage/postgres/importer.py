"""Moving a SQLite database's data into an empty PostgreSQL database.

``memorysync-local migrate --from PATH --to URL`` calls :func:`import_sqlite`. The
source file is first brought to the current SQLite schema (as a server start would),
then read read-only, as one snapshot (one read transaction over every table); every
row is copied with its id (``COPY``), the word index is computed as inserts compute
it, vectors go to pgvector, and each id sequence resumes past the highest id the file
ever gave. It is one transaction: a copy that fails half-way leaves the target as
empty as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from memorysync_local._storage.errors import StorageError
from memorysync_local._storage.postgres.database import migrate, run_locked
from memorysync_local._storage.postgres.errors import redact, translated
from memorysync_local._storage.postgres.schema import VECTOR_STATEMENTS
from memorysync_local._storage.postgres.vectors import to_literal
from memorysync_local._storage.postgres.word_index import memory_stems
from memorysync_local._storage.sqlite.dump import SqliteDump
from memorysync_local._storage.target import open_storage

Progress = Callable[[str, int, int], None]

_COLUMNS: dict[str, tuple[str, ...]] = {
    "memories": (
        "id", "tenant_id", "user_id", "text", "kind", "source", "session_id", "metadata",
        "tags", "importance", "origin", "history_id", "request_id", "created_at", "said_at",
        "attribute", "valid_until", "superseded_by", "speaker", "session_position",
    ),
    "history": (
        "id", "tenant_id", "user_id", "session_id", "source", "role", "content",
        "content_hash", "seq", "occurred_at", "payload", "idempotency_key", "created_at",
        "sort_key",
    ),
    "turn_receipts": (
        "id", "tenant_id", "user_id", "speaker", "occurred_at", "text_hash", "request_id",
        "received_at",
    ),
    "client_refs": ("tenant_id", "user_id", "client_ref", "memory_ids"),
    "usage": ("key_id", "month", "adds", "refused"),
    "extraction_jobs": ("id", "text", "context", "created_at"),
    "vector_changes": ("tenant_id", "user_id", "added", "removed"),
    "memory_vectors": ("memory_id", "model", "vector"),
    "memory_revisions": ("id", "memory_id", "changed_fields", "diff", "created_at"),
}  # fmt: skip
# What a row becomes in PostgreSQL: extra columns computed from the SQLite row.
_EXTRA: dict[str, tuple[str, ...]] = {
    "memories": ("stems",),
    "extraction_jobs": ("tenant_id", "user_id"),
}
_SEQUENCED = ("memories", "history", "turn_receipts", "extraction_jobs", "memory_revisions")


def _extra(table: str, row: dict[str, Any]) -> tuple[Any, ...]:
    if table == "memories":
        return (memory_stems(row["text"], row["attribute"]),)
    if table == "extraction_jobs":
        context = json.loads(row["context"])
        return (str(context["tenant_id"]), str(context["user_id"]))
    return ()


def _values(table: str, row: dict[str, Any]) -> tuple[Any, ...]:
    values = [row.get(column) for column in _COLUMNS[table]]
    if table == "memory_vectors":
        values[2] = to_literal(bytes(row["vector"]))
    return (*values, *_extra(table, row))


def import_sqlite(source: str, target: str, *, progress: Progress | None = None) -> dict[str, int]:
    """Copy every row of the SQLite file ``source`` into the empty PostgreSQL database
    ``target``; the rows copied per table. ``progress(table, done, total)`` is called
    after each batch.

    The file is read as one snapshot (:class:`SqliteDump` holds one read transaction
    over every table), so a server writing it meanwhile changes nothing of the copy.
    Raises :class:`StorageError` when the target already holds a row in any data table
    (each is named; nothing is written then), or when either side cannot be opened.
    """
    open_storage(source).close()  # brought to the current schema, as a start would
    migrate(target)
    with SqliteDump(source) as dump, translated():
        tables = dump.tables()
        totals = {table: dump.count(table) for table in tables}
        if totals.get("memory_vectors"):
            run_locked(target, VECTOR_STATEMENTS)
        copied: dict[str, int] = {}
        with psycopg.connect(target) as conn:
            _refuse_unless_empty(conn, target)
            for table in tables:
                if not totals[table]:  # (an empty vector table has no pgvector twin)
                    copied[table] = 0
                    if progress is not None:
                        progress(table, 0, 0)
                    continue
                copied[table] = _copy(conn, dump, table, totals[table], progress)
            _resume_ids(conn, dump.next_ids())
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("ANALYZE")  # plans for the new rows at once, not at autovacuum's
    return copied


def _refuse_unless_empty(conn: psycopg.Connection[Any], target: str) -> None:
    """Raise naming every data table of ``target`` that holds a row (nothing is written).

    Every table the copy writes is checked, not only memories and turns: one replay
    receipt left by a server that answered a single ``add_turn`` there would make the
    copy of its ids fail half-way.
    """
    found = []
    for table in _COLUMNS:
        exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
        if not exists or not exists[0]:
            continue  # (memory_vectors exists only once pgvector was set up)
        row = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
        count = int(row[0]) if row else 0
        if count:
            found.append(f"{table} ({count:,} row{'' if count == 1 else 's'})")
    if found:
        raise StorageError(
            f"{redact(target)} already holds {', '.join(found)}: migrate copies into an "
            "empty database only (create a new one, or drop its tables)",
            detail="target not empty",
        )


def _copy(
    conn: psycopg.Connection[Any],
    dump: SqliteDump,
    table: str,
    total: int,
    progress: Progress | None,
) -> int:
    if table == "meta":
        rows = [row for batch in dump.rows("meta") for row in batch]
        for row in rows:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (row["key"], str(row["value"])),
            )
        return len(rows)
    columns: Sequence[str] = (*_COLUMNS[table], *_EXTRA.get(table, ()))
    done = 0
    with conn.cursor() as cursor:
        names = ", ".join(columns)
        with cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
            for batch in dump.rows(table):
                for row in batch:
                    copy.write_row(_values(table, row))
                done += len(batch)
                if progress is not None:
                    progress(table, done, total)
    return done


def _resume_ids(conn: psycopg.Connection[Any], given: dict[str, int]) -> None:
    """Each identity sequence past the highest id the file gave (deleted ones included)."""
    for table in _SEQUENCED:
        row = conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}").fetchone()
        highest = max(int(row[0]) if row else 0, given.get(table, 0))
        if highest > 0:
            conn.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", (table, highest))
