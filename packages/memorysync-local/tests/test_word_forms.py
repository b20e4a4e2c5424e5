"""Recall by word forms (issue 14, item 2; issue 34, item 2): Snowball's inflected forms,
exact stems, questions about the user, upgrades.

Facts go in through ``add_turn`` and questions through ``recall``, on the
embedded and the served server alike; the upgrade tests open a copy of
``tests/data/schema_v2.sqlite3``, written by this server at schema version 2
(before the stems index) through its HTTP API: user ``ana`` told "I'm allergic
to peanuts.", "I run a marathon every autumn.", "My cat is called Miso.",
"I work as a dentist in Berlin." and "I play the violin in an amateur
orchestra."; user ``ben`` told "I'm allergic to cats.".
"""

from __future__ import annotations

import io
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from memorysync_local import Fact, embedded
from memorysync_local._recall.words import index_text, query_stems
from memorysync_local._service.facts import FactContext
from memorysync_local._storage.batches import PROGRESS_FROM
from memorysync_local._storage.sqlite.backfill import backfill_stems
from memorysync_local._storage.sqlite.database import SCHEMA_VERSION, Database
from memorysync_local._storage.sqlite.word_index import match_expression
from shared.local_server import client_for

T = "local"
V2 = Path(__file__).parent / "data" / "schema_v2.sqlite3"


async def tell(client: httpx.AsyncClient, user: str, *turns: str) -> None:
    for turn in turns:
        answer = await client.post(
            "/v1/memory/add_turn",
            json={"tenant_id": T, "user_id": user, "text": turn, "source": "test"},
        )
        assert answer.status_code == 200, answer.text


async def recall(client: httpx.AsyncClient, user: str, prompt: str) -> list[dict[str, Any]]:
    answer = await client.post(
        "/v1/memory/recall", json={"tenant_id": T, "user_id": user, "prompt": prompt, "k": 5}
    )
    assert answer.status_code == 200, answer.text
    memories: list[dict[str, Any]] = answer.json()["memories"]
    return memories


def texts(memories: list[dict[str, Any]]) -> list[str]:
    return [m["value"] for m in memories]


@pytest.mark.parametrize(
    ("word", "other"),
    [
        ("allergy", "allergies"),
        ("marathon", "marathons"),
        ("swim", "swimming"),
        ("city", "cities"),
        ("play", "played"),
        ("photograph", "photographs"),
    ],
)
def test_inflected_forms_share_a_stem(word: str, other: str) -> None:
    assert index_text(f"I like the {word}") == index_text(f"I like the {other}")


def test_unrelated_words_keep_apart() -> None:
    # Exact stems: no shared prefix makes two words one (issue 34's collision table).
    for word, other in [
        ("cat", "car"),
        ("peanuts", "pears"),
        ("cancel", "cancer"),
        ("party", "partner"),
        ("general", "generous"),
    ]:
        assert set(query_stems(word)).isdisjoint(index_text(f"my {other}").split()), word


def test_a_prompt_becomes_quoted_exact_terms_only() -> None:
    expression = match_expression(query_stems('Any "allergies" OR NEAR(x) owner:*?'))
    assert expression is not None
    # Every term is quoted: no FTS5 syntax from the prompt reaches the query.
    for part in expression.split(" OR "):
        assert part.startswith('"'), expression
        assert part.endswith('"'), expression
    assert query_stems("the and of") == []
    assert match_expression([]) is None


def test_index_text_drops_function_words_and_possessives() -> None:
    assert index_text("User's cat is called Miso") == "user cat call miso"
    assert index_text(None) == ""


async def test_inflected_forms_recall_their_fact(client: httpx.AsyncClient) -> None:
    await tell(
        client,
        "u1",
        "I'm allergic to peanuts.",
        "I run a marathon every autumn.",
        "I play the violin in an amateur orchestra.",
        "I live in Porto.",
    )
    assert texts(await recall(client, "u1", "Am I allergic?"))[:1] == ["Allergic to peanuts"]
    for prompt in ("Which marathons?", "running a marathon", "Do I run?"):
        assert texts(await recall(client, "u1", prompt))[:1] == ["Runs a marathon every autumn"], (
            prompt
        )
    assert texts(await recall(client, "u1", "Who plays violins?"))[:1] == [
        "Plays the violin in an amateur orchestra"
    ]


