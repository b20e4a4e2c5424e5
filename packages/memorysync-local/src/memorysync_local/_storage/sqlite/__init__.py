"""The SQLite backend of the storage interface (the standard library's driver).

- :mod:`.backend`: :class:`~.backend.SQLiteStorage` and its sessions;
- :mod:`.database`: the connection pool, pragmas and migration runner;
- :mod:`.schema`: the numbered migrations (schema version 7);
- :mod:`.backfill`: the Python steps of those migrations;
- :mod:`.errors`: SQLite's errors sorted into the storage-neutral ones, once;
- :mod:`.paths`: what a target names, read without opening it (``:memory:``);
- one module per concern of a session: memories, transcript, seeds, jobs, quota,
  users' data, word index, vectors.
"""

from __future__ import annotations

from memorysync_local._storage.sqlite.backend import SQLiteStorage


def open_sqlite(path: str) -> SQLiteStorage:
    """Open (creating and migrating as needed) the SQLite database at ``path``
    (``:memory:``: a private one that lives as long as the storage)."""
    return SQLiteStorage(path)


__all__ = ["SQLiteStorage", "open_sqlite"]
