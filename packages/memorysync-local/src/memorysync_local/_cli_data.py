"""``memorysync-local users|memories|sessions|history|export|forget|stats``.

Each command opens the database file directly (``--db``; a running server may
keep serving it) and works in one tenant (``--tenant``, default ``local``). Tables
for people by default, ``--json`` for scripts. ``forget`` asks for the user id
to be typed back unless ``--yes``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from memorysync_local._db import Database
from memorysync_local._plans import DEFAULT_TENANT
from memorysync_local._users import (
    export_user,
    forget_user,
    list_sessions,
    list_users,
    memory_rows,
    stats,
    transcript,
)

DATA_COMMANDS = ("users", "memories", "sessions", "history", "export", "forget", "stats")


def add_data_commands(commands: Any) -> None:
    """Add the users'-data subcommands to the ``memorysync-local`` parser."""

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = commands.add_parser(
            name, help=help_text, description=help_text
        )
        sub.add_argument(
            "--db", default="./memorysync.db", help="SQLite file (default ./memorysync.db)"
        )
        sub.add_argument(
            "--tenant", default=DEFAULT_TENANT, help=f"tenant id (default {DEFAULT_TENANT!r})"
        )
        sub.add_argument("--json", action="store_true", help="print JSON instead of a table")
        return sub

    command("users", "list the end users of the tenant with their counts")
    command("memories", "list one user's memories, newest first").add_argument("user")
    command("sessions", "list one user's sessions with their counts").add_argument("user")
    history = command("history", "print one session's transcript in order")
    history.add_argument("user")
    history.add_argument("session")
    export = command("export", "write every memory and transcript of a user as JSON")
    export.add_argument("user")
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default stdout)")
    export.add_argument(
        "--progress", action="store_true", help="show progress even when stderr is not a terminal"
    )
    forget = command("forget", "erase every memory, transcript and pending job of a user")
    forget.add_argument("user")
    forget.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    command("stats", "counts for the tenant")


def run_data_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run one users'-data command; the exit status."""
    out = out or sys.stdout
    if args.db != ":memory:" and not os.path.exists(args.db):
        print(f"memorysync-local: no database at {args.db!r}", file=sys.stderr)
        return 2
    db = Database(args.db)
    try:
        return _run(db, args, out)
    finally:
        db.close()


def _run(db: Database, args: argparse.Namespace, out: TextIO) -> int:
    tenant: str = args.tenant
    if args.command == "users":
        users = list_users(db, tenant)
        _emit(out, args, users, ("user_id", "memories", "turns", "sessions"))
    elif args.command == "memories":
        items, _ = memory_rows(db, tenant, args.user)
        columns = ("memory_id", "state", "superseded_by", "said_at", "session_id", "text")
        _emit(out, args, items, columns)
    elif args.command == "sessions":
        sessions = list_sessions(db, tenant, args.user)
        _emit(out, args, sessions, ("session_id", "turns", "memories", "first_at", "last_at"))
    elif args.command == "history":
        turns = transcript(db, tenant, args.user, args.session)
        _emit(out, args, turns, ("id", "role", "created_at", "content"))
    elif args.command == "stats":
        counts = stats(db, tenant)
        _emit(out, args, [counts], tuple(counts))
    elif args.command == "export":
        return _export(db, args, out)
    elif args.command == "forget":
        return _forget(db, args, out)
    return 0


def _export(db: Database, args: argparse.Namespace, out: TextIO) -> int:
    show = args.progress or sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if show:
            end = "\n" if done == total else "\r"
            print(
                f"exporting {args.user}: {done}/{total} sessions",
                end=end,
                file=sys.stderr,
                flush=True,
            )

    data = export_user(db, args.tenant, args.user, progress=progress)
    text = json.dumps(data, ensure_ascii=False, indent=2)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        summary = {
            "file": args.output,
            "memories": len(data["memories"]),
            "turns": sum(len(t) for t in data["transcripts"].values()),
            "sessions": len(data["sessions"]),
        }
        _emit(out, args, [summary], tuple(summary))
    else:
        print(text, file=out)
    return 0


def _forget(db: Database, args: argparse.Namespace, out: TextIO) -> int:
    if not args.yes:
        if not sys.stdin.isatty():
            print(
                "memorysync-local: forget needs --yes when not run interactively", file=sys.stderr
            )
            return 2
        typed = input(f"Erase every memory and transcript of {args.user!r}? Type the user id: ")
        if typed != args.user:
            print("not confirmed; nothing erased", file=sys.stderr)
            return 1
    counts = forget_user(db, args.tenant, args.user)
    _emit(
        out,
        args,
        [{"user_id": args.user, **counts}],
        ("user_id", "memories", "turns", "sessions", "jobs"),
    )
    return 0


def _emit(
    out: TextIO, args: argparse.Namespace, rows: Sequence[dict[str, Any]], columns: Sequence[str]
) -> None:
    if args.json:
        value: Any = (
            rows[0]
            if args.command in ("stats", "forget") or (args.command == "export" and args.output)
            else list(rows)
        )
        print(json.dumps(value, ensure_ascii=False, indent=2), file=out)
        return
    print(_table(rows, columns), file=out)


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[str], width: int = 60) -> str:
    """A plain text table; cells are one line, long ones cut with an ellipsis."""

    def cell(value: Any) -> str:
        text = "" if value is None else " ".join(str(value).split())
        return text if len(text) <= width else text[: width - 1] + "…"

    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    if not rows:
        lines.append("(none)")
    return "\n".join(lines)