async def test_scores_stay_in_range_and_order(client: httpx.AsyncClient) -> None:
    await tell(client, "u1", "I'm allergic to peanuts.", "I love peanut butter cookies.")
    memories = await recall(client, "u1", "peanut allergies")
    scores = [m["score"] for m in memories]
    assert len(scores) == 2
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    # Both prompt words matched beats one of two.
    assert memories[0]["value"] == "Allergic to peanuts"
    assert scores[0] > scores[1]


async def test_a_question_about_the_user_recalls_their_facts(client: httpx.AsyncClient) -> None:
    await tell(client, "u1", "My cat is called Miso.", "I work as a dentist in Berlin.")
    await tell(client, "someone-else", "I live in Oslo.")
    memories = await recall(client, "u1", "Do you remember what I told you about myself?")
    assert sorted(texts(memories)) == ["User's cat is called Miso", "Works as a dentist in Berlin"]
    assert all(0.0 < m["score"] <= 1.0 for m in memories)
    # A topic question that matches nothing still recalls nothing.
    assert await recall(client, "u1", "What about the weather tomorrow?") == []


async def test_another_users_matching_fact_is_never_recalled(client: httpx.AsyncClient) -> None:
    await tell(client, "u1", "I'm allergic to peanuts.")
    await tell(client, "u2", "I'm allergic to shellfish.")
    assert texts(await recall(client, "u1", "allergies")) == ["Allergic to peanuts"]
    assert texts(await recall(client, "u2", "allergies")) == ["Allergic to shellfish"]


@pytest.mark.parametrize("served", [False, True], ids=["embedded", "served"])
async def test_a_forgotten_memory_leaves_the_stems_index(
    make_local_server: Callable[..., Any], tmp_path: Path, served: bool
) -> None:
    # SQLite's own stems table (on PostgreSQL the stems are a column of the memory).
    server = make_local_server(served=served, db_path=str(tmp_path / "stems.db"))
    async with client_for(server) as client:
        await tell(client, "u1", "I'm allergic to peanuts.")
        (memory,) = await recall(client, "u1", "allergies")
        answer = await client.request(
            "DELETE",
            "/memory/forget",
            headers={"X-End-User-Id": "u1"},
            json={"memory_ids": [memory["memory_id"]]},
        )
        assert answer.status_code == 200, answer.text
        assert answer.json() == [memory["memory_id"]]
        assert await recall(client, "u1", "allergies") == []
    with closing(sqlite3.connect(server.db_path)) as conn:
        left = conn.execute(
            "SELECT COUNT(*) FROM memories_stems WHERE rowid = ?", (memory["memory_id"],)
        ).fetchone()[0]
    assert left == 0


@pytest.fixture
def v2_copy(tmp_path: Path) -> Path:
    path = tmp_path / "v2.db"
    shutil.copy(V2, path)
    return path


async def test_a_version_2_file_is_upgraded_and_recalls_word_forms(v2_copy: Path) -> None:
    with closing(sqlite3.connect(v2_copy)) as conn:
        before = conn.execute("SELECT id, user_id, text FROM memories ORDER BY id").fetchall()
    with embedded(str(v2_copy), embedder="none") as server:
        async with client_for(server) as client:
            assert texts(await recall(client, "ana", "Am I allergic?")) == ["Allergic to peanuts"]
            assert texts(await recall(client, "ben", "Am I allergic?")) == ["Allergic to cats"]
            assert texts(await recall(client, "ana", "Who plays violins?")) == [
                "Plays the violin in an amateur orchestra"
            ]
            # New memories are indexed by the trigger, beside the migrated ones.
            await tell(client, "ana", "I'm learning Japanese.")
            assert texts(await recall(client, "ana", "Who learns japanese?"))[:1] == [
                "Learning Japanese"
            ]
    with closing(sqlite3.connect(v2_copy)) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY 1")]
        after = conn.execute("SELECT id, user_id, text FROM memories ORDER BY id").fetchall()
        indexed = conn.execute("SELECT COUNT(*) FROM memories_stems").fetchone()[0]
    assert versions == list(range(1, SCHEMA_VERSION + 1))
    assert 3 in versions
    # Nothing stored before was lost or changed by the upgrade.
    assert after[: len(before)] == before
    assert indexed == len(after)


