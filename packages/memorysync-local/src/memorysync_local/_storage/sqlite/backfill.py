"""The Python steps of the schema's migrations: filling what a new version adds for
the memories a file already holds.

Each runs inside its migration's transaction, so an interrupted upgrade leaves the
file as it was; a large one shows a progress bar (``_storage.batches``).


The word index is re-made apart from the numbered migrations, whenever the analyzer
that made it is not the running one (:func:`reindex_words`).
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from itertools import pairwise
from typing import Any, TextIO

from memorysync_local._extraction.attributes import classify, is_multi_valued
from memorysync_local._storage.batches import BATCH, in_batches
from memorysync_local._storage.reindex import Reindex
from memorysync_local._storage.sqlite.word_index import STEMS_DDL, memory_stems
from memorysync_local._text.analyzer import ANALYZER_VERSION, index_text
from memorysync_local._text.owner import owner_token


def backfill_stems(conn: sqlite3.Connection, *, out: TextIO | None = None) -> int:
    """Schema 3: index the word stems of every memory; how many were indexed."""
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


def backfill_attributes(conn: sqlite3.Connection) -> int:
    """Schema 7: classify every stored memory (and index its attribute's words with its
    stems), then keep only the newest current fact per user on each single-valued
    attribute (each older one superseded by the next); how many were classified."""
    found = [
        (key[0], int(row[0]), str(row[1]))
        for row in conn.execute("SELECT id, text FROM memories")
        if (key := classify(str(row[1]))) is not None
    ]
    conn.executemany(
        "UPDATE memories SET attribute = ? WHERE id = ?", [(key, i) for key, i, _ in found]
    )
    conn.executemany(
        "UPDATE memories_stems SET stems = ? WHERE rowid = ?",
        [(memory_stems(text, key), i) for key, i, text in found],
    )
    groups: dict[tuple[str, str, str], list[tuple[str, int]]] = defaultdict(list)
    for row in conn.execute(
        "SELECT tenant_id, user_id, attribute, said_at, id FROM memories "
        "WHERE attribute IS NOT NULL ORDER BY said_at, id"
    ):
        if not is_multi_valued(str(row[2])):
            groups[(row[0], row[1], row[2])].append((str(row[3]), int(row[4])))
    conn.executemany(
        "UPDATE memories SET valid_until = ?, superseded_by = ? WHERE id = ?",
        [
            (said, newer, older)
            for facts in groups.values()
            for (_, older), (said, newer) in pairwise(facts)
        ],
    )
    return len(found)


def reindex_words(conn: sqlite3.Connection, *, out: TextIO | None = None) -> int:
    """Re-make the word index if the running analyzer did not make it; how many
    memories were indexed (0 when it is current).

    ``meta`` records the analyzer of a finished index (``word_analyzer``) and of one
    under way with the last memory id it reached (``word_reindex``). A start from
    scratch re-creates the table (:data:`~.word_index.STEMS_DDL`); each batch of
    memories then commits with its progress, so a process killed half-way resumes
    where it stopped. Memories written meanwhile are indexed by the insert trigger,
    with the running analyzer.
    """
    job = Reindex(ANALYZER_VERSION, out=out)

    def meta(key: str) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def remember(key: str, value: str) -> None:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    if meta(Reindex.DONE) == ANALYZER_VERSION:
        return 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        last = job.resume_from(meta(Reindex.UNDER_WAY))
        if last is None:
            conn.execute("DROP TABLE IF EXISTS memories_stems")
            conn.execute(STEMS_DDL)
            last = 0
            remember(Reindex.UNDER_WAY, job.progress(last))
        left = int(
            conn.execute("SELECT COUNT(*) FROM memories WHERE id > ?", (last,)).fetchone()[0]
        )
    except BaseException:
        conn.rollback()
        raise
    conn.commit()
    job.begin(last, left)
    # (A file made by a tool that stops at an older schema has no attributes yet.)
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(memories)")}
    attribute = "attribute" if "attribute" in columns else "NULL"
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows = conn.execute(
                f"SELECT id, tenant_id, user_id, text, {attribute} FROM memories "
                "WHERE id > ? ORDER BY id LIMIT ?",
                (last, job.batch),
            ).fetchall()
            if rows:
                high = int(rows[-1][0])
                # Rows the insert trigger wrote meanwhile are made again, alike.
                conn.execute(
                    "DELETE FROM memories_stems WHERE rowid > ? AND rowid <= ?", (last, high)
                )
                conn.executemany(
                    "INSERT INTO memories_stems (rowid, owner, stems) VALUES (?, ?, ?)",
                    [
                        (int(r[0]), owner_token(r[1], r[2]), memory_stems(str(r[3]), r[4]))
                        for r in rows
                    ],
                )
                last = high
                remember(Reindex.UNDER_WAY, job.progress(last))
            else:
                remember(Reindex.DONE, ANALYZER_VERSION)
                conn.execute("DELETE FROM meta WHERE key = ?", (Reindex.UNDER_WAY,))
        except BaseException:
            conn.rollback()
            raise
        conn.commit()
        if not rows:
            return job.finish()
        job.advance(len(rows))
