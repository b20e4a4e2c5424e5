"""The durable outbox: captured turns kept in a local SQLite file until the server has them.

Opt-in with the ``outbox`` setting (or ``MEMORYSYNC_OUTBOX``). Every turn an
:class:`~memorysync_core.adapters.AdapterKit` queues is written here first and deleted
once the server acknowledged it (or refused it for good), so a process that exits or
is killed with turns pending leaves them on disk; the next process on the same file
and destination delivers them, in capture order, with the same seeds and capture ids,
so a turn the server already has is not stored twice.

Sharing: several processes may use one file. Each row belongs to one process at a
time (its *owner*, with a lease renewed while it delivers). A process takes over rows
whose owner released them (a clean close), died (same host, pid gone), or let the lease
run out (:data:`LEASE_SECONDS`, another host). The take-over is one transaction, so a
row has one deliverer; should two ever send it, the idempotency key still stores it once.

Damage: the outbox is a safety net and never the reason a turn is lost. A file SQLite
calls damaged (not a database, a malformed page) is moved aside under a dated name
(``<name>.damaged-<UTC time>``, with a WARNING naming both paths) and a new one is
started in its place; a row that cannot be read back as a turn is moved once into the
``outbox_set_aside`` table (a WARNING), never claimed again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from .turns import CapturedTurn

_logger = logging.getLogger("memorysync.outbox")
_T = TypeVar("_T")

# Rows the file holds at most; past it a new turn is kept in memory only.
MAX_OUTBOX_TURNS = 10_000
# A live owner renews its rows' lease whenever it delivers; a dead one's rows are
# taken over once the lease ran out (at once on the same host, when its pid is gone).
LEASE_SECONDS = 60.0
# The owners of this process's open outboxes: another owner with this pid is an
# earlier process that had the same pid (a restarted container's pid 1).
_MINE: set[str] = set()

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    key TEXT PRIMARY KEY,
    destination TEXT NOT NULL,
    seq INTEGER NOT NULL,
    owner TEXT NOT NULL,
    lease_until REAL NOT NULL,
    turn TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_order ON outbox (destination, seq);
CREATE TABLE IF NOT EXISTS outbox_set_aside (
    key TEXT PRIMARY KEY,
    destination TEXT NOT NULL,
    turn TEXT NOT NULL,
    reason TEXT NOT NULL,
    set_aside_at REAL NOT NULL
);
"""


class OutboxDamaged(Exception):
    """The file was damaged and could not be moved aside: the turns stay in memory."""


