"""The ``usage`` table on SQLite: adds and refusals per key and month."""

from __future__ import annotations

import sqlite3


class SQLiteQuota:
    """:class:`~memorysync_local._storage.interface.QuotaLedger` on one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def count_add(self, key_id: str, month: str, limit: int | None) -> bool:
        """Count one add unless the key reached ``limit``; False (a refusal) if it did."""
        key = (key_id, month)
        self._conn.execute("INSERT OR IGNORE INTO usage (key_id, month) VALUES (?, ?)", key)
        if limit is not None:
            row = self._conn.execute(
                "SELECT adds FROM usage WHERE key_id = ? AND month = ?", key
            ).fetchone()
            if int(row["adds"]) >= limit:
                self._conn.execute(
                    "UPDATE usage SET refused = refused + 1 WHERE key_id = ? AND month = ?", key
                )
                return False
        self._conn.execute("UPDATE usage SET adds = adds + 1 WHERE key_id = ? AND month = ?", key)
        return True

    def usage(self, key_id: str, month: str) -> tuple[int, int]:
        """(adds, refusals) of the key in the month."""
        row = self._conn.execute(
            "SELECT adds, refused FROM usage WHERE key_id = ? AND month = ?", (key_id, month)
        ).fetchone()
        return (int(row["adds"]), int(row["refused"])) if row else (0, 0)
