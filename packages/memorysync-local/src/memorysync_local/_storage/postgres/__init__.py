"""The PostgreSQL backend: any number of server processes on one database.

``serve --db postgresql://...`` and ``embedded(db="postgresql://...")`` open it
through :func:`memorysync_local._storage.open_storage`; it needs the ``postgres``
extra (psycopg 3 and its pool). pgvector is needed only with an embedder.

- ``schema``: the tables, indexes and triggers, versioned;
- ``database``: the pool, the advisory-locked migrations, and the one place
  psycopg's errors become the storage-neutral errors;
- ``backend``: :class:`PostgresStorage` and its sessions (per-user write locks);
- ``memories``, ``transcript``, ``seeds``, ``jobs``, ``quota``, ``users_data``,
  ``word_index``, ``vectors``: the interface's parts, by concern, as in ``sqlite/``;
- ``importer``: a SQLite file's data moved in (``memorysync-local migrate``).
"""

from memorysync_local._storage.postgres.backend import PostgresStorage, open_postgres
from memorysync_local._storage.postgres.errors import redact

__all__ = ["PostgresStorage", "open_postgres", "redact"]
