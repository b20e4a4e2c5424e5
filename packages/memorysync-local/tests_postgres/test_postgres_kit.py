"""The test kit's PostgreSQL: a real server with pgvector, a fresh database per test."""

from __future__ import annotations

import psycopg

from shared.postgres import PostgresServer


def test_each_test_gets_an_empty_database_with_pgvector(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert tables == (0,)
        assert version.fetchone() is not None
        assert conn.execute("SELECT '[1,0]'::vector <=> '[0,1]'::vector").fetchone() == (1.0,)


def test_a_dropped_test_database_is_gone_with_its_connections(
    postgres_server: PostgresServer,
) -> None:
    name = postgres_server.create_database()
    open_conn = psycopg.connect(postgres_server.url(name))
    try:
        postgres_server.drop_database(name)
        with psycopg.connect(postgres_server.admin_url) as admin:
            left = admin.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (name,))
            assert left.fetchone() == (0,)
    finally:
        open_conn.close()


def test_the_server_repr_names_no_credentials() -> None:
    server = PostgresServer("postgresql://app:s3cret-pw@db.internal:5432/memories")
    assert "s3cret-pw" not in repr(server)
    assert server.url("other") == "postgresql://app:s3cret-pw@db.internal:5432/other"
