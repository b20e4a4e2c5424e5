"""``memorysync-local serve --workers N``: N processes on one socket and one SQLite file.

Each test runs the real CLI in a child process (``shared.served_workers``: which
worker answers is chosen by stopping the others).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memorysync_local._cli import main
from memorysync_local._cli.serving import ServeSettings
from memorysync_local._cli.workers import serve_workers
from memorysync_local._extraction.rules import RuleBasedExtractor
from memorysync_local._plans import Caller
from memorysync_local._served import bind_sockets
from memorysync_local._service.store import Store
from memorysync_local._storage.records import ReadWindow
from shared.served_workers import (
    DEADLINE,
    ServedWorkers,
    alive,
    facts_once_extracted,
    keep,
    recall,
)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServedWorkers]:
    server = ServedWorkers(tmp_path / "workers.db")
    try:
        yield server
    finally:
        server.stop()


def test_workers_need_linux(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--workers", "2"])
    assert exited.value.code == 2
    assert "--workers above 1 needs Linux" in capsys.readouterr().err


def test_each_worker_finds_what_another_stored_by_words_and_by_meaning(
    served: ServedWorkers,
) -> None:
    first, second = served.workers
    with served.only(first) as client:
        keep(client, "ana", "I am allergic to peanuts.")
        assert recall(client, "ana", "peanuts") == ["Allergic to peanuts"]
    with served.only(second) as client:
        # Stored by the other process; "snack" shares no word with it: found by meaning.
        assert recall(client, "ana", "peanuts") == ["Allergic to peanuts"]
        assert "Allergic to peanuts" in recall(client, "ana", "What snack can I eat?")
        keep(client, "ana", "I live in Porto.")
    with served.only(first) as client:
        # The first worker searched this user's vectors before: its copy catches up.
        assert recall(client, "ana", "Which city is my home?")[:1] == ["Lives in Porto"]
        assert recall(client, "ana", "Porto") == ["Lives in Porto"]


def test_a_killed_worker_is_replaced_and_nothing_it_acknowledged_is_lost(
    served: ServedWorkers,
) -> None:
    first, second = served.workers
    with served.only(first) as client:
        keep(client, "bo", "I work as a nurse.")
    os.kill(first, signal.SIGKILL)
    gone, new = served.replacement()
    assert gone == first
    assert new not in served.workers
    served.workers = [new, second]
    for pid in served.workers:
        with served.only(pid) as client:
            assert recall(client, "bo", "nurse") == ["Works as a nurse"]
    status, _ = served.stop()
    assert status == 0
    assert not alive(first)


def test_extraction_jobs_are_worked_once_whichever_worker_stored_them(tmp_path: Path) -> None:
    served = ServedWorkers(tmp_path / "jobs.db", "--async-extraction")
    try:
        first, second = served.workers
        # One worker is the lead: it works the jobs it stores and finds the other's.
        # Each turn's facts are awaited before the next, so no worker is ever stopped
        # while it holds the database's write lock.
        for pid, text, expected in (
            (first, "My sister lives in Lisbon.", ["User's sister lives in Lisbon"]),
            (second, "I own a cat.", ["Owns a cat", "User's sister lives in Lisbon"]),
        ):
            with served.only(pid) as client:
                answer = client.post(
                    "/v1/memory/add_turn",
                    json={"tenant_id": "local", "user_id": "cy", "text": text, "source": "t"},
                )
                assert answer.json()["processing_status"] == "distilling"
            with served.client() as client:  # both workers running: either answers
                assert facts_once_extracted(client, "cy", len(expected)) == expected  # once each
    finally:
        status, err = served.stop()
    assert status == 0, err
    assert not [pid for pid in served.workers if alive(pid)]


def test_workers_stop_when_their_parent_is_killed(served: ServedWorkers) -> None:
    workers = served.workers
    served.process.kill()
    served.process.wait(timeout=DEADLINE)
    deadline = time.monotonic() + DEADLINE
    while [pid for pid in workers if alive(pid)]:
        assert time.monotonic() < deadline, "a worker outlived its parent"
        time.sleep(0.1)  # polling the process table: nothing to wait on


def _turn(store: Store, text: str) -> None:
    store.add_turn(
        Caller("k", "local", False, None),
        user_id="dee",
        text=text,
        role="user",
        speaker=None,
        occurred_at=None,
        metadata=None,
        source="t",
    )


def _jobs_left(store: Store) -> int:
    with store.db.read() as session:
        return session.jobs.count()


def test_on_sqlite_a_follower_stores_jobs_and_the_lead_works_them(tmp_path: Path) -> None:
    db = str(tmp_path / "roles.db")
    follower = Store(db, RuleBasedExtractor(), async_extraction=True, job_role="follower")
    try:
        _turn(follower, "I play the violin.")
        assert follower.wait_for_extraction(0)  # its worker never started
        assert _jobs_left(follower) == 1
        lead = Store(db, RuleBasedExtractor(), async_extraction=True, job_role="lead")
        try:
            assert lead.wait_for_extraction(DEADLINE)  # the job left stored, resumed
            assert _jobs_left(follower) == 0
            _turn(follower, "I live in Oslo.")  # stored while the lead runs
            deadline = time.monotonic() + DEADLINE
            while _jobs_left(follower):  # the lead looks twice a second
                assert time.monotonic() < deadline
                time.sleep(0.05)  # polling the queue: the two share no signal
            listed, _ = follower.list_memories("local", "dee", 0, 0, ReadWindow())
        finally:
            lead.close()
    finally:
        follower.close()
    assert sorted(memory["text"] for memory in listed) == ["Lives in Oslo", "Plays the violin"]


def test_a_worker_that_cannot_start_stops_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A folder where the database file should be: every worker fails to open it.
    settings = ServeSettings(db=str(tmp_path), keys={"ms_workers_test_key": "local"})
    sockets = bind_sockets("127.0.0.1", 0, 2)
    assert serve_workers(settings, sockets) == 1
    assert "worker 0 failed to start" in capsys.readouterr().err
    assert all(sock.fileno() == -1 for sock in sockets)  # closed


def test_workers_are_in_a_process_group_of_their_own(served: ServedWorkers) -> None:
    # Ctrl-C at a terminal signals the first process's group: the workers hear of it
    # only through the one SIGTERM the first process sends each.
    groups = {os.getpgid(pid) for pid in served.workers}
    assert os.getpgid(served.process.pid) not in groups
    assert groups == set(served.workers)
