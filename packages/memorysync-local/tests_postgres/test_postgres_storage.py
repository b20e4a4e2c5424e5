"""The PostgreSQL backend under the storage interface, with several openers at once.

Each ``open_postgres`` is what one server process holds: its own pool, its own worker
connection. Two of them in one test behave as two processes on one database (the
three-``serve`` test in ``test_three_processes.py`` does it with real processes).
"""

from __future__ import annotations

import random
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from memorysync_local._storage.errors import StorageBusy, StorageError, StorageUnwritable
from memorysync_local._storage.postgres import PostgresStorage, open_postgres
from memorysync_local._storage.postgres import database as pg_database
from memorysync_local._storage.postgres.backend import owner_key
from memorysync_local._storage.records import NewMemory, NewTurn
from shared.local_server import client_for

T, U = "local", "ana"
NOW = "2026-01-02T03:04:05.000000Z"


@pytest.fixture
def storages(postgres_url: str) -> Iterator[Callable[[], PostgresStorage]]:
    opened: list[PostgresStorage] = []

    def make() -> PostgresStorage:
        opened.append(open_postgres(postgres_url, pool_size=4))
        return opened[-1]

    yield make
    for storage in opened:
        storage.close()


def _turn(key: str | None, seq: int | None, content: str = "hello") -> NewTurn:
    return NewTurn(
        tenant_id=T,
        user_id=U,
        session_id="s1",
        source="test",
        role="user",
        content=content,
        content_hash=f"hash-{content}",
        seq=seq,
        occurred_at=None,
        payload=None,
        idempotency_key=key,
        created_at=NOW,
        sort_key=seq or 0,
    )


def _memory(text: str) -> NewMemory:
    return NewMemory(T, U, text, "other", None, None, {}, "add", None, "r", NOW, NOW, None)


