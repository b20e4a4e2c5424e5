"""The Python steps of the schema's migrations: filling what a new version adds for
the memories a file already holds.

Each runs inside its migration's transaction, so an interrupted upgrade leaves the
file as it was; a large one shows a progress bar (``_storage.batches``).
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from itertools import pairwise
from typing import Any, TextIO

from memorysync_local._recall.words import index_text, memory_stems, owner_token
from memorysync_local._storage.batches import BATCH, in_batches
from memorysync_local._text.attributes import classify, is_multi_valued


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