class Outbox:
    """One process's view of an outbox file, for one destination.

    ``destination`` names where the turns go (server, project, tenant, surface): a
    process only delivers the rows of its own destination.

    Example:
        ```python
        outbox = Outbox("/var/lib/myapp/memorysync-outbox.db", destination="...")
        if outbox.keep(turn):
            ...  # delivered later; then outbox.done([turn.idempotency_key])
        ```
    """

    def __init__(self, path: str | os.PathLike[str], *, destination: str) -> None:
        self.path = Path(path)
        self.destination = destination
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.overflowed = 0  # turns not kept because the file was full
        self.set_aside: list[Path] = []  # damaged files moved aside by this process
        self._lock = threading.Lock()
        try:
            self._db = _open(self.path)
        except sqlite3.DatabaseError as exc:
            if not _damaged(exc):
                raise
            self._db = self._start_again(exc)
        _MINE.add(self.owner)

    def _run(self, action: Callable[[sqlite3.Connection], _T]) -> _T:
        """``action`` on the file under the lock; once more on a new file if it was damaged."""
        with self._lock:
            try:
                return action(self._db)
            except sqlite3.DatabaseError as exc:
                if not _damaged(exc):
                    raise
                with contextlib.suppress(sqlite3.Error):
                    self._db.close()
                self._db = self._start_again(exc)
            return action(self._db)

    def _start_again(self, exc: sqlite3.DatabaseError) -> sqlite3.Connection:
        """Move the damaged file (and its journal) aside; a new, empty file in its place."""
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        aside = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        try:
            os.replace(self.path, aside)
        except OSError as failure:
            raise OutboxDamaged(
                f"outbox {self.path} is damaged ({exc}) and could not be moved aside to "
                f"{aside} ({failure.strerror})"
            ) from exc
        for extra in ("-wal", "-shm", "-journal"):
            # A journal left beside a new file would be replayed into it.
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{self.path}{extra}", f"{aside}{extra}")
        self.set_aside.append(aside)
        _logger.warning(
            "outbox %s is damaged (%s): moved aside to %s; a new outbox is started "
            "(what the old file held can be read there)",
            self.path,
            exc,
            aside,
        )
        return _open(self.path)

    def keep(self, turn: CapturedTurn) -> bool:
        """Write ``turn`` (owned by this process); False when the outbox is full."""
        return self._run(lambda db: self._keep(db, turn))

    def _keep(self, db: sqlite3.Connection, turn: CapturedTurn) -> bool:
        with db:
            (count,) = db.execute("SELECT COUNT(*) FROM outbox").fetchone()
            if count >= MAX_OUTBOX_TURNS:
                self.overflowed += 1
                return False
            db.execute(
                "INSERT OR IGNORE INTO outbox VALUES (?, ?, ?, ?, ?, ?)",
                (
                    turn.idempotency_key,
                    self.destination,
                    turn.seq or 0,
                    self.owner,
                    time.time() + LEASE_SECONDS,
                    json.dumps(dataclasses.asdict(turn)),
                ),
            )
            return True

    def done(self, keys: Iterable[str]) -> None:
        """The server has these turns (or refused them for good): forget them."""
        rows = [(k,) for k in keys]

        def forget(db: sqlite3.Connection) -> None:
            with db:
                db.executemany("DELETE FROM outbox WHERE key = ?", rows)

        self._run(forget)

    def renew(self) -> None:
        """Extend the lease on this process's rows (it is still delivering them)."""

        def renew(db: sqlite3.Connection) -> None:
            with db:
                db.execute(
                    "UPDATE outbox SET lease_until = ? WHERE owner = ?",
                    (time.time() + LEASE_SECONDS, self.owner),
                )

        self._run(renew)

    def release(self) -> None:
        """Give this process's rows up (a clean close): the next start takes them at once."""

        def release(db: sqlite3.Connection) -> None:
            with db:
                db.execute("UPDATE outbox SET lease_until = 0 WHERE owner = ?", (self.owner,))

        self._run(release)

    def take_over(self) -> list[CapturedTurn]:
        """Claim the rows of this destination nobody delivers; them, in capture order.

        A row that does not read back as a turn is set aside once (a WARNING), not claimed.
        """
        return self._run(self._take_over)

    def _take_over(self, db: sqlite3.Connection) -> list[CapturedTurn]:
        db.execute("BEGIN IMMEDIATE")  # one taker at a time across processes
        try:
            rows = db.execute(
                "SELECT key, owner, lease_until, turn FROM outbox "
                "WHERE destination = ? AND owner != ? ORDER BY seq",
                (self.destination, self.owner),
            ).fetchall()
            now = time.time()
            turns: list[CapturedTurn] = []
            taken, bad = [], []
            for row in rows:
                if not (row[2] < now or _dead(row[1])):
                    continue
                try:
                    turns.append(_turn_of(row[3]))
                    taken.append(row)
                except (ValueError, TypeError) as exc:
                    bad.append((row[0], self.destination, str(row[3]), repr(exc), now))
            db.executemany(
                "UPDATE outbox SET owner = ?, lease_until = ? WHERE key = ? AND owner = ?",
                [(self.owner, now + LEASE_SECONDS, row[0], row[1]) for row in taken],
            )
            if bad:
                db.executemany("INSERT OR REPLACE INTO outbox_set_aside VALUES (?,?,?,?,?)", bad)
                db.executemany("DELETE FROM outbox WHERE key = ?", [(b[0],) for b in bad])
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        if bad:
            _logger.warning(
                "outbox %s: %s rows could not be read as turns (%s); set aside in its "
                "outbox_set_aside table, not delivered",
                self.path,
                len(bad),
                bad[0][3],
            )
        if turns:
            _logger.info("outbox: delivering %s turns left by an earlier process", len(turns))
        return turns

    def pending(self) -> int:
        """Rows of this destination in the file (any owner)."""

        def count(db: sqlite3.Connection) -> int:
            (rows,) = db.execute(
                "SELECT COUNT(*) FROM outbox WHERE destination = ?", (self.destination,)
            ).fetchone()
            return int(rows)

        return self._run(count)

    def close(self) -> None:
        """Release this process's rows and close the file."""
        try:
            self.release()
        finally:
            _MINE.discard(self.owner)
            with self._lock:
                self._db.close()

    def __del__(self) -> None:
        # An outbox nobody closed (a kit stays usable after aclose and is then simply
        # dropped) still closes its file; its rows' leases run out for the next start.
        with contextlib.suppress(Exception):
            self._db.close()


def keys_of(turns: Sequence[CapturedTurn]) -> list[str]:
    """The outbox keys of ``turns``."""
    return [turn.idempotency_key for turn in turns]


def _turn_of(text: object) -> CapturedTurn:
    """The turn a row holds; ValueError or TypeError when it is not one."""
    if not isinstance(text, str):
        raise TypeError(f"a row's turn is {type(text).__name__}, not JSON text")
    fields = json.loads(text)
    if not isinstance(fields, dict):
        raise TypeError(f"a row's turn is a JSON {type(fields).__name__}, not an object")
    turn = CapturedTurn(**fields)
    if not isinstance(turn.text, str) or not isinstance(turn.scope, str):
        raise TypeError("a row's turn has no text or scope")
    return turn


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    """True for SQLite's "not a database" and "malformed" (not: locked, full, read-only)."""
    return type(exc) is sqlite3.DatabaseError


def _open(path: Path) -> sqlite3.Connection:
    """The outbox file, created with mode 0600 (it holds what users said).

    sqlite3.DatabaseError when the file is damaged (a quick check reads every page).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    os.chmod(path, 0o600)  # also when it existed with wider permissions
    db = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")  # readers and one writer across processes
        db.execute("PRAGMA synchronous=NORMAL")  # a committed row survives a killed process
        # Bounded (10,000 rows at most) and once per start: a damaged page is found here,
        # not by a capture.
        problems = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError("; ".join(str(p) for p in problems))
        db.executescript(_SCHEMA)
    except BaseException:
        db.close()
        raise
    return db


def _dead(owner: str) -> bool:
    """True when ``owner`` was a process of this host that no longer runs."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return owner not in _MINE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
