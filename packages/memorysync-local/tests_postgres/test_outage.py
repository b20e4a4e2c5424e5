"""PostgreSQL stopped and started again under a served server (issue 33, items 10 and
11): ``/ready`` answers 503 while the database cannot be reached and 200 once it can,
``/health`` stays 200 throughout, and the extraction worker logs the outage as one
WARNING line and its end as another, never a traceback.

The outage is real: a PostgreSQL of this module's own (the session's is shared by other
tests), stopped with ``pg_ctl stop`` and started again on the same socket.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

import memorysync_local._storage.postgres.database as pg_database
from memorysync_local import serve_in_thread
from memorysync_local._http.readiness import READY_TIMEOUT_SECONDS
from shared.postgres import PostgresServer, _program, _run, start_embedded
from shared.timing import SLACK

T = "local"
KEY = "ms_local_dev_key"
WAIT = 60.0  # the longest any awaited log line or answer may take on a busy machine


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[PostgresServer]:
    server = start_embedded()
    try:
        yield server
    finally:
        server.stop()


def pg_ctl(server: PostgresServer, *args: str) -> None:
    folder = server._folder  # the kit's server: stop and start it in place
    assert folder is not None
    _run([_program(folder, "pg_ctl"), "-D", str(folder / "data"), "-w", *args], server._user)


def stop(server: PostgresServer) -> None:
    pg_ctl(server, "-m", "fast", "stop")


def start(server: PostgresServer) -> None:
    folder = server._folder
    assert folder is not None
    options = (
        f"-c listen_addresses='' -k {folder} -c fsync=off -c synchronous_commit=off "
        "-c full_page_writes=off -c max_connections=200"
    )
    pg_ctl(server, "-l", str(folder / "server.log"), "-o", options, "start")


def fresh_database(server: PostgresServer) -> str:
    name = server.new_name("ms_outage")
    server.execute(f'CREATE DATABASE "{name}"')
    return server.url(name)


class Lines(logging.Handler):
    """The ``memorysync`` log records, and a way to wait for one without polling."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._changed:
            self.records.append(record)
            self._changed.notify_all()

    def wait_for(self, found: Callable[[list[logging.LogRecord]], bool]) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: found(self.records), WAIT), [
                r.getMessage() for r in self.records
            ]

    def saying(self, words: str, level: int = logging.DEBUG) -> list[logging.LogRecord]:
        return [r for r in self.records if words in r.getMessage() and r.levelno >= level]


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger("memorysync")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


@pytest.fixture
def short_pool_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    # A request waits up to 30 s for a pooled connection while the database is away; the
    # worker's attempts then come every 30 s. 2 s makes an outage of several attempts short.
    monkeypatch.setattr(pg_database, "POOL_TIMEOUT_SECONDS", 2.0)


async def ready_until(client: httpx.AsyncClient, status: int) -> httpx.Response:
    """Ask ``/ready`` until it answers ``status`` (each probe is itself bounded)."""
    deadline = time.monotonic() + WAIT
    while True:
        answer = await client.get("/ready")
        if answer.status_code == status or time.monotonic() > deadline:
            return answer


async def test_ready_is_503_while_postgresql_is_down_and_health_stays_200(
    own_postgres: PostgresServer, lines: Lines, short_pool_wait: None
) -> None:
    with serve_in_thread(db=fresh_database(own_postgres)) as server:
        async with httpx.AsyncClient(
            base_url=server.base_url, headers={"X-API-Key": KEY}, timeout=WAIT
        ) as client:
            up = await client.get("/ready")
            assert up.status_code == 200, up.text
            assert up.json() == {"status": "ready"}
            stop(own_postgres)
            try:
                for _ in range(3):
                    started = time.monotonic()
                    down = await client.get("/ready")
                    took = time.monotonic() - started
                    assert down.status_code == 503, down.text
                    assert down.json()["status"] == "unavailable"
                    assert "storage" in down.json()["detail"]
                    assert took <= READY_TIMEOUT_SECONDS + SLACK  # a probe never hangs
                    alive = await client.get("/health")
                    assert alive.status_code == 200
                # A request that needs the database is a retryable 503, not a 500.
                recall = await client.post(
                    "/v1/memory/recall", json={"tenant_id": T, "user_id": "ana", "prompt": "x"}
                )
                assert recall.status_code == 503, recall.text
                assert recall.headers["retry-after"] == "1"
            finally:
                start(own_postgres)
            back = await ready_until(client, 200)
            assert back.status_code == 200, back.text
    # One line when the storage stopped answering and one when it answered again.
    assert len(lines.saying("readiness: not ready", logging.WARNING)) == 1
    assert len(lines.saying("readiness: the storage answers again")) == 1


async def test_a_restart_is_one_warning_and_its_recovery_never_a_traceback(
    own_postgres: PostgresServer, lines: Lines, short_pool_wait: None
) -> None:
    body = {"tenant_id": T, "user_id": "ana", "source": "t"}
    with serve_in_thread(db=fresh_database(own_postgres), async_extraction=True) as server:
        async with httpx.AsyncClient(
            base_url=server.base_url, headers={"X-API-Key": KEY}, timeout=WAIT
        ) as client:
            added = await client.post(
                "/v1/memory/add_turn", json={**body, "text": "I live in Oslo."}
            )
            assert added.status_code == 200, added.text
            assert server.store.wait_for_extraction(WAIT)
            stop(own_postgres)
            try:
                # The worker tries again and again while the database is away: three
                # attempts, whatever each one logs.
                lines.wait_for(lambda _: len(lines.saying("background extraction")) >= 3)
            finally:
                start(own_postgres)
            lines.wait_for(lambda _: bool(lines.saying("background extraction resumed")))
            # And it works again: a new turn's facts are extracted and recalled.
            again = await client.post(
                "/v1/memory/add_turn", json={**body, "text": "I have a dog named Rex."}
            )
            assert again.status_code == 200, again.text
            assert server.store.wait_for_extraction(WAIT)
            found = await client.post(
                "/v1/memory/recall", json={"tenant_id": T, "user_id": "ana", "prompt": "dog"}
            )
            assert "Rex" in found.text
    loud = [r for r in lines.records if r.levelno >= logging.WARNING]
    assert [r.getMessage().split(":")[0] for r in loud] == [
        "background extraction paused",
        "background extraction resumed",
    ], [r.getMessage() for r in loud]
    assert not [r for r in lines.records if r.exc_info]  # no traceback at any level
    assert "the database is busy or unreachable" in loud[0].getMessage()
