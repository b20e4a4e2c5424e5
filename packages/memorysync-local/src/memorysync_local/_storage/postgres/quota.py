"""The quota ledger on PostgreSQL (``QuotaLedger``): adds counted in the database."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memorysync_local._storage.postgres.session import PgSession


class PostgresQuota:
    """``QuotaLedger``: counted in the database, atomically.

    A key with a limit is counted at once under its row's lock (two processes cannot
    both take the last add); a key without one is counted when the write commits, so
    writes by one key do not queue on its row for their whole transaction.
    """

    def __init__(self, session: PgSession) -> None:
        self._s = session

    def count_add(self, key_id: str, month: str, limit: int | None) -> bool:
        if limit is None:
            self._s.count_later(key_id, month)
            return True
        conn = self._s.conn
        conn.execute(
            "INSERT INTO usage (key_id, month) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (key_id, month),
        )
        counted = conn.execute(
            "UPDATE usage SET adds = adds + 1 WHERE key_id = %s AND month = %s AND adds < %s "
            "RETURNING adds",
            (key_id, month, limit),
        ).fetchone()
        if counted is not None:
            return True
        conn.execute(
            "UPDATE usage SET refused = refused + 1 WHERE key_id = %s AND month = %s",
            (key_id, month),
        )
        return False

    def usage(self, key_id: str, month: str) -> tuple[int, int]:
        row = self._s.conn.execute(
            "SELECT adds, refused FROM usage WHERE key_id = %s AND month = %s", (key_id, month)
        ).fetchone()
        adds, refused = (int(row["adds"]), int(row["refused"])) if row else (0, 0)
        pending = self._s.pending_adds(key_id, month)
        return adds + pending, refused


def flush_counts(session: PgSession, counts: Mapping[tuple[str, str], int]) -> None:
    """Add the adds counted without a limit, just before the write commits."""
    for (key_id, month), adds in sorted(counts.items()):
        session.conn.execute(
            "INSERT INTO usage (key_id, month, adds) VALUES (%s, %s, %s) "
            "ON CONFLICT (key_id, month) DO UPDATE SET adds = usage.adds + EXCLUDED.adds",
            (key_id, month, adds),
        )
