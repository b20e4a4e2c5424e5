"""Three ``memorysync-local serve`` processes on one PostgreSQL, clients spread over them.

Each process is the real CLI in a child process, on its own loopback port, all three
on the test's database. What must hold, whichever process a request reaches:

- identical retries sent at once through different processes store each turn once,
  and every transcript lists its turns in order;
- ``kill -9`` of one process in the middle of a burst loses no write it acknowledged,
  and the extraction job it had claimed is done by the others;
- a user erased through one process is gone from recall through another at once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

# Each test starts three server interpreters (and stops them, each draining its work).
pytestmark = pytest.mark.timeout(600)

KEY = "ms_three_processes"
TENANT = "local"
# The CLI; with MEMORYSYNC_TEST_STALL set, its extraction worker stalls inside its
# first job (as a slow model would), holding the claim, until the process dies.
SERVE = """
import os, sys, threading
from memorysync_local._cli import commands
from memorysync_local._extraction.rules import RuleBasedExtractor
fast = RuleBasedExtractor.extract
def stalled(self, text, *, explicit=False):
    if os.environ.get("MEMORYSYNC_TEST_STALL") and threading.current_thread().name.startswith(
        "memorysync-extract"
    ):
        threading.Event().wait()
    return fast(self, text, explicit=explicit)
RuleBasedExtractor.extract = stalled
sys.exit(commands.main(sys.argv[1:]))
"""
DEADLINE = 60.0


class Served:
    """One ``serve`` child process on a free port."""

    def __init__(self, db: str, *, stall: bool = False, extra: tuple[str, ...] = ()) -> None:
        env = {**os.environ, "MEMORYSYNC_LOCAL_API_KEYS": KEY}
        if stall:
            env["MEMORYSYNC_TEST_STALL"] = "1"
        args = ["serve", "--db", db, "--port", "0", "--log-level", "warning", *extra]
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVE, *args, "--async-extraction"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if " at " not in line:
            self.stop()
            raise RuntimeError(f"serve did not start: {line!r} {self.errors()}")
        self.base_url = line.rsplit(" at ", 1)[1].strip()

    def errors(self) -> str:
        return (
            ""
            if self.process.poll() is None or not self.process.stderr
            else self.process.stderr.read()
        )

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base_url, headers={"X-API-Key": KEY}, timeout=30)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def stop_all(started: list[Served]) -> None:
    """Stop the servers together: each drains its work on SIGTERM, and one after
    another adds those waits up on a busy machine."""
    for served in started:
        if served.process.poll() is None:
            served.process.terminate()
    for served in started:
        served.stop()


@pytest.fixture
def three(postgres_url: str) -> Iterator[list[Served]]:
    started: list[Served] = []
    try:
        for _ in range(3):
            started.append(Served(postgres_url))
        yield started
    finally:
        stop_all(started)


def _rows(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql.encode(), params).fetchall()


def _append_body(session: str, seq: int, text: str) -> dict[str, Any]:
    role = "user" if seq % 2 == 0 else "assistant"
    return {
        "tenant_id": TENANT,
        "user_id": f"user-{session}",
        "session_id": session,
        "source": "test",
        "turns": [
            {"role": role, "content": text, "seq": seq, "idempotency_key": f"{session}:{seq}"}
        ],
        "extract": role == "user",
    }


async def test_identical_retries_through_three_processes_store_each_turn_once_in_order(
    three: list[Served], postgres_url: str
) -> None:
    sessions = [f"s{i}" for i in range(6)]
    turns = 8
    clients = [served.client() for served in three]
    try:

        async def converse(session: str) -> list[bool]:
            created = []
            for seq in range(turns):
                body = _append_body(session, seq, f"I like topic {session} {seq}.")
                # The same turn through all three processes at once.
                answers = await asyncio.gather(
                    *(c.post("/v1/history/append", json=body) for c in clients)
                )
                assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
                created.append(sum(a.json()["items"][0]["created"] for a in answers) == 1)
            return created

        created = await asyncio.gather(*(converse(s) for s in sessions))
        assert all(all(each) for each in created)
        for i, session in enumerate(sessions):
            listed = await clients[i % 3].post(
                "/v1/history/list",
                json={"tenant_id": TENANT, "user_id": f"user-{session}", "session_id": session},
            )
            items = listed.json()["items"]
            assert [item["seq"] for item in items] == list(range(turns))
        stored = _rows(
            postgres_url, "SELECT COUNT(*), COUNT(DISTINCT (session_id, seq)) FROM history"
        )
        assert stored == [(len(sessions) * turns, len(sessions) * turns)]
    finally:
        for client in clients:
            await client.aclose()


async def test_a_turn_sent_through_three_processes_at_once_is_extracted_once(
    three: list[Served], postgres_url: str
) -> None:
    body = {
        "tenant_id": TENANT,
        "user_id": "ana",
        "text": "I'm allergic to peanuts.",
        "source": "test",
        "speaker": "human@s1",
        "occurred_at": "2026-03-01T10:00:00Z",
    }
    clients = [served.client() for served in three]
    try:
        answers = await asyncio.gather(
            *(c.post("/v1/memory/add_turn", json=body) for c in clients for _ in range(3))
        )
    finally:
        for client in clients:
            await client.aclose()
    statuses = sorted(a.json()["processing_status"] for a in answers)
    assert statuses == ["distilling"] + ["skipped_replay"] * 8
    _wait_for_no_jobs(postgres_url)
    assert _rows(postgres_url, "SELECT text FROM memories WHERE user_id = 'ana'") == [
        ("Allergic to peanuts",)
    ]


def _wait_for_no_jobs(url: str) -> None:
    deadline = time.monotonic() + DEADLINE
    with psycopg.connect(url, autocommit=True) as conn:
        while conn.execute("SELECT COUNT(*) FROM extraction_jobs").fetchone() != (0,):
            assert time.monotonic() < deadline, "extraction jobs left undone"
            conn.execute("SELECT pg_sleep(0.05)")


def _wait_for_vectors(url: str) -> None:
    deadline = time.monotonic() + DEADLINE
    missing = (
        "SELECT COUNT(*) FROM memories m WHERE NOT EXISTS "
        "(SELECT 1 FROM memory_vectors v WHERE v.memory_id = m.id)"
    )
    with psycopg.connect(url, autocommit=True) as conn:
        while conn.execute(missing).fetchone() != (0,):
            assert time.monotonic() < deadline, "memories left without a vector"
            conn.execute("SELECT pg_sleep(0.05)")


def _claimed_by(url: str, served: Served) -> list[int]:
    """Ids of the jobs held by ``served``'s worker connection."""
    return [
        int(r[0])
        for r in _rows(
            url,
            "SELECT j.id FROM extraction_jobs j JOIN pg_stat_activity a ON a.pid = j.claimed_by "
            "WHERE a.application_name = %s",
            (f"memorysync-worker-{served.process.pid}",),
        )
    ]


