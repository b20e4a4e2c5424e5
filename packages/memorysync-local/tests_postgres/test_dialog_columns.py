"""A memory's speaker and position in its session on PostgreSQL (issue 34): added to a
database an older server made, at open, and carried over by ``migrate``."""

from __future__ import annotations

from pathlib import Path

import psycopg

from memorysync_local._storage.postgres.backend import open_postgres
from memorysync_local._storage.postgres.importer import import_sqlite
from memorysync_local._storage.records import NewMemory
from memorysync_local._storage.target import open_storage

T, U, NOW = "local", "ana", "2026-01-01T00:00:00.000000Z"


def _turn(text: str, speaker: str | None = "Ana") -> NewMemory:
    return NewMemory(T, U, text, "other", None, "s1", {}, "add", None, "r", NOW, NOW, None, speaker)


def test_a_database_without_the_columns_gets_them_at_open(postgres_url: str) -> None:
    open_postgres(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # as an older server left it
        conn.execute("DROP INDEX memories_in_session")
        conn.execute("ALTER TABLE memories DROP COLUMN speaker, DROP COLUMN session_position")
        conn.execute(
            "INSERT INTO memories (tenant_id, user_id, text, session_id, origin, created_at,"
            " said_at) VALUES (%s, %s, 'old turn', 's1', 'add', %s, %s)",
            (T, U, NOW, NOW),
        )
    storage = open_postgres(postgres_url)
    try:
        with storage.write() as session:
            new = session.memories.insert(_turn("new turn"))
        with storage.read() as session:
            lines = session.memories.lines([1, new], T, U)
    finally:
        storage.close()
    assert [(m.text, m.speaker, m.position) for m in lines] == [
        ("old turn", None, None),
        ("new turn", "Ana", 1),
    ]


def test_migrate_keeps_speakers_and_positions(tmp_path: Path, postgres_url: str) -> None:
    source = str(tmp_path / "m.db")
    storage = open_storage(source)
    try:
        with storage.write() as session:
            for text, speaker in (("hi", "Émile"), ("a note", None), ("bye", "Bo")):
                session.memories.insert(_turn(text, speaker))
    finally:
        storage.close()
    import_sqlite(source, postgres_url)
    target = open_postgres(postgres_url)
    try:
        with target.read() as session:
            found = session.memories.at_positions(T, U, [("s1", 1), ("s1", 2), ("s1", 3)])
        with target.write() as session:
            later = session.memories.insert(_turn("later"))
        with target.read() as session:
            (next_one,) = session.memories.lines([later], T, U)
    finally:
        target.close()
    assert sorted((m.position, m.text, m.speaker) for m in found) == [
        (1, "hi", "Émile"),
        (2, "a note", None),
        (3, "bye", "Bo"),
    ]
    assert next_one.position == 4  # the session's positions go on after the copied ones
