"""``memorysync-local users|memories|sessions|history|export|import|forget|stats``.

Each command opens the database directly (``--db``; a running server may keep
serving it) and works in one tenant (``--tenant``, default ``local``). Tables
for people by default, ``--json`` for scripts. ``forget`` asks for the user id
to be typed back unless ``--yes``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any, TextIO

from memorysync_local._plans import DEFAULT_TENANT
from memorysync_local._service.users_data import (
    export_user,
    forget_user,
    known_user,
    list_sessions,
    list_users,
    memory_rows,
    stats,
    transcript,
)
from memorysync_local._service.users_import import import_items, prepare
from memorysync_local._storage.errors import StorageError
from memorysync_local._storage.interface import Storage
from memorysync_local._storage.target import backend_of, open_storage

DATA_COMMANDS = (
    "users",
    "memories",
    "sessions",
    "history",
    "export",
    "import",
    "forget",
    "stats",
)


def add_data_commands(commands: Any) -> None:
    """Add the users'-data subcommands to the ``memorysync-local`` parser."""

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = commands.add_parser(
            name, help=help_text, description=help_text
        )
        sub.add_argument(
            "--db",
            default="./memorysync.db",
            help="SQLite file (default ./memorysync.db) or postgresql:// URL",
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
    imported = command(
        "import", "store an export for a user as it was (texts, states, times, links)"
    )
    imported.add_argument("user", help="the user the export is stored for")
    imported.add_argument("file", help="an export (memorysync-local export, export()); - for stdin")
    forget = command("forget", "erase every memory, transcript and pending job of a user")
    forget.add_argument("user")
    forget.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    command("stats", "counts for the tenant")


def run_data_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run one users'-data command; the exit status."""
    out = out or sys.stdout
    is_file = backend_of(args.db) == "sqlite" and args.db != ":memory:"
    if is_file and not os.path.exists(args.db):
        print(f"memorysync-local: no database at {args.db!r}", file=sys.stderr)
        return 2
    try:
        db = open_storage(args.db)
    except StorageError as exc:
        print(f"memorysync-local: {exc}", file=sys.stderr)
        return 2
    try:
        return _run(db, args, out)
    finally:
        db.close()


def _run(db: Storage, args: argparse.Namespace, out: TextIO) -> int:
    tenant: str = args.tenant
    if args.command in ("memories", "sessions", "history"):
        # An empty answer would read as "nothing stored"; a mistyped id must not.
        missing = _missing(db, tenant, args.user, getattr(args, "session", None))
        if missing:
            print(f"memorysync-local: {missing}", file=sys.stderr)
            return 1
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
    elif args.command == "import":
        return _import(db, args, out)
    elif args.command == "forget":
        return _forget(db, args, out)
    return 0


def _missing(db: Storage, tenant: str, user: str, session: str | None) -> str | None:
    """Why the user (or their session) cannot be shown; None when it can."""
    if not known_user(db, tenant, user):
        known = [u["user_id"] for u in list_users(db, tenant)]
        hint = _hint(user, known, " (memorysync-local users lists them)")
        return f"no user {user!r} in tenant {tenant!r}{hint}"
    if session is not None:
        sessions = [s["session_id"] for s in list_sessions(db, tenant, user)]
        if session not in sessions:
            return f"user {user!r} has no session {session!r}{_hint(session, sessions, '')}"
    return None


def _hint(value: str, choices: Sequence[str], otherwise: str) -> str:
    near = difflib.get_close_matches(value, choices, n=1)
    return f"; did you mean {near[0]!r}?" if near else otherwise


def _export(db: Storage, args: argparse.Namespace, out: TextIO) -> int:
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

    if args.output and os.path.islink(args.output):
        # Following it would overwrite (and chmod) whatever file the link names.
        print(
            f"memorysync-local: {args.output!r} is a symbolic link; name the file itself "
            "(an export is written as a new file, never through a link)",
            file=sys.stderr,
        )
        return 2
    data = export_user(db, args.tenant, args.user, progress=progress)
    text = json.dumps(data, ensure_ascii=False, indent=2)
    if args.output:
        write_private(args.output, text + "\n")
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


def _import(db: Storage, args: argparse.Namespace, out: TextIO) -> int:
    try:
        if args.file == "-":
            data = json.load(sys.stdin)
        else:
            with open(args.file, encoding="utf-8") as handle:
                data = json.load(handle)
        memories, turns = prepare(data)
    except (OSError, ValueError) as exc:  # (json's errors are ValueErrors)
        print(f"memorysync-local: cannot import {args.file!r}: {exc}", file=sys.stderr)
        return 2
    done = import_items(db, args.tenant, args.user, memories, turns)
    counts: dict[str, Any] = {"user_id": args.user}
    for kind in ("memories", "turns"):
        results = done[kind]
        created = sum(1 for r in results if r["status"] == "created")
        counts[f"{kind}_created"] = created
        counts[f"{kind}_skipped"] = len(results) - created
    _emit(out, args, [counts], tuple(counts))
    return 0


def _forget(db: Storage, args: argparse.Namespace, out: TextIO) -> int:
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
        one = args.command in ("stats", "forget", "import")
        value: Any = rows[0] if one or (args.command == "export" and args.output) else list(rows)
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


def write_private(path: str, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner alone (0600), whatever the umask.

    An export holds a user's memories and transcripts: as private as the database.
    The text goes to a new file beside ``path`` (created 0600), which then replaces
    ``path`` in one rename: a reader never sees half an export, and a symbolic link
    planted at ``path`` after the caller's check is replaced, never followed.
    """
    folder = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".memorysync-export-", dir=folder)
    try:
        with open(fd, "w", encoding="utf-8") as handle:
            os.fchmod(fd, 0o600)
            handle.write(text)
            handle.flush()
            os.fsync(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
