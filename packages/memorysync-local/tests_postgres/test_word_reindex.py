"""The word index's re-index at start on PostgreSQL with several server processes.

Three processes open a database whose word index another analyzer made: one takes the
re-index lock and makes every memory's terms again, the others wait for it and find
the work done (issue 34, item 2).
"""

from __future__ import annotations

import subprocess
import sys

import psycopg

from memorysync_local._storage.postgres import open_postgres
from memorysync_local._storage.reindex import Reindex
from memorysync_local._text.analyzer import ANALYZER_VERSION, index_text

MEMORIES = 3_000


def _stale(url: str) -> None:
    """A database an older analyzer indexed: its version, and terms no prompt matches."""
    open_postgres(url).close()
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO memories (tenant_id, user_id, text, origin, created_at, said_at) "
            "SELECT 'local', 'ana', 'Plays the violin number ' || i, 'add', '2026', '2026' "
            "FROM generate_series(1, %s) AS i",
            (MEMORIES,),
        )
        conn.execute("UPDATE memories SET stems = 'stale'")
        conn.execute("UPDATE meta SET value = 'words-0/old' WHERE key = %s", (Reindex.DONE,))


def test_of_three_processes_starting_together_one_re_indexes(postgres_url: str) -> None:
    _stale(postgres_url)
    code = (
        "import sys; from memorysync_local._storage.postgres import open_postgres; "
        "open_postgres(sys.argv[1]).close()"
    )
    starts = [
        subprocess.Popen(
            [sys.executable, "-c", code, postgres_url], stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    errors = []
    for process in starts:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        errors.append(err)
    done = [err for err in errors if f"re-indexed the words of {MEMORIES:,} memories" in err]
    assert len(done) == 1, errors
    with psycopg.connect(postgres_url) as conn:
        stems = {row[0] for row in conn.execute("SELECT DISTINCT stems FROM memories")}
        recorded = conn.execute("SELECT value FROM meta WHERE key = %s", (Reindex.DONE,)).fetchone()
    assert stems == {index_text("Plays the violin number 1")}
    assert recorded == (ANALYZER_VERSION,)
