"""Which backend a storage target names, and opening it.

A target is what ``serve --db`` and ``embedded(db_path)`` take: a file path or
``:memory:`` is a SQLite database; a ``postgresql://`` (or ``postgres://``) URL is a
PostgreSQL database (``memorysync_local._storage.postgres``, the ``postgres`` extra).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from memorysync_local._storage.errors import StorageError
from memorysync_local._storage.interface import Storage
from memorysync_local._storage.sqlite.paths import is_private_memory

__all__ = ["Backend", "backend_of", "is_private_memory", "open_storage", "shown"]

Backend = Literal["sqlite", "postgresql"]
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def backend_of(target: str) -> Backend:
    """The backend a target names: ``"postgresql"`` for a PostgreSQL URL, else
    ``"sqlite"`` (a path or ``:memory:``)."""
    return "postgresql" if target.lower().startswith(_POSTGRES_SCHEMES) else "sqlite"


def shown(target: str) -> str:
    """``target`` as it may be shown (logs, reprs, errors): a URL's password as ``***``."""
    if backend_of(target) != "postgresql":
        return target
    parts = urlsplit(target)
    if parts.password is None:
        return target
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def open_storage(target: str) -> Storage:
    """Open (creating and migrating as needed) the database ``target`` names.

    Raises a :class:`~memorysync_local._storage.errors.StorageError` naming the target
    when it cannot be opened; the server then does not start.

    Example:
        ```python
        storage = open_storage(":memory:")
        with storage.read() as session:
            session.memories.count("local")  # 0
        storage.close()
        ```
    """
    if backend_of(target) == "postgresql":
        try:
            # Imported only for a URL: its driver (psycopg) is an optional extra.
            backend = importlib.import_module("memorysync_local._storage.postgres")
        except ModuleNotFoundError as exc:
            if exc.name not in ("psycopg", "psycopg_pool"):
                raise
            raise StorageError(
                "serving PostgreSQL needs the postgres extra: "
                "pip install 'memorysync-local[postgres]'",
                detail=str(exc),
            ) from exc
        open_postgres: Callable[[str], Storage] = backend.open_postgres
        return open_postgres(target)
    from memorysync_local._storage.sqlite import open_sqlite

    return open_sqlite(target)
