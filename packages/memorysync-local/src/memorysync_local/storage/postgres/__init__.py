"""The PostgreSQL backend: any number of server processes on one database.

``serve --db postgresql://...`` and ``embedded(db="postgresql://...")`` open it
through :func:`memorysync_local.storage.open_storage`; it needs the ``postgres``
extra (psycopg 3 and its pool). pgvector is needed only with an embedder.

- ``_schema``: the tables, indexes and triggers, versioned;
- ``_connection``: the pool, the advisory-locked migrations, and the one place
  psycopg's errors become the storage-neutral errors;
- ``_session``: :class:`PostgresStorage` and its sessions (per-user write locks);
- ``_tables``, ``_ledgers``, ``_index``: the interface's parts, by concern.
"""

from memorysync_local.storage.postgres._connection import redact
from memorysync_local.storage.postgres._session import PostgresStorage, open_postgres

__all__ = ["PostgresStorage", "open_postgres", "redact"]
