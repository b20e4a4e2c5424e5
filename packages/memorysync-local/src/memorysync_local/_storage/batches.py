"""Working through many rows in batches, with a progress bar for the large jobs.

A migration that fills a new index, or a start that embeds the memories stored
without a vector, may take a while on a large database; from ``PROGRESS_FROM``
rows on, a progress bar on standard error says how far it got, so it does not
look like a hung server.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

BATCH = 5_000
# Below this many memories the work is quick enough to run silently.
PROGRESS_FROM = 10_000


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
