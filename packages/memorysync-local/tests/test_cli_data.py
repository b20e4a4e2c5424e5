"""``memorysync-local users|memories|sessions|history|export|forget|stats`` on a file."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memorysync_local._cli import build_parser, main
from memorysync_local._cli.data_commands import run_data_command


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = run_data_command(build_parser().parse_args(list(argv)), out)
    return status, out.getvalue()


def cli_json(*argv: str) -> Any:
    status, text = run(*argv, "--json")
    assert status == 0
    return json.loads(text)


@pytest.fixture
def db(make_local_server: Callable[..., Any]) -> str:
    """A database with two users of tenant ``local`` and one of another tenant."""
    srv = make_local_server(api_keys={"ms_a": "local", "ms_b": "other"}, api_key="ms_a")
    store = srv.store
    from memorysync_local._plans import KeyRing

    keys = KeyRing({"ms_a": "local", "ms_b": "other"}, (), {})
    for who, user, session, text in (
        ("ms_a", "ana", "autogen::s1", "I live in Porto. <script>alert(1)</script>"),
        ("ms_a", "ana", "autogen::s2", "I am allergic to peanuts."),
        ("ms_a", "bo", "ag2::x", "I work as a nurse."),
        ("ms_b", "ana", "autogen::s1", "I live in Oslo."),
    ):
        caller = keys.lookup(who)
        assert caller is not None
        store.append_history(
            caller, user_id=user, session_id=session, source="test", extract=True,
            metadata=None, turns=[{"role": "user", "content": text}],
        )  # fmt: skip
    return str(srv.db_path)


def test_users_sessions_memories_history_and_stats_are_tenant_scoped(db: str) -> None:
    users = cli_json("users", "--db", db)
    assert [(u["user_id"], u["memories"], u["turns"], u["sessions"]) for u in users] == [
        ("ana", 2, 2, 2),
        ("bo", 1, 1, 1),
    ]
    assert [u["user_id"] for u in cli_json("users", "--db", db, "--tenant", "other")] == ["ana"]
    sessions = cli_json("sessions", "ana", "--db", db)
    assert [(s["session_id"], s["turns"]) for s in sessions] == [
        ("autogen::s1", 1),
        ("autogen::s2", 1),
    ]
    texts = sorted(m["text"] for m in cli_json("memories", "ana", "--db", db))
    assert texts == ["Allergic to peanuts", "Lives in Porto"]
    [turn] = cli_json("history", "ana", "autogen::s1", "--db", db)
    assert turn["content"].startswith("I live in Porto.")
    assert cli_json("stats", "--db", db) == {
        "tenant_id": "local", "users": 2, "memories": 3, "turns": 3, "sessions": 3,
        "pending_jobs": 0,
    }  # fmt: skip
    status, table = run("users", "--db", db)
    assert status == 0
    assert table.splitlines()[0].split() == ["USER_ID", "MEMORIES", "TURNS", "SESSIONS"]
    assert table.splitlines()[1].split() == ["ana", "2", "2", "2"]


def test_export_to_a_file_with_progress(db: str, tmp_path: Path, capsys: Any) -> None:
    target = tmp_path / "ana.json"
    summary = cli_json("export", "ana", "--db", db, "-o", str(target), "--progress")
    assert summary == {"file": str(target), "memories": 2, "turns": 2, "sessions": 2}
    assert "exporting ana: 2/2 sessions" in capsys.readouterr().err
    data = json.loads(target.read_text("utf-8"))
    assert data["schema"] == "memorysync.users-data/1"
    assert sorted(data["transcripts"]) == ["autogen::s1", "autogen::s2"]


@pytest.mark.parametrize("existing", [False, True])
def test_an_export_file_is_private_whatever_the_umask(
    db: str, tmp_path: Path, existing: bool
) -> None:
    # Issue 26 item 4: with umask 022 an export was written -rw-r--r--; it holds a
    # user's memories and transcripts, as private as the database file (0600).
    target = tmp_path / "ana.json"
    if existing:  # a file left world-readable by an earlier export is made private too
        target.write_text("old", "utf-8")
        target.chmod(0o644)
    previous = os.umask(0o022)
    try:
        cli_json("export", "ana", "--db", db, "-o", str(target))
    finally:
        os.umask(previous)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert json.loads(target.read_text("utf-8"))["schema"] == "memorysync.users-data/1"


def test_forget_asks_unless_yes(db: str, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    # Not a terminal and no --yes: refused, nothing erased.
    assert main(["forget", "ana", "--db", db]) == 2
    assert "needs --yes" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "someone else")
    assert main(["forget", "ana", "--db", db]) == 1
    assert len(cli_json("users", "--db", db)) == 2
    monkeypatch.setattr("builtins.input", lambda prompt: "ana")
    assert main(["forget", "ana", "--db", db, "--json"]) == 0
    erased = json.loads(capsys.readouterr().out)
    assert (erased["memories"], erased["turns"], erased["sessions"]) == (2, 2, 2)
    assert cli_json("forget", "ana", "--db", db, "--yes")["memories"] == 0  # idempotent
    assert [u["user_id"] for u in cli_json("users", "--db", db)] == ["bo"]
    assert [u["user_id"] for u in cli_json("users", "--db", db, "--tenant", "other")] == ["ana"]


def test_an_unknown_user_or_session_is_said_on_stderr_and_fails(db: str, capsys: Any) -> None:
    for argv in (("memories", "nobody"), ("sessions", "nobody"), ("history", "nobody", "s")):
        assert main([*argv, "--db", db]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert "no user 'nobody' in tenant 'local'" in captured.err
    # A near miss is named; a user of another tenant is unknown here.
    assert main(["memories", "anna", "--db", db]) == 1
    assert "no user 'anna' in tenant 'local'; did you mean 'ana'?" in capsys.readouterr().err
    assert main(["sessions", "bo", "--db", db, "--tenant", "other"]) == 1
    assert "no user 'bo' in tenant 'other'" in capsys.readouterr().err
    assert main(["history", "ana", "autogen::s3", "--db", db]) == 1
    assert "user 'ana' has no session 'autogen::s3'; did you mean" in capsys.readouterr().err
    # A known user still answers as before.
    assert main(["memories", "bo", "--db", db, "--json"]) == 0


def test_a_missing_database_is_an_error_not_a_new_file(tmp_path: Path, capsys: Any) -> None:
    missing = tmp_path / "nope.db"
    assert main(["users", "--db", str(missing)]) == 2
    assert "no database" in capsys.readouterr().err
    assert not missing.exists()


def test_export_refuses_a_symbolic_link_and_leaves_its_target_alone(
    db: str, tmp_path: Path, capsys: Any
) -> None:
    # Issue 33 item 12: `export -o LINK` followed the link, overwrote the file it named
    # and made it 0600.
    victim = tmp_path / "notes.txt"
    victim.write_text("someone else's file\n", "utf-8")
    victim.chmod(0o644)
    link = tmp_path / "ana.json"
    link.symlink_to(victim)
    assert main(["export", "ana", "--db", db, "-o", str(link)]) == 2
    assert "is a symbolic link" in capsys.readouterr().err
    assert victim.read_text("utf-8") == "someone else's file\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert link.is_symlink()


def test_an_export_replaces_the_file_in_one_rename(db: str, tmp_path: Path) -> None:
    # A new file takes the name: a hard link to the old file keeps the old text, and no
    # temporary file is left beside it.
    target = tmp_path / "ana.json"
    target.write_text("old export\n", "utf-8")
    other_name = tmp_path / "kept.json"
    os.link(target, other_name)
    cli_json("export", "ana", "--db", db, "-o", str(target))
    assert other_name.read_text("utf-8") == "old export\n"
    assert json.loads(target.read_text("utf-8"))["user_id"] == "ana"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_reader_that_stops_early_ends_the_command_without_a_traceback(db: str) -> None:
    # Issue 33 item 15: `memorysync-local users | head -4` ended in a BrokenPipeError
    # traceback. The reader here has gone before the command writes a byte.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "memorysync_local._cli", "users", "--db", db],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr
    assert "BrokenPipeError" not in done.stderr
    assert done.stderr == ""
    assert done.returncode == 1