def _together(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` on ``count`` threads released at once; their results."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def test_three_processes_starting_together_migrate_the_schema_once(postgres_url: str) -> None:
    code = (
        "import sys; from memorysync_local._storage.postgres import open_postgres; "
        "open_postgres(sys.argv[1]).close()"
    )
    starts = [
        subprocess.Popen([sys.executable, "-c", code, postgres_url], stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    for process in starts:
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err.decode()
    with psycopg.connect(postgres_url) as conn:
        versions = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    assert versions == [(1,)]


def test_the_same_turn_through_two_processes_at_once_is_stored_once(
    storages: Callable[[], PostgresStorage],
) -> None:
    pair = [storages(), storages()]

    def store(i: int) -> bool:
        with pair[i % 2].write() as s:
            # Different keys, same seq + role + content: the contract's same turn.
            if s.transcript.find_by_seq(T, U, "s1", seq=7, role="user", content_hash="hash-hello"):
                return False
            s.transcript.insert(_turn(f"key-{i}", 7))
            return True

    created = _together(8, store)
    assert created.count(True) == 1
    with pair[0].read() as s:
        turns, total = s.transcript.latest(T, U, "s1", None, 0)
    assert total == 1
    assert turns[0].seq == 7


def test_a_turn_stored_meanwhile_is_the_turn_the_unique_index_returns(
    storages: Callable[[], PostgresStorage],
) -> None:
    storage = storages()
    with storage.write() as s:
        first = s.transcript.insert(_turn("k1", None))
    with storage.write() as s:
        again = s.transcript.insert(_turn("k1", None, content="hello"))
    assert again.id == first.id


def test_a_replayed_turn_through_another_process_is_claimed_once(
    storages: Callable[[], PostgresStorage],
) -> None:
    pair = [storages(), storages()]

    def claim(i: int) -> bool:
        with pair[i % 2].write() as s:
            return s.seeds.claim_turn(
                T,
                U,
                speaker="ana",
                occurred_at=NOW,
                text_hash="h",
                request_id=f"req_{i}",
                received_at=NOW,
                window_start="2025-12-01T00:00:00.000000Z",
            )

    assert _together(6, claim).count(True) == 1


def test_a_monthly_limit_holds_across_processes(storages: Callable[[], PostgresStorage]) -> None:
    pair = [storages(), storages()]

    def add(i: int) -> bool:
        with pair[i % 2].write() as s:
            return s.quota.count_add("key", "2026-01", 5)

    assert _together(12, add).count(True) == 5
    with pair[1].read() as s:
        assert s.quota.usage("key", "2026-01") == (5, 7)


def test_adds_without_a_limit_are_counted_at_commit_and_not_when_rolled_back(
    storages: Callable[[], PostgresStorage],
) -> None:
    storage = storages()
    with storage.write() as s:
        assert s.quota.count_add("key", "2026-01", None)
        assert s.quota.usage("key", "2026-01") == (1, 0)
    with pytest.raises(RuntimeError):
        _count_one(storage, then_fail=True)
    _together(6, lambda i: _count_one(storage))
    with storage.read() as s:
        assert s.quota.usage("key", "2026-01") == (7, 0)


def _count_one(storage: PostgresStorage, *, then_fail: bool = False) -> None:
    with storage.write() as s:
        s.quota.count_add("key", "2026-01", None)
        if then_fail:
            raise RuntimeError("the write fails: its add is not counted")


def test_a_job_held_by_a_live_process_is_not_claimed_and_one_of_a_dead_process_is(
    storages: Callable[[], PostgresStorage], postgres_url: str
) -> None:
    first, second = storages(), storages()
    with first.write() as s:
        s.jobs.add("older", {"tenant_id": T, "user_id": U}, NOW)
        s.jobs.add("newer, same user", {"tenant_id": T, "user_id": U}, NOW)
        s.jobs.add("other user", {"tenant_id": T, "user_id": "bo"}, NOW)
    with first.write() as s:
        held = s.jobs.claim_next()
    assert held is not None
    assert held.text == "older"
    with second.write() as s:
        # The same user's newer job waits for the older one: turns are extracted in order.
        other = s.jobs.claim_next()
        assert other is not None
        assert other.text == "other user"
        assert s.jobs.finish(other.id)
        assert s.jobs.claim_next() is None
    _terminate(postgres_url, first.worker_id())  # the first process dies
    with second.write() as s:
        again = s.jobs.claim_next()
        assert again is not None
        assert again.id == held.id
        assert s.jobs.finish(again.id)
    with first.write() as s:
        assert not s.jobs.finish(held.id)  # the dead claimant stores nothing


def _terminate(postgres_url: str, pid: int) -> None:
    """End backend ``pid`` and return once it has left ``pg_stat_activity``.

    Asked again in fresh transactions: within one, PostgreSQL keeps the first view of
    ``pg_stat_activity`` it read, so a wait inside the claimant's own transaction could
    see the dead backend for ever (a stress run did).
    """
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 60000)", (pid,))
        deadline = time.monotonic() + 60
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            assert time.monotonic() < deadline, f"backend {pid} still listed after 60 s"
            admin.execute("SELECT pg_sleep(0.05)")


def test_vectors_round_trip_bit_for_bit_and_count_as_added(
    storages: Callable[[], PostgresStorage],
) -> None:
    storage = storages()
    rng = random.Random(7)
    with storage.write() as s:
        ids = [s.memories.insert(_memory(f"fact {i}")) for i in range(3)]
    blobs = {i: struct.pack("<16f", *(rng.uniform(-1, 1) for _ in range(16))) for i in ids}
    with storage.write() as s:
        s.vectors.put("m", list(blobs.items()))
        s.vectors.put("m", [(ids[0], blobs[ids[0]])])  # replaced: counted again
    with storage.read() as s:
        assert dict(s.vectors.of_user(T, U, "m")) == blobs
        assert s.vectors.counters(T, U).added == 4
        assert [(i, m) for i, m, _ in s.vectors.added_since(T, U, ids[0])] == [
            (ids[1], "m"),
            (ids[2], "m"),
        ]


def test_a_read_only_database_answers_unwritable_and_reads_still_work(
    storages: Callable[[], PostgresStorage], postgres_url: str
) -> None:
    storage = storages()
    with storage.write() as s:
        s.memories.insert(_memory("kept"))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        name = admin.info.dbname
        admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    fresh = storages()  # new connections take the setting
    with pytest.raises(StorageUnwritable) as caught, fresh.write() as s:
        s.memories.insert(_memory("refused"))
    assert caught.value.reason == "read_only"
    with fresh.read() as s:
        assert s.memories.count(T) == 1


def test_a_lost_connection_answers_busy(storages: Callable[[], PostgresStorage]) -> None:
    storage = storages()
    with pytest.raises(StorageBusy), storage.write() as s:
        s.conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")


def test_a_database_that_cannot_be_reached_names_it_without_its_password() -> None:
    url = "postgresql://app:s3cret-pw@/memories?host=/nonexistent-memorysync&connect_timeout=2"
    with pytest.raises(StorageError) as caught:
        open_postgres(url)
    assert "s3cret-pw" not in str(caught.value)
    assert "s3cret-pw" not in caught.value.detail
    assert "postgresql://app:***@/memories" in str(caught.value)


async def test_a_user_locked_by_another_process_too_long_is_a_retryable_503(
    make_local_server: Callable[..., Any],
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pg_database, "LOCK_TIMEOUT_SECONDS", 0.2)
    srv = make_local_server(served=True, db_path=postgres_url)
    body = {
        "tenant_id": T,
        "user_id": U,
        "session_id": "s1",
        "turns": [{"role": "user", "content": "I live in Oslo.", "idempotency_key": "k1"}],
        "extract": False,
    }
    async with client_for(srv) as client:
        with psycopg.connect(postgres_url, autocommit=True) as holder:
            # Another process in the middle of a long write for the same user.
            holder.execute("SELECT pg_advisory_lock(%s)", (owner_key("public", T, U),))
            busy = await client.post("/v1/history/append", json=body)
            holder.execute("SELECT pg_advisory_unlock(%s)", (owner_key("public", T, U),))
        again = await client.post("/v1/history/append", json=body)
    assert busy.status_code == 503, busy.text
    assert busy.json()["error"]["retry_after"] == 1
    assert again.status_code == 200, again.text


def test_a_database_password_is_in_no_repr_banner_or_error(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from memorysync_local import embedded

    # The test server trusts local connections: the password is carried, not checked.
    secret = postgres_url.replace("postgres@", "postgres:s3cret-pw@", 1)
    with embedded(secret) as server:
        shown = [repr(server), repr(server.store.db), server.store.db.target]
    assert all("s3cret-pw" not in text and "***" in text for text in shown), shown
    broken = secret.replace("host=", "host=/nonexistent-memorysync", 1)
    with pytest.raises(StorageError) as caught:
        embedded(broken)
    assert "s3cret-pw" not in str(caught.value)
    assert "s3cret-pw" not in caught.value.detail
    assert "s3cret-pw" not in capsys.readouterr().err


def test_a_lost_job_queue_connection_is_opened_again_and_new_jobs_still_wake_the_worker(
    storages: Callable[[], PostgresStorage], postgres_url: str
) -> None:
    listener, writer = storages(), storages()
    woken = threading.Event()
    listener.watch_jobs(woken.set)
    lost = listener.worker_id()
    with psycopg.connect(postgres_url, autocommit=True) as admin:  # a restart, a failover
        admin.execute("SELECT pg_terminate_backend(%s)", (lost,))
    deadline = time.monotonic() + 30
    while listener.worker_id() == lost:
        assert time.monotonic() < deadline, "the connection was not opened again"
        woken.wait(0.05)
    woken.clear()
    with writer.write() as s:
        s.jobs.add("new", {"tenant_id": T, "user_id": U}, NOW)
    assert woken.wait(10)
    with listener.write() as s:
        job = s.jobs.claim_next()
    assert job is not None
    assert job.text == "new"


async def test_embedded_takes_the_database_url_as_db(postgres_url: str, tmp_path: Any) -> None:
    from memorysync_local import embedded

    with embedded(db=postgres_url) as server:
        async with client_for(server) as client:
            body = {"tenant_id": T, "user_id": U, "text": "I live in Porto.", "source": "t"}
            answer = await client.post("/v1/memory/add_turn", json=body)
        assert answer.json()["processing_status"] == "completed"
        assert server.db_path == postgres_url
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT text FROM memories").fetchall() == [("Lives in Porto",)]
    with pytest.raises(TypeError, match="db or as db_path, not both"):
        embedded(str(tmp_path / "a.db"), db=postgres_url)