async def test_kill_9_of_one_process_mid_burst_loses_no_acknowledged_write(
    postgres_url: str,
) -> None:
    everyone: list[Served] = []
    try:
        everyone.append(Served(postgres_url, stall=True))
        everyone += [Served(postgres_url), Served(postgres_url)]
        held, acknowledged = await _burst_killing(everyone, postgres_url)
        _wait_for_no_jobs(postgres_url)  # the two left did every job, the dead one's too
    finally:
        for served in everyone:
            served.stop()
    assert held
    stored = _rows(postgres_url, "SELECT session_id, seq FROM history ORDER BY id")
    assert sorted(acknowledged) == sorted(stored)  # nothing lost, nothing twice
    facts = _rows(postgres_url, "SELECT history_id FROM memories WHERE origin = 'history'")
    assert len(facts) == len(stored) == len({h for (h,) in facts})


async def _burst_killing(
    everyone: list[Served], url: str
) -> tuple[list[int], list[tuple[str, int]]]:
    """Turns spread over the three; the first dies mid-burst once its worker holds a
    job. The jobs it held, and the turns acknowledged."""
    doomed = everyone[0]
    clients = [served.client() for served in everyone]
    acknowledged: set[tuple[str, int]] = set()

    async def send(user: int, seq: int) -> None:
        body = _append_body(f"u{user}", seq * 2, f"I live in City{user}x{seq}.")
        for attempt in range(3):  # a request the dead process dropped goes elsewhere
            try:
                answer = await clients[(user + seq + attempt) % 3].post(
                    "/v1/history/append", json=body
                )
            except httpx.TransportError:
                continue
            assert answer.status_code == 200, answer.text
            acknowledged.add((f"u{user}", seq * 2))
            return

    try:
        await asyncio.gather(*(send(user, 0) for user in range(9)))
        deadline = time.monotonic() + DEADLINE
        extra = 100
        # The doomed process's worker holds a job (its extraction never returns)...
        while not (held := _claimed_by(url, doomed)):
            assert time.monotonic() < deadline, "the stalled worker claimed no job"
            extra += 1
            await send(9, extra)
        before = len(acknowledged)
        burst = asyncio.gather(*(send(user, seq) for user in range(9) for seq in range(1, 6)))
        while len(acknowledged) < before + 5 and not burst.done():  # the burst is under way...
            await asyncio.wait([burst], timeout=0.01)
        doomed.kill()  # ...when the process dies.
        await burst
    finally:
        for client in clients:
            await client.aclose()
    return held, sorted(acknowledged)


