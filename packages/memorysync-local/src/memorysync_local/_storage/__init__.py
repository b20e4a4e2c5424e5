"""Storage: the one interface the server reads and writes through, and its backends.

- :mod:`.interface`: :class:`~.interface.Storage` and its sessions' parts, by concern
  (memories, transcript, idempotency seeds, jobs, quota, users' data, word index,
  vectors), as ``typing.Protocol`` classes;
- :mod:`.records`: the plain records they take and return;
- :mod:`.errors`: the storage-neutral errors the HTTP layer answers;
- :mod:`.target`: :func:`~.target.open_storage`, which picks the backend a target names;
- ``sqlite/``: the SQLite backend (files and ``:memory:``);
- ``postgres/``: the PostgreSQL backend.

Only the backends import a database driver or write SQL; each translates its
engine's errors into :mod:`.errors`' classes where it calls the engine.
"""

from memorysync_local._storage.errors import (
    StorageBusy,
    StorageCorrupt,
    StorageError,
    StorageUnwritable,
)
from memorysync_local._storage.interface import Session, Storage
from memorysync_local._storage.target import backend_of, open_storage

__all__ = [
    "Session",
    "Storage",
    "StorageBusy",
    "StorageCorrupt",
    "StorageError",
    "StorageUnwritable",
    "backend_of",
    "open_storage",
]
