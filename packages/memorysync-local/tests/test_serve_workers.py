"""``memorysync-local serve --workers N``: N processes on one socket and one SQLite file.

Each test runs the real CLI in a child process (``shared.served_workers``: which
worker answers is chosen by stopping the others).
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from memorysync_local._cli import main, workers
from memorysync_local._cli.serving import ServeSettings
from memorysync_local._cli.workers import serve_workers
from memorysync_local._extraction.extractor import Extraction, RelatedMemory
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


def test_a_connection_made_while_no_worker_serves_waits_for_the_replacements(
    served: ServedWorkers,
) -> None:
    with served.client() as client:
        keep(client, "eli", "I speak Finnish.")
    for pid in served.workers:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + DEADLINE
    while [pid for pid in served.workers if alive(pid)]:
        assert time.monotonic() < deadline
        time.sleep(0.05)  # polling the process table: nothing to wait on
    # No worker runs: the first process keeps the sockets, so the connection waits in
    # a queue (not refused) until a replacement accepts it.
    with served.client() as client:
        client.timeout = httpx.Timeout(DEADLINE)
        assert recall(client, "eli", "Finnish") == ["Speaks Finnish"]
    replaced = {served.replacement()[0], served.replacement()[0]}
    assert replaced == set(served.workers)


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


class _CountingExtractor(RuleBasedExtractor):
    """The rules, keeping the texts they are asked about: a job worked twice would
    store its facts once (the second finds them there), but would be asked twice."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def extract(
        self, text: str, *, explicit: bool = False, related: Sequence[RelatedMemory] = ()
    ) -> Extraction:
        self.texts.append(text)
        return super().extract(text, explicit=explicit, related=related)


def test_on_sqlite_a_follower_stores_jobs_and_the_lead_works_them(tmp_path: Path) -> None:
    db = str(tmp_path / "roles.db")
    asked_follower, asked_lead = _CountingExtractor(), _CountingExtractor()
    follower = Store(db, asked_follower, async_extraction=True, job_role="follower")
    try:
        _turn(follower, "I play the violin.")
        assert follower.wait_for_extraction(0)  # its worker never started
        assert _jobs_left(follower) == 1
        lead = Store(db, asked_lead, async_extraction=True, job_role="lead")
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
    turns = ["I play the violin.", "I live in Oslo."]
    # The follower asks its rules once a turn, as it stores it (filler is not queued),
    # and works no job; the lead stored nothing and worked each job once.
    assert asked_follower.texts == turns
    assert asked_lead.texts == turns


def test_a_worker_that_cannot_start_stops_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A folder where the database file should be: every worker fails to open it.
    settings = ServeSettings(db=str(tmp_path), keys={"ms_workers_test_key": "local"})
    sockets = bind_sockets("127.0.0.1", 0, 2)
    assert serve_workers(settings, sockets) == 1
    assert "worker 0 failed to start" in capsys.readouterr().err
    assert all(sock.fileno() == -1 for sock in sockets)  # closed


def test_a_worker_that_cannot_load_the_model_stops_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The first process would have loaded this model; a worker that cannot load it
    # must not serve by words alone beside the others.
    settings = ServeSettings(
        db=str(tmp_path / "model.db"),
        keys={"ms_workers_test_key": "local"},
        embedder=f"sentence-transformers:{tmp_path / 'no-such-model'}",
    )
    sockets = bind_sockets("127.0.0.1", 0, 2)
    assert serve_workers(settings, sockets) == 1
    assert "worker 0 failed to start" in capsys.readouterr().err


class _Stoppable:
    should_exit = False


def test_a_worker_whose_parent_dies_is_stopped_without_a_second_signal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A draining worker (its parent signalled it, then died) must not be signalled
    # again: a second signal cuts its drain short. The watch asks uvicorn to stop.
    signalled: list[int] = []
    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        if pid == os.getpid():
            signalled.append(sig)
        else:
            real_kill(pid, sig)

    monkeypatch.setattr(workers.os, "kill", kill)
    parent = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(DEADLINE,))
    parent.start()
    server = _Stoppable()
    watch = workers._ParentWatch(0, parent)
    watch.serving(server)  # type: ignore[arg-type]
    assert not watch.gone.is_set()
    assert not server.should_exit
    parent.kill()
    assert watch.gone.wait(DEADLINE)
    assert server.should_exit
    assert signalled == []
    # A server handed over after the parent died is stopped as it starts.
    late = _Stoppable()
    watch.serving(late)  # type: ignore[arg-type]
    assert late.should_exit


def test_workers_are_in_a_process_group_of_their_own(served: ServedWorkers) -> None:
    # Ctrl-C at a terminal signals the first process's group: the workers hear of it
    # only through the one SIGTERM the first process sends each.
    groups = {os.getpgid(pid) for pid in served.workers}
    assert os.getpgid(served.process.pid) not in groups
    assert groups == set(served.workers)


def test_a_port_held_by_a_group_of_workers_is_refused_to_another_group() -> None:
    # SO_REUSEPORT alone would let a second `serve --workers` join the first's port and
    # take part of its connections (to another database, perhaps).
    held = bind_sockets("127.0.0.1", 0, 2)
    try:
        port = held[0].getsockname()[1]
        with pytest.raises(OSError) as refused:
            bind_sockets("127.0.0.1", port, 2)
        assert refused.value.errno == errno.EADDRINUSE
    finally:
        for sock in held:
            sock.close()
    again = bind_sockets("127.0.0.1", port, 2)  # free again once the first group closed
    assert {sock.getsockname()[1] for sock in again} == {port}
    for sock in again:
        sock.close()


def test_a_worker_that_dies_soon_is_retried_later_and_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(workers.time, "monotonic", lambda: now[0])
    retry = workers._Retry(2)
    # Worker 1, dead soon after its start: its first delay is one second.
    assert not retry.due(1)
    now[0] += workers.RETRY_FIRST_SECONDS
    assert retry.due(1)
    retry.started(1)
    # Worker 0 served past the reset: started again at once.
    now[0] += workers.RETRY_RESET_SECONDS
    assert retry.due(0)
    retry.started(0)
    # It dies at once this time: one second, then two, four... up to the cap.
    assert not retry.due(0)
    now[0] += workers.RETRY_FIRST_SECONDS
    assert retry.due(0)
    assert retry.failed(0) == 2 * workers.RETRY_FIRST_SECONDS  # could not start
    now[0] += 1.0
    assert not retry.due(0)
    now[0] += 1.0
    assert retry.due(0)
    delays = [retry.failed(0) for _ in range(8)]
    assert delays[:2] == [4.0, 8.0]
    assert delays[-1] == workers.RETRY_MAX_SECONDS
