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
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

from ._turns import CapturedTurn

_logger = logging.getLogger("memorysync.outbox")

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
"""


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
        self._lock = threading.Lock()
        self._db = _open(self.path)
        _MINE.add(self.owner)

    def keep(self, turn: CapturedTurn) -> bool:
        """Write ``turn`` (owned by this process); False when the outbox is full."""
        with self._lock, self._db:
            (count,) = self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()
            if count >= MAX_OUTBOX_TURNS:
                self.overflowed += 1
                return False
            self._db.execute(
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
        with self._lock, self._db:
            self._db.executemany("DELETE FROM outbox WHERE key = ?", [(k,) for k in keys])

    def renew(self) -> None:
        """Extend the lease on this process's rows (it is still delivering them)."""
        with self._lock, self._db:
            self._db.execute(
                "UPDATE outbox SET lease_until = ? WHERE owner = ?",
                (time.time() + LEASE_SECONDS, self.owner),
            )

    def release(self) -> None:
        """Give this process's rows up (a clean close): the next start takes them at once."""
        with self._lock, self._db:
            self._db.execute("UPDATE outbox SET lease_until = 0 WHERE owner = ?", (self.owner,))

    def take_over(self) -> list[CapturedTurn]:
        """Claim the rows of this destination nobody delivers; them, in capture order."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")  # one taker at a time across processes
            try:
                rows = self._db.execute(
                    "SELECT key, owner, lease_until, turn FROM outbox "
                    "WHERE destination = ? AND owner != ? ORDER BY seq",
                    (self.destination, self.owner),
                ).fetchall()
                now = time.time()
                taken = [row for row in rows if row[2] < now or _dead(row[1])]
                self._db.executemany(
                    "UPDATE outbox SET owner = ?, lease_until = ? WHERE key = ? AND owner = ?",
                    [(self.owner, now + LEASE_SECONDS, row[0], row[1]) for row in taken],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        turns = [CapturedTurn(**json.loads(row[3])) for row in taken]
        if turns:
            _logger.info("outbox: delivering %s turns left by an earlier process", len(turns))
        return turns

    def pending(self) -> int:
        """Rows of this destination in the file (any owner)."""
        with self._lock:
            (count,) = self._db.execute(
                "SELECT COUNT(*) FROM outbox WHERE destination = ?", (self.destination,)
            ).fetchone()
        return int(count)

    def close(self) -> None:
        """Release this process's rows and close the file."""
        self.release()
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


def _open(path: Path) -> sqlite3.Connection:
    """The outbox file, created with mode 0600 (it holds what users said)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    os.chmod(path, 0o600)  # also when it existed with wider permissions
    db = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")  # readers and one writer across processes
    db.execute("PRAGMA synchronous=NORMAL")  # a committed row survives a killed process
    db.executescript(_SCHEMA)
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
