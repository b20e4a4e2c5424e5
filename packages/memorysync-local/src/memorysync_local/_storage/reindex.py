"""The word index's re-index at start, as both backends run it: its records and its
progress lines.

``meta`` holds ``word_analyzer``, the analyzer version of a finished word index, and
while a re-index is under way ``word_reindex``: that version and the last memory id
done (``"<version>\\t<id>"``). A backend re-indexes when ``word_analyzer`` is not the
running analyzer's, committing each batch with its progress: a start after a kill
resumes from the recorded id when the version is still the running one.
"""

from __future__ import annotations

import sys
from typing import TextIO

BATCH = 2_000


class Reindex:
    """One re-index's bookkeeping: where to resume, what to record, what to print."""

    DONE = "word_analyzer"
    UNDER_WAY = "word_reindex"

    def __init__(self, version: str, *, out: TextIO | None = None, batch: int = BATCH) -> None:
        self.version = version
        self.batch = batch
        self._out = out
        self._done = 0
        self._total = 0

    def resume_from(self, recorded: str | None) -> int | None:
        """The memory id to go on after, from a ``word_reindex`` record; None when there
        is none or another analyzer wrote it (start from scratch)."""
        if recorded is None:
            return None
        version, _, last = recorded.rpartition("\t")
        if version != self.version or not last.isdigit():
            return None
        return int(last)

    def progress(self, last: int) -> str:
        """The ``word_reindex`` record for a re-index done up to memory id ``last``."""
        return f"{self.version}\t{last}"

    def begin(self, last: int, left: int) -> None:
        """Print what is to be done (nothing for an empty database)."""
        self._total = left
        if left:
            where = f", resuming after memory {last:,}" if last else ""
            self._say(f"re-indexing words for analyzer {self.version}{where}: {left:,} memories")

    def advance(self, rows: int) -> None:
        """A batch of ``rows`` memories is committed."""
        self._done += rows
        self._say(f"re-indexing words: {self._done:,} / {self._total:,} memories")

    def finish(self) -> int:
        """The re-index is recorded as done; how many memories it indexed."""
        if self._done:
            self._say(f"re-indexed the words of {self._done:,} memories")
        return self._done

    def _say(self, line: str) -> None:
        stream = self._out if self._out is not None else sys.stderr
        stream.write(f"memorysync-local: {line}\n")
        stream.flush()
