"""``memorysync-local migrate --from PATH --to URL``: a SQLite file's data in PostgreSQL.

A server on a SQLite file is given every kind of data (memories with tags, edits and
supersession, transcripts, replay receipts, client refs, quota counts, vectors); the
file is migrated; a server on the PostgreSQL database must then answer every read as
the SQLite server did, ids included, and keep numbering after them.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from memorysync_local import embedded
from memorysync_local._cli import build_parser
from memorysync_local._cli.migrate_command import run_migrate

KEY = "ms_migrate"
T = "local"


def migrate(source: str, target: str) -> tuple[int, str]:
    err = io.StringIO()
    status = run_migrate(
        build_parser().parse_args(["migrate", "--from", source, "--to", target]), err
    )
    return status, err.getvalue()


def _client(server: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=server.transport, base_url=server.base_url, headers={"X-API-Key": KEY}
    )


async def _fill(db: str, embedder: Any) -> None:
    """Every kind of data, through the API, into the SQLite file ``db``."""
    bo = {"X-End-User-ID": "bo"}
    with embedded(db, api_key=KEY, embedder=embedder) as server:
        async with _client(server) as c:
            for text in ("I live in Porto.", "I play the violin.", "I live in Lisbon now."):
                turn = {"tenant_id": T, "user_id": "ana", "text": text, "source": "t"}
                assert (await c.post("/v1/memory/add_turn", json=turn)).status_code == 200
            history = {
                "tenant_id": T,
                "user_id": "ana",
                "session_id": "autogen::s1",
                "source": "t",
                "turns": [
                    {"role": "user", "content": "My sister is Maria.", "seq": 1},
                    {"role": "assistant", "content": "Noted.", "seq": 2},
                ],
            }
            assert (await c.post("/v1/history/append", json=history)).status_code == 200
            add = {"text": "Prefers tea to coffee", "tags": ["drinks"], "client_ref": "r1"}
            added = (await c.post("/memory/add", json=add, headers=bo)).json()
            edit = {"importance": 0.9, "metadata": {"k": "v"}}
            patched = await c.patch(f"/memory/{added['id']}", json=edit, headers=bo)
            assert patched.status_code == 200


async def _reads(db: str, embedder: Any) -> dict[str, Any]:
    """What a client reads back: exports, transcript, recall, history of an edit."""
    found: dict[str, Any] = {}
    with embedded(db, api_key=KEY, embedder=embedder) as server:
        async with _client(server) as c:
            for user in ("ana", "bo"):
                answer = await c.get("/memory/export", headers={"X-End-User-ID": user})
                found[user] = answer.json()
                found[user].pop("generated_at")
            recall = {"tenant_id": T, "user_id": "ana", "prompt": "where do I live?", "k": 5}
            found["recall"] = (await c.post("/v1/memory/recall", json=recall)).json()
            listing = {"tenant_id": T, "user_id": "ana", "session_id": "autogen::s1"}
            found["history"] = (await c.post("/v1/history/list", json=listing)).json()
            bo = found["bo"]["memories"][0]["id"]
            edits = await c.get(f"/memory/{bo}/history", headers={"X-End-User-ID": "bo"})
            found["revisions"] = edits.json()["revisions"]
            replay = {"tenant_id": T, "user_id": "ana", "text": "I live in Porto.", "source": "t"}
            found["replay"] = (await c.post("/v1/memory/add_turn", json=replay)).json()
            new = await c.post(
                "/memory/add", json={"text": "Owns a bike"}, headers={"X-End-User-ID": "cy"}
            )
            found["next_id"] = new.json()["id"]
    found["recall"].pop("latency_ms")
    found["replay"].pop("request_id")
    return found


async def test_a_migrated_database_answers_every_read_as_the_sqlite_file_did(
    tmp_path: Path, postgres_url: str, hash_embedder: Any
) -> None:
    db = str(tmp_path / "memorysync.db")
    await _fill(db, hash_embedder)
    status, report = migrate(db, postgres_url)
    assert status == 0, report
    assert "copying memories" in report
    assert "copying history 2 / 2" in report
    assert "moved" in report
    with psycopg.connect(postgres_url) as conn:
        vectors = conn.execute("SELECT COUNT(*) FROM memory_vectors").fetchone()
    assert vectors is not None
    assert vectors[0] > 0
    before, after = await _reads(db, hash_embedder), await _reads(postgres_url, hash_embedder)
    assert json.dumps(after, sort_keys=True) == json.dumps(before, sort_keys=True)
    assert before["replay"]["already_exists"] is True  # the replay rule came along


async def test_migrate_refuses_a_database_that_holds_data_and_writes_nothing(
    tmp_path: Path, postgres_url: str, hash_embedder: Any
) -> None:
    db = str(tmp_path / "memorysync.db")
    await _fill(db, hash_embedder)
    assert migrate(db, postgres_url)[0] == 0
    with psycopg.connect(postgres_url) as conn:
        count = conn.execute("SELECT COUNT(*) FROM memories").fetchone()
    status, report = migrate(db, postgres_url)
    assert status == 2
    assert "already holds memories" in report
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT COUNT(*) FROM memories").fetchone() == count


@pytest.mark.parametrize(
    ("source", "target", "said"),
    [
        ("missing.db", "postgresql://u@/db", "--from must be a SQLite file"),
        ("memorysync.db", "./other.db", "--to must be a postgresql:// URL"),
    ],
)
def test_migrate_names_a_wrong_argument(
    tmp_path: Path, source: str, target: str, said: str
) -> None:
    (tmp_path / "memorysync.db").write_bytes(b"")
    status, report = migrate(str(tmp_path / source), target)
    assert status == 2
    assert said in report


async def test_migrate_never_prints_the_password_of_the_target(
    tmp_path: Path, postgres_url: str, hash_embedder: Any
) -> None:
    db = str(tmp_path / "memorysync.db")
    await _fill(db, hash_embedder)
    # The test server trusts local connections: the password is carried, not checked.
    with_password = postgres_url.replace("postgres@", "postgres:s3cret-pw@", 1)
    status, report = migrate(db, with_password)
    assert status == 0, report
    assert "s3cret-pw" not in report
    assert "postgres:***@" in report
