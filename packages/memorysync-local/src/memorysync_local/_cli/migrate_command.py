"""``memorysync-local migrate --from PATH --to URL``: a SQLite file's data into PostgreSQL.

The copy itself is the PostgreSQL backend's (``_storage.postgres.importer``); this
module checks the arguments, reports progress on standard error (a line per table
rewritten in place on a terminal, one line per table otherwise) and a summary.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from typing import Any, TextIO

from memorysync_local._storage.errors import StorageError
from memorysync_local._storage.target import backend_of, shown


def add_migrate_command(commands: Any) -> None:
    """Add ``migrate`` to the ``memorysync-local`` parser."""
    text = (
        "copy every memory, transcript, pending job and vector of a SQLite file into an "
        "empty PostgreSQL database, ids included (one transaction)"
    )
    migrate = commands.add_parser("migrate", help=text, description=text)
    migrate.add_argument(
        "--from", dest="source", required=True, metavar="PATH", help="the SQLite file to read"
    )
    migrate.add_argument(
        "--to",
        dest="target",
        required=True,
        metavar="URL",
        help="an empty PostgreSQL database, postgresql://USER@HOST:PORT/DB (the password "
        "from PGPASSWORD or ~/.pgpass)",
    )


def run_migrate(args: argparse.Namespace, err: TextIO | None = None) -> int:
    """Run ``migrate``; the exit status (2 for bad arguments or a refused target)."""
    err = err or sys.stderr
    source, target = str(args.source), str(args.target)
    if backend_of(target) != "postgresql":
        print(f"memorysync-local: --to must be a postgresql:// URL, not {target!r}", file=err)
        return 2
    if backend_of(source) != "sqlite" or source == ":memory:" or not os.path.isfile(source):
        print(f"memorysync-local: --from must be a SQLite file; {source!r} is not", file=err)
        return 2
    try:
        # The backend (and psycopg) load only for this command: the postgres extra.
        importer = importlib.import_module("memorysync_local._storage.postgres.importer")
    except ModuleNotFoundError as exc:
        if exc.name not in ("psycopg", "psycopg_pool"):
            raise
        print(
            "memorysync-local: migrate needs the postgres extra: "
            "pip install 'memorysync-local[postgres]'",
            file=err,
        )
        return 2
    progress = _Progress(err)
    started = time.perf_counter()
    try:
        copied: dict[str, int] = importer.import_sqlite(source, target, progress=progress)
    except StorageError as exc:
        progress.finish()
        print(f"memorysync-local: {exc}", file=err)
        return 2
    progress.finish()
    counts = ", ".join(f"{count:,} {table}" for table, count in copied.items() if count)
    print(
        f"memorysync-local: moved {counts or 'nothing'} from {source} into {shown(target)} "
        f"in {time.perf_counter() - started:.1f} s",
        file=err,
    )
    return 0


class _Progress:
    """``memorysync-local: copying memories 52,000 / 100,000``: rewritten in place on a
    terminal, else printed once per table when it is done."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._live = stream.isatty()
        self._open = False

    def __call__(self, table: str, done: int, total: int) -> None:
        line = f"memorysync-local: copying {table} {done:,} / {total:,}"
        if self._live:
            self._stream.write("\r" + line)
            self._open = True
            if done >= total:
                self._stream.write("\n")
                self._open = False
        elif done >= total:
            self._stream.write(line + "\n")
        self._stream.flush()

    def finish(self) -> None:
        if self._open:
            self._stream.write("\n")
            self._stream.flush()
            self._open = False
