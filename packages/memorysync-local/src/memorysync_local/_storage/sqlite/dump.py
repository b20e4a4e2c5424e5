"""Every row of a SQLite database, table by table, for moving it to another backend.

``memorysync-local migrate --from PATH --to URL`` reads a file through this (opened
read-only: the source is never changed; every read in one transaction, so one snapshot
of the file, whatever a server writes meanwhile) and writes the rows with their ids, so
that every reference between them (a fact's turn, a superseded fact's successor, a
client ref's memories) stays true in the new database.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from memorysync_local._storage.errors import StorageError

# The tables that hold data, in the order a copy writes them (referenced rows first).
# The word index (memories_stems) is left out: it is derived from memories.
DATA_TABLES = (
    "meta",
    "memories",
    "history",
    "turn_receipts",
    "client_refs",
    "usage",
    "extraction_jobs",
    "vector_changes",
    "memory_vectors",
    "memory_revisions",
)
BATCH = 2_000


class SqliteDump:
    """A read-only view of one SQLite database file's rows, as they were when it opened.

    Example:
        ```python
        with SqliteDump("memorysync.db") as dump:
            for batch in dump.rows("memories"):
                ...
        ```
    """

    def __init__(self, path: str) -> None:
        file = Path(path)
        if not file.is_file():
            raise StorageError(f"{path} is not a file", detail="no such file")
        uri = file.resolve().as_uri() + "?mode=ro"
        try:
            self._conn = sqlite3.connect(
                uri, uri=True, check_same_thread=False, isolation_level=None, timeout=30
            )
            self._conn.row_factory = sqlite3.Row
            # One read transaction for every read that follows: its first read fixes the
            # snapshot (a WAL file keeps serving writers meanwhile), so a server writing
            # the file during a copy changes nothing of it.
            self._conn.execute("BEGIN")
            found = self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            self._tables = {str(row[0]) for row in found}
        except sqlite3.Error as exc:
            self.close()
            raise StorageError(f"cannot read {path} ({exc})", detail=str(exc)) from exc
        if "memories" not in self._tables:
            self.close()
            raise StorageError(f"{path} is not a memorysync-local database", detail="no memories")

    def __enter__(self) -> SqliteDump:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()
            self._conn = None  # type: ignore[assignment]

    def tables(self) -> list[str]:
        """The data tables this file has, in copy order."""
        return [table for table in DATA_TABLES if table in self._tables]

    def count(self, table: str) -> int:
        """How many rows ``table`` holds."""
        self._known(table)
        with closing(self._conn.execute(f"SELECT COUNT(*) FROM {table}")) as cursor:
            return int(cursor.fetchone()[0])

    def rows(self, table: str, batch: int = BATCH) -> Iterator[list[dict[str, Any]]]:
        """The rows of ``table`` in batches, by rowid (each row a dict by column)."""
        self._known(table)
        last = None
        while True:
            params: tuple[Any, ...] = (batch,) if last is None else (last, batch)
            after = "" if last is None else "WHERE rowid > ? "
            sql = f"SELECT rowid AS _rowid, * FROM {table} {after}ORDER BY rowid LIMIT ?"
            with closing(self._conn.execute(sql, params)) as cursor:
                found = [dict(row) for row in cursor.fetchall()]
            if not found:
                return
            last = found[-1]["_rowid"]
            for row in found:
                del row["_rowid"]
            yield found

    def next_ids(self) -> dict[str, int]:
        """Per table, the highest id it ever gave (``sqlite_sequence``: deleted rows'
        ids are not reused)."""
        if "sqlite_sequence" not in self._tables:
            return {}
        with closing(self._conn.execute("SELECT name, seq FROM sqlite_sequence")) as cursor:
            return {str(name): int(seq) for name, seq in cursor.fetchall()}

    def _known(self, table: str) -> None:
        if table not in DATA_TABLES or table not in self._tables:
            raise ValueError(f"no data table {table!r} in this file")