def _grow(path: Path, count: int) -> None:
    """Add ``count`` memories to a version-2 file directly (as a large old file has)."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executemany(
            "INSERT INTO memories (tenant_id, user_id, text, origin, created_at) "
            "VALUES (?, ?, ?, 'add', ?)",
            [(T, f"user-{i % 50}", f"Enjoys hobby number {i}", now) for i in range(count)],
        )


def test_a_large_upgrade_shows_progress_and_indexes_everything(
    v2_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _grow(v2_copy, PROGRESS_FROM + 2_000)
    db = Database(str(v2_copy))
    db.close()
    err = capsys.readouterr().err
    total = PROGRESS_FROM + 2_000 + 6
    assert "indexing word forms" in err
    assert f"{total:,} / {total:,} memories" in err
    with closing(sqlite3.connect(v2_copy)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM memories_stems").fetchone()[0] == total


def test_a_small_upgrade_shows_no_bar(v2_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Database(str(v2_copy)).close()
    # The schema-3 backfill is quick; only the analyzer's re-index says what it did.
    err = capsys.readouterr().err
    assert "indexing word forms" not in err
    assert "re-indexed the words of 6 memories" in err


def test_the_backfill_reports_to_the_given_stream() -> None:
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, tenant_id, user_id, text)")
        conn.execute("CREATE VIRTUAL TABLE memories_stems USING fts5 (owner, stems)")
        conn.executemany(
            "INSERT INTO memories (tenant_id, user_id, text) VALUES ('t', 'u', ?)",
            [(f"Likes tea number {i}",) for i in range(PROGRESS_FROM)],
        )
        out = io.StringIO()
        assert backfill_stems(conn, out=out) == PROGRESS_FROM
    assert out.getvalue().endswith(f"{PROGRESS_FROM:,} / {PROGRESS_FROM:,} memories\n")


def _insert(server: Any, user: str, facts: list[str]) -> None:
    """Many facts at once, straight into the store (as the benchmark loads them)."""
    ctx = FactContext(
        tenant_id=T,
        user_id=user,
        source="test",
        session_id=None,
        metadata={},
        origin="add",
        request_id="req_test",
    )
    with server.store.facts.write() as session:
        server.store.facts.insert(session, [Fact(text) for text in facts], ctx)


async def test_an_old_fact_behind_many_newer_matches_is_still_recalled(
    make_local_server: Any,
) -> None:
    server = make_local_server(embedder="none")
    many = 200  # more than recall reads per stem (at least 50, 4 x k)
    _insert(server, "u1", ["Allergic to peanuts", "Plans a weekend in Porto"])
    _insert(server, "u1", [f"Plans to visit city number {i}" for i in range(many)])
    _insert(server, "u1", [f"Enjoys chess on weekends, game {i}" for i in range(many)])
    async with client_for(server) as client:
        # A rare stem: its fact is older than every common-stem match.
        assert texts(await recall(client, "u1", "weekend plans and allergies"))[:1] == [
            "Allergic to peanuts"
        ]
        # Two common stems together: older than each stem's newest matches.
        assert texts(await recall(client, "u1", "my weekend plans"))[:1] == [
            "Plans a weekend in Porto"
        ]
        # One common stem: the newest of its (equal-scoring) matches come first.
        assert texts(await recall(client, "u1", "chess"))[:2] == [
            f"Enjoys chess on weekends, game {many - 1}",
            f"Enjoys chess on weekends, game {many - 2}",
        ]


async def test_accents_and_curly_apostrophes_match_alike(client: httpx.AsyncClient) -> None:
    await tell(client, "u1", "I love the café near the Musée d’Orsay.", "I live in Zürich.")
    memories = await recall(client, "u1", "cafe recommendations")
    assert [m["value"] for m in memories][:1] == ["Loves the café near the Musée d'Orsay"]
    # Found by the folded index and scored as matching (not as an empty match).
    # One of two stems matched, the rarer ("recommend", in no memory) not: about half.
    assert memories[0]["score"] >= 0.25
    assert texts(await recall(client, "u1", "Zurich"))[:1] == ["Lives in Zürich"]
    assert index_text("User’s café") == index_text("user cafe") == "user cafe"
