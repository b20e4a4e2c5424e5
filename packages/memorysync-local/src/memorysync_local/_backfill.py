"""Filling a new index for the memories a database already holds, with progress.

A migration that adds an index over memories runs this inside its transaction,
so an interrupted upgrade leaves the file as it was. Large files print a
progress bar on standard error: the upgrade of a million memories takes a
while and should not look like a hung server.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from typing import Any, TextIO

from memorysync_local._stemming import index_text, owner_token

BATCH = 5_000
# Below this many memories the upgrade is quick enough to run silently.
PROGRESS_FROM = 10_000


def backfill_stems(conn: sqlite3.Connection, *, out: TextIO | None = None) -> int:
    """Index the word stems of every memory; returns how many memories were indexed."""
    total = int(conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0])

    def next_batch(last: int) -> list[Any]:
        return conn.execute(
            "SELECT id, tenant_id, user_id, text FROM memories WHERE id > ? ORDER BY id LIMIT ?",
            (last, BATCH),
        ).fetchall()

    def index(rows: list[Any]) -> None:
        conn.executemany(
            "INSERT INTO memories_stems (rowid, owner, stems) VALUES (?, ?, ?)",
            [(int(row[0]), owner_token(row[1], row[2]), index_text(row[3])) for row in rows],
        )

    return in_batches(next_batch, index, total=total, what="indexing word forms", out=out)


def in_batches(
    next_batch: Callable[[int], list[Any]],
    handle: Callable[[list[Any]], None],
    *,
    total: int,
    what: str,
    out: TextIO | None = None,
    progress_from: int = PROGRESS_FROM,
) -> int:
    """Hand each batch of rows to ``handle``; returns how many rows there were.

    ``next_batch(last)`` reads the rows after id ``last`` (each row's first column is
    its id, ascending). From ``progress_from`` rows on, a progress bar on ``out``
    (standard error by default) says how far it got.
    """
    stream = out if out is not None else sys.stderr
    bar = _Progress(stream, total, what) if total >= progress_from else None
    done = 0
    last = 0
    while rows := next_batch(last):
        handle(rows)
        last = int(rows[-1][0])
        done += len(rows)
        if bar is not None:
            bar.show(done)
    if bar is not None:
        bar.finish()
    return done


class _Progress:
    """``memorysync-local: indexing word forms [#####.....] 52,000 / 100,000``."""

    WIDTH = 30

    def __init__(self, stream: TextIO, total: int, what: str) -> None:
        self._stream = stream
        self._total = total
        self._what = what

    def show(self, done: int) -> None:
        filled = self.WIDTH * done // max(1, self._total)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self._stream.write(
            f"\rmemorysync-local: {self._what} [{bar}] {done:,} / {self._total:,} memories"
        )
        self._stream.flush()

    def finish(self) -> None:
        self._stream.write("\n")
        self._stream.flush()