async def test_a_user_erased_through_one_process_is_gone_from_recall_through_another(
    three: list[Served],
) -> None:
    writer, reader, eraser = (served.client() for served in three)
    try:
        for text in ("My sister lives in Porto.", "I play the violin every evening."):
            added = await writer.post(
                "/memory/add",
                json={"text": text, "source": "t"},
                headers={"X-End-User-ID": "ana"},
            )
            assert added.status_code == 200, added.text
        recall = {"tenant_id": TENANT, "user_id": "ana", "prompt": "violin", "k": 5}
        before = await reader.post("/v1/memory/recall", json=recall)
        assert [m["text"] for m in before.json()["memories"]] == ["Plays the violin every evening"]
        erased = await eraser.post("/x-local/v1/users/forget", json={"user_id": "ana"})
        assert erased.json()["memories"] == 2
        after = await reader.post("/v1/memory/recall", json=recall)
        assert after.json()["memories"] == []
    finally:
        for client in (writer, reader, eraser):
            await client.aclose()


# Two meaning axes: instruments, cities. Every other word is unknown to the model.
AXES = {"violin": 0, "cello": 0, "play": 0, "plays": 0, "porto": 1, "lisbon": 1, "live": 1}


def _tiny_model(folder: Path) -> Path:
    """A static model2vec model on disk: words on the same axis mean the same."""
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.normalizers import Lowercase
    from tokenizers.pre_tokenizers import Whitespace

    words = ["[UNK]", "[PAD]", *AXES]
    tokenizer = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.normalizer = Lowercase()
    tokenizer.pre_tokenizer = Whitespace()
    vectors = np.zeros((len(words), 2), dtype=np.float32)
    for word, axis in AXES.items():
        vectors[words.index(word), axis] = 1.0
    StaticModel(vectors, tokenizer).save_pretrained(str(folder))
    return folder


async def test_vectors_held_by_one_process_follow_writes_and_erasures_through_the_others(
    postgres_url: str, tmp_path: Path
) -> None:
    embedder = ("--embedder", f"model2vec:{_tiny_model(tmp_path / 'tiny')}")
    started: list[Served] = []
    try:
        started += [Served(postgres_url, extra=embedder) for _ in range(3)]
        writer, reader, eraser = (served.client() for served in started)
        try:

            async def tell(text: str) -> None:
                body = {"tenant_id": TENANT, "user_id": "ana", "text": text, "source": "t"}
                answer = await writer.post("/v1/memory/add_turn", json=body)
                assert answer.json()["processing_status"] in ("completed", "distilling")
                _wait_for_no_jobs(postgres_url)
                _wait_for_vectors(postgres_url)  # written just after the facts commit

            async def recall(prompt: str) -> list[str]:
                body = {"tenant_id": TENANT, "user_id": "ana", "prompt": prompt, "k": 3}
                found = (await reader.post("/v1/memory/recall", json=body)).json()
                return [m["text"] for m in found["memories"]]

            await tell("I play the cello.")
            # No word in common: the reader's process finds it by its vector (and now
            # holds ana's vectors in memory).
            assert any("cello" in t for t in await recall("violin"))
            await tell("I live in Lisbon.")  # a vector added through another process
            assert any("Lisbon" in t for t in await recall("porto"))
            erased = await eraser.post("/x-local/v1/users/forget", json={"user_id": "ana"})
            assert erased.json()["memories"] == 2
            assert await recall("violin") == []  # the held matrix did not outlive her
            await tell("I play the cello.")
            assert any("cello" in t for t in await recall("violin"))
        finally:
            for client in (writer, reader, eraser):
                await client.aclose()
    finally:
        stop_all(started)
