"""A PostgreSQL role that may not ``CREATE EXTENSION vector``, with an embedder (issue 33,
item 7): the server refuses to start, naming the permission and the SQL an
administrator must run, instead of starting and answering every recall 500; without
an embedder the same role serves word recall."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from memorysync_local import embedded, serve_in_thread
from memorysync_local._storage.errors import StorageError
from shared.postgres import PostgresServer

T = "local"
KEY = "ms_local_dev_key"


@pytest.fixture
def unprivileged_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A database without pgvector, and a role that may create tables in it but, not being
    a superuser, may not create the extension: the URL that connects as that role."""
    database = postgres_server.new_name("ms_noext")
    role = postgres_server.new_name("ms_plain")
    postgres_server.execute(f'CREATE DATABASE "{database}" TEMPLATE template0')
    postgres_server.execute(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER NOCREATEDB')
    postgres_server.execute(f'GRANT CREATE, USAGE ON SCHEMA public TO "{role}"', dbname=database)
    parts = urlsplit(postgres_server.url(database))
    host = parts.netloc.rpartition("@")[2]
    try:
        yield urlunsplit(parts._replace(netloc=f"{role}@{host}"))
    finally:
        postgres_server.drop_database(database)
        postgres_server.execute(f'DROP ROLE IF EXISTS "{role}"')


def assert_names_the_fix(message: str) -> None:
    assert 'permission denied to create extension "vector"' in message
    assert "CREATE EXTENSION IF NOT EXISTS vector;" in message
    assert "superuser" in message
    assert "--embedder none" in message


def test_serving_with_an_embedder_refuses_to_start_naming_the_fix(
    unprivileged_url: str, hash_embedder: Any
) -> None:
    with pytest.raises(StorageError) as refused:
        serve_in_thread(db=unprivileged_url, embedder=hash_embedder)
    assert_names_the_fix(str(refused.value))
    with pytest.raises(StorageError) as refused_embedded:
        embedded(db=unprivileged_url, embedder=hash_embedder)
    assert_names_the_fix(str(refused_embedded.value))


async def test_without_an_embedder_the_same_role_serves_word_recall(
    unprivileged_url: str,
) -> None:
    with serve_in_thread(db=unprivileged_url, embedder="none") as server:
        async with httpx.AsyncClient(base_url=server.base_url, headers={"X-API-Key": KEY}) as c:
            body = {"tenant_id": T, "user_id": "ana"}
            added = await c.post(
                "/v1/memory/add_turn", json={**body, "text": "I live in Oslo.", "source": "t"}
            )
            assert added.status_code == 200, added.text
            found = await c.post("/v1/memory/recall", json={**body, "prompt": "Oslo"})
            assert found.status_code == 200, found.text
            assert [m["text"] for m in found.json()["memories"]] == ["Lives in Oslo"]


def test_the_cli_exits_2_naming_the_fix(unprivileged_url: str, tmp_path: Path) -> None:
    # The CLI's embedders need a model; the test's hash embedder is handed over by a
    # tiny launcher that calls the same main() with it installed as "model2vec".
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        "import sys\n"
        "from memorysync_local._cli import commands\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from conftest import WordHashEmbedder\n"
        "commands.load_embedder = lambda spec: WordHashEmbedder()\n"
        "sys.exit(commands.main(sys.argv[2:]))\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            str(launcher),
            str(Path(__file__).parent),
            "serve",
            "--db",
            unprivileged_url,
            "--port",
            "0",
            "--embedder",
            "model2vec",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MEMORYSYNC_LOCAL_API_KEYS": ""},
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert_names_the_fix(done.stderr)
    assert "recall by meaning:" not in done.stdout
