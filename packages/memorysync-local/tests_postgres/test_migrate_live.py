"""``migrate`` from a SQLite file a server keeps writing, and into a target that is not
empty (issue 33 items 3 and 4).

The writes happen while the copy runs, at a fixed point: when the copy reports that it
has finished the memories table (its progress line on standard error), a server on the
same file stores a new fact with its turn and erases a user. Before the fix the file
was read table by table, each read its own snapshot: the target got the new turn
without its fact, and the erased user's memories without their transcript.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import psycopg

from memorysync_local import embedded
from memorysync_local._cli import build_parser
from memorysync_local._cli.migrate_command import run_migrate
from memorysync_local._plans import Caller
from memorysync_local._service.users_data import export_user, forget_user
from memorysync_local._storage.target import open_storage

CALLER = Caller("k", "local", False, None)


def append(server: Any, user: str, session: str, *texts: str) -> None:
    """User turns through the transcript route's operation (facts extracted inline)."""
    server.store.append_history(
        CALLER,
        user_id=user,
        session_id=session,
        source="t",
        turns=[{"role": "user", "content": text} for text in texts],
        extract=True,
        metadata=None,
    )


def exports(target: str) -> dict[str, Any]:
    """Every user's export as the CLI writes it (without its time)."""
    storage = open_storage(target)
    try:
        found = {}
        for user in ("ana", "bo"):
            data = export_user(storage, "local", user)
            data.pop("exported_at")
            found[user] = data
        return found
    finally:
        storage.close()


class WritesDuringTheCopy(io.StringIO):
    """Standard error of ``migrate``: once the memories are copied, a server on the
    source file stores a fact with its turn and erases ``bo``."""

    def __init__(self, server: Any) -> None:
        super().__init__()
        self._server = server
        self.wrote = False

    def write(self, text: str) -> int:
        if "copying memories" in text and not self.wrote:
            self.wrote = True
            append(self._server, "ana", "autogen::s2", "I moved to Madrid.")
            assert forget_user(self._server.store.db, "local", "bo")["memories"] == 1
        return super().write(text)


def migrate(source: str, target: str, err: io.StringIO) -> int:
    args = build_parser().parse_args(["migrate", "--from", source, "--to", target])
    return run_migrate(args, err)


async def test_a_file_written_during_the_copy_is_copied_as_one_snapshot(
    tmp_path: Path, postgres_url: str
) -> None:
    db = str(tmp_path / "memorysync.db")
    with embedded(db) as server:
        append(server, "ana", "autogen::s1", "I live in Lisbon.", "I am allergic to peanuts.")
        append(server, "bo", "ag2::x", "I work as a nurse.")
        before = exports(db)
        assert [m["state"] for m in before["ana"]["memories"]] == ["current", "current"]
        err = WritesDuringTheCopy(server)
        assert migrate(db, postgres_url, err) == 0, err.getvalue()
        assert err.wrote
        after_in_file = exports(db)
    # The file has the writes; the target is the file as it was when the copy began.
    assert "Moved to Madrid" in [m["text"] for m in after_in_file["ana"]["memories"]]
    assert after_in_file["bo"]["memories"] == []
    assert exports(postgres_url) == before
    with psycopg.connect(postgres_url) as conn:
        orphans = conn.execute(
            "SELECT COUNT(*) FROM memories m WHERE m.history_id IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM history h WHERE h.id = m.history_id)"
        ).fetchone()
    assert orphans == (0,)


async def test_a_target_with_any_row_left_is_refused_with_status_2_naming_it(
    tmp_path: Path, postgres_url: str
) -> None:
    db = str(tmp_path / "memorysync.db")
    with embedded(db) as server:
        server.store.add_turn(
            CALLER, user_id="ana", text="I live in Lisbon.", role="user", speaker="s",
            occurred_at=None, metadata=None, source="t",
        )  # fmt: skip
    # A server on the target once answered one add_turn: a receipt and a quota count,
    # no memory (filler), no turn.
    with embedded(postgres_url) as leftover:
        answer = leftover.store.add_turn(
            CALLER, user_id="cy", text="ok", role="user", speaker="s2",
            occurred_at=None, metadata=None, source="t",
        )  # fmt: skip
        assert answer["processing_status"] == "skipped_low_value"
    err = io.StringIO()
    assert migrate(db, postgres_url, err) == 2
    said = err.getvalue()
    assert "already holds turn_receipts (1 row), usage (1 row)" in said
    assert "migrate copies into an empty database only" in said
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT COUNT(*) FROM memories").fetchone() == (0,)
        assert conn.execute("SELECT COUNT(*) FROM turn_receipts").fetchone() == (1,)
