"""Word recall from the Snowball analyzer (issue 34, item 2), on SQLite and, with
``MEMORYSYNC_TEST_BACKEND=postgres``, on PostgreSQL.

Memories are stored verbatim over the real HTTP API and recalled with ``k=3``:
exact stems (no word found by a shared prefix), unspaced scripts read as character
pairs, other languages stemmed in their own language, and the word index made again
at start when the analyzer that made it is not the running one (resumable: a
server killed with SIGKILL half-way, then started again, finishes the work).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from memorysync_local import embedded
from memorysync_local._storage.reindex import Reindex
from memorysync_local._text.analyzer import ANALYZER_VERSION, index_text, query_stems
from memorysync_local._text.owner import owner_token
from shared.local_server import _rows, client_for, execute
from shared.postgres import is_postgres_url

T = "local"


async def keep(client: httpx.AsyncClient, user: str, *texts: str) -> None:
    for text in texts:
        answer = await client.post(
            "/memory/add", json={"text": text, "verbatim": True}, headers={"X-End-User-ID": user}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["text"] == text


async def recall(client: httpx.AsyncClient, user: str, prompt: str) -> list[str]:
    answer = await client.post(
        "/v1/memory/recall", json={"tenant_id": T, "user_id": user, "prompt": prompt, "k": 3}
    )
    assert answer.status_code == 200, answer.text
    return [m["value"] for m in answer.json()["memories"]]


# Issue 34's table: each question shares a 5-letter prefix with the stored memory only.
COLLISIONS = [
    ("I had to cancel my gym membership.", "Do I have cancer?"),
    ("I love a good party.", "Who is my partner?"),
    ("My general practitioner is Dr. Lee.", "Am I generous?"),
]


@pytest.fixture
def served(make_local_server: Any) -> Any:
    # The word analyzer alone: recall by meaning (on by default) is off here.
    return make_local_server(served=True, embedder="none")


async def test_no_memory_is_recalled_for_a_word_it_only_shares_a_prefix_with(
    served: Any,
) -> None:
    async with client_for(served) as client:
        await keep(client, "one", *(stored for stored, _ in COLLISIONS))
        for stored, question in COLLISIONS:
            assert await recall(client, "one", question) == [], question
            # Alone with its question, too.
            user = f"alone-{COLLISIONS.index((stored, question))}"
            await keep(client, user, stored)
            assert await recall(client, user, question) == [], question
        # The same memories are found by their own words and forms.
        assert await recall(client, "one", "cancelling a membership") == [COLLISIONS[0][0]]
        assert await recall(client, "one", "parties") == [COLLISIONS[1][0]]
        assert await recall(client, "one", "Who is my practitioner?") == [COLLISIONS[2][0]]


@pytest.fixture
def default_served(make_local_server: Any) -> Any:
    # The server as a user gets it: recall by meaning with the shipped model, fused.
    return make_local_server(served=True)


# Why the shipped model still recalls them (bench/results.md item 18b): its token
# weights come from the vocabulary's order, where 1,000 single characters come before
# "the", so "who", "is", "my", "do", "have" keep half their weight and short questions
# look alike. `tools/distill_model.py --reweight` fixes that (0.45 -> 0.27, 0.25 ->
# 0.04) but was not shipped: it lost product-path and LoCoMo holdout answers.
_SHAPE = "the shipped model's function words: 'Do I have cancer?' / the gym 0.25, floor 0.25"
_PARTNER = "the shipped model's function words and 'partner' near 'love': cosine 0.45"


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(0, marks=pytest.mark.xfail(strict=True, reason=_SHAPE)),
        pytest.param(1, marks=pytest.mark.xfail(strict=True, reason=_PARTNER)),
        2,
    ],
)
async def test_the_collision_table_on_the_default_server(default_served: Any, row: int) -> None:
    stored, question = COLLISIONS[row]
    async with client_for(default_served) as client:
        # Meaning is on: a paraphrase sharing no word with its memory is found.
        await keep(client, "meaning", "I am lactose intolerant.")
        assert await recall(client, "meaning", "Can I have a milkshake?") == [
            "I am lactose intolerant."
        ]
        await keep(client, f"alone-{row}", stored)
        assert await recall(client, f"alone-{row}", question) == [], question


@pytest.mark.xfail(
    strict=True,
    reason="with all three stored, 'I love a good party.' clears the floor for the other "
    "questions too (0.42 for 'Do I have cancer?'): the shipped model's function words",
)
async def test_the_collision_table_on_the_default_server_one_user(default_served: Any) -> None:
    async with client_for(default_served) as client:
        await keep(client, "one", *(stored for stored, _ in COLLISIONS))
        for _, question in COLLISIONS:
            assert await recall(client, "one", question) == [], question


async def test_text_without_spaces_is_found_by_a_word_inside_it(served: Any) -> None:
    async with client_for(served) as client:
        await keep(client, "zh", "我喜欢寿司和拉面。", "我每天早上喝咖啡。")
        assert await recall(client, "zh", "寿司") == ["我喜欢寿司和拉面。"]
        assert (await recall(client, "zh", "我喝咖啡吗？"))[:1] == ["我每天早上喝咖啡。"]
        await keep(client, "ja", "東京に住んでいます。", "猫を二匹飼っています。")
        assert await recall(client, "ja", "東京") == ["東京に住んでいます。"]
        # Thai, written without spaces too, is read as pairs (marks and all).
        await keep(client, "th", "ผมชอบกินข้าวผัด", "ผมเลี้ยงแมวสองตัว")
        assert await recall(client, "th", "ข้าวผัด") == ["ผมชอบกินข้าวผัด"]
        assert (await recall(client, "ja", "どこに住んでいますか？"))[:1] == [
            "東京に住んでいます。"
        ]


def test_character_pairs_and_a_lone_character() -> None:
    assert index_text("我喜欢寿司") == "我喜 喜欢 欢寿 寿司"
    assert index_text("猫") == "猫"
    # Latin words beside them are stemmed as usual.
    assert index_text("寿司 restaurants") == "寿司 restaur"


async def test_other_languages_are_stemmed_in_their_own(served: Any) -> None:
    async with client_for(served) as client:
        await keep(
            client,
            "es",
            "Mis hermanas viven en Sevilla.",
            "Tengo dos perros muy juguetones.",
        )
        assert (await recall(client, "es", "¿Cómo se llama mi perro?"))[:1] == [
            "Tengo dos perros muy juguetones."
        ]
        assert (await recall(client, "es", "¿Dónde vive mi hermana?"))[:1] == [
            "Mis hermanas viven en Sevilla."
        ]
        await keep(client, "de", "Ich arbeite als Krankenschwester in Hamburg.")
        assert await recall(client, "de", "Wo arbeitet sie?") == [
            "Ich arbeite als Krankenschwester in Hamburg."
        ]


def test_a_prompt_word_is_read_in_each_likely_language() -> None:
    # "perros" (Spanish) is "perr" in Spanish and "perro" in English: either is found.
    assert "perr|perro" in query_stems("¿Dónde están mis perros?")


# The re-index after an analyzer change -------------------------------------------


def _meta(target: str, key: str) -> str | None:
    rows = _rows(target, "SELECT value FROM meta WHERE key = ?", (key,))
    return None if not rows else str(rows[0]["value"])


def _forget_the_analyzer(target: str) -> None:
    """What a database indexed by an older analyzer looks like: another version
    recorded, and terms that no prompt matches."""
    execute(target, "UPDATE meta SET value = 'words-0/old' WHERE key = ?", (Reindex.DONE,))
    if is_postgres_url(target):
        execute(target, "UPDATE memories SET stems = 'stale'")
    else:
        execute(target, "UPDATE memories_stems SET stems = 'stale'")


def _target(make_local_server: Any) -> str:
    """A database made by a server (its schema, its analyzer recorded), stopped."""
    server = make_local_server()
    target = str(server.db_path)
    server.close()
    assert _meta(target, Reindex.DONE) == ANALYZER_VERSION
    return target


async def test_a_changed_analyzer_re_indexes_at_start(
    make_local_server: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    first = make_local_server()
    target = str(first.db_path)
    async with client_for(first) as client:
        await keep(client, "ana", "I had to cancel my gym membership.", "我喜欢寿司和拉面。")
    first.close()
    _forget_the_analyzer(target)
    capfd.readouterr()
    with embedded(target) as again:
        async with client_for(again) as client:
            assert await recall(client, "ana", "寿司") == ["我喜欢寿司和拉面。"]
            assert await recall(client, "ana", "cancelled memberships") == [
                "I had to cancel my gym membership."
            ]
    err = capfd.readouterr().err
    assert f"re-indexing words for analyzer {ANALYZER_VERSION}: 2 memories" in err
    assert "re-indexed the words of 2 memories" in err
    assert _meta(target, Reindex.DONE) == ANALYZER_VERSION
    assert _meta(target, Reindex.UNDER_WAY) is None
    # A start with the same analyzer does nothing.
    with embedded(target):
        pass
    assert "re-index" not in capfd.readouterr().err


MANY = 20_000


def _fill(target: str) -> None:
    """``MANY`` memories of 10 users, stored as an older server left them."""
    now = "2026-01-01T00:00:00.000000Z"
    if is_postgres_url(target):
        execute(
            target,
            "INSERT INTO memories (tenant_id, user_id, text, origin, created_at, said_at) "
            "SELECT 'local', 'user-' || mod(i, 10), 'Enjoys hobby number ' || i, 'add', ?, ? "
            "FROM generate_series(1, ?) AS i",
            (now, now, MANY),
        )
        return
    with closing(sqlite3.connect(target)) as conn, conn:
        # The insert trigger's functions, as an older analyzer computed them.
        conn.create_function("ms_stems", 1, lambda text: "stale")
        conn.create_function("ms_owner", 2, owner_token)
        conn.create_function("ms_attribute_words", 1, lambda attribute: "")
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
            "INSERT INTO memories (tenant_id, user_id, text, origin, created_at, said_at) "
            "SELECT 'local', 'user-' || (i % 10), 'Enjoys hobby number ' || i, 'add', ?, ? "
            "FROM n",
            (MANY, now, now),
        )


def test_a_re_index_killed_half_way_finishes_at_the_next_start(
    make_local_server: Any,
) -> None:
    target = _target(make_local_server)
    _fill(target)
    _forget_the_analyzer(target)
    # The server in a process of its own, killed (SIGKILL) once a batch is committed.
    process = subprocess.Popen(
        [sys.executable, "-m", "memorysync_local._cli", "serve", "--db", target, "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stderr is not None
    seen = []
    try:
        for line in process.stderr:
            seen.append(line)
            if "re-indexing words: " in line:
                break
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stderr.close()
    assert any(f"{MANY:,} memories" in line for line in seen), seen
    under_way = _meta(target, Reindex.UNDER_WAY)
    assert under_way is not None
    assert under_way.startswith(ANALYZER_VERSION), under_way
    reached = int(under_way.rpartition("\t")[2])
    assert 0 < reached < MANY
    assert _meta(target, Reindex.DONE) != ANALYZER_VERSION
    # The next start resumes after the last committed batch and finishes.
    again = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from memorysync_local import embedded; embedded({target!r}).close()",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ,
    )
    assert f"resuming after memory {reached:,}: {MANY - reached:,} memories" in again.stderr
    assert f"re-indexed the words of {MANY - reached:,} memories" in again.stderr
    assert _meta(target, Reindex.DONE) == ANALYZER_VERSION
    assert _meta(target, Reindex.UNDER_WAY) is None
    if is_postgres_url(target):
        stale = _rows(target, "SELECT COUNT(*) AS n FROM memories WHERE stems = 'stale'", ())
        assert stale[0]["n"] == 0
    else:
        indexed = _rows(target, "SELECT COUNT(*) AS n FROM memories_stems", ())
        assert indexed[0]["n"] == MANY
    found = asyncio.run(_recall_once(target, "user-3", "hobbies"))
    assert len(found) == 3
    assert all(text.startswith("Enjoys hobby number ") for text in found)


async def _recall_once(target: str, user: str, prompt: str) -> list[str]:
    with embedded(target) as server:
        async with client_for(server) as client:
            return await recall(client, user, prompt)


def test_the_language_identifier_is_loaded_when_the_store_opens() -> None:
    """Loaded on the first text read, it held the first recall after a start for about
    0.6 s (a first turn's recall budget); a fresh process, so no other test loaded it."""
    code = (
        "from memorysync_local import create_app\n"
        "from memorysync_local._text import analyzer\n"
        "before = analyzer.loaded()\n"
        "create_app(':memory:', embedder='none').state.store.close()\n"
        "print(before, analyzer.loaded())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["False", "True"]


def test_the_recorded_progress_names_its_analyzer() -> None:
    job = Reindex("v2")
    assert job.resume_from(job.progress(4_000)) == 4_000
    assert job.resume_from(Reindex("v1").progress(4_000)) is None
    assert job.resume_from(None) is None
    assert job.resume_from("v2\tnot-a-number") is None


def test_storage_reads_text_through_the_neutral_module_only() -> None:
    storage = Path(__file__).parents[1] / "src" / "memorysync_local" / "_storage"
    for module in storage.rglob("*.py"):
        imports = [
            line
            for line in module.read_text(encoding="utf-8").splitlines()
            if line.lstrip().startswith(("from ", "import "))
        ]
        assert not [line for line in imports if "memorysync_local._recall" in line], module
