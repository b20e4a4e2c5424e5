"""Storage failures get their own answers (issue 26 item 1).

Before: every ``sqlite3.OperationalError`` was ``503 "the database is busy; retry
shortly"`` with ``retry_after: 1``, a full disk included, and the log kept only the
class name. Now: contention is a retryable 503; a full, read-only or failing storage
is a 507 with no retry hint, logged at ERROR with SQLite's words; a damaged file
stops the server from starting, naming the file.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import memorysync_local._storage.sqlite.database as db_module
from memorysync_local import embedded
from memorysync_local._cli import main
from memorysync_local._storage.errors import StorageBusy, StorageCorrupt, StorageUnwritable
from memorysync_local._storage.sqlite.errors import classify
from shared.local_server import client_for

T = "local"
HISTORY = {"tenant_id": T, "user_id": "ana", "session_id": "s", "source": "t"}


def _error_of(action: Callable[[], object]) -> sqlite3.Error:
    with pytest.raises(sqlite3.Error) as caught:
        action()
    return caught.value


# --- the classification, on errors SQLite really raises ------------------------------


def test_sqlite_errors_are_sorted_into_storage_neutral_ones(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with closing(sqlite3.connect(path, isolation_level=None)) as writer:
        writer.execute("CREATE TABLE t (x TEXT)")
        writer.execute("BEGIN IMMEDIATE")
        with closing(sqlite3.connect(path, timeout=0)) as other:
            locked = _error_of(lambda: other.execute("BEGIN IMMEDIATE"))
        writer.execute("ROLLBACK")
        writer.execute(
            "PRAGMA max_page_count = " + str(writer.execute("PRAGMA page_count").fetchone()[0])
        )
        full = _error_of(
            lambda: writer.executemany("INSERT INTO t VALUES (?)", [("x" * 4000,)] * 50)
        )
    uri = path.resolve().as_uri() + "?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as reader:
        read_only = _error_of(lambda: reader.execute("INSERT INTO t VALUES ('x')"))
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database, but a file that is long enough " * 100)
    with closing(sqlite3.connect(garbage)) as broken:
        not_a_db = _error_of(lambda: broken.execute("SELECT * FROM sqlite_master").fetchall())
    with closing(sqlite3.connect(":memory:")) as fine:
        typo = _error_of(lambda: fine.execute("SELECT * FROM no_such_table"))

    assert isinstance(classify(locked), StorageBusy)
    found = classify(full)
    assert isinstance(found, StorageUnwritable)
    assert found.reason == "full"
    assert found.detail == "database or disk is full"
    found = classify(read_only)
    assert isinstance(found, StorageUnwritable)
    assert found.reason == "read_only"
    assert isinstance(classify(not_a_db), StorageCorrupt)
    assert classify(typo) is None  # a bug stays a bug (a logged 500), never "busy"


# --- contention: 503, retryable -------------------------------------------------------


async def test_lock_contention_is_a_retryable_503(
    make_local_server: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(db_module, "BUSY_TIMEOUT_SECONDS", 0.2)
    # SQLite's write lock (PostgreSQL's contention: tests_postgres/test_postgres_storage.py).
    srv = make_local_server(served=True, db_path=str(tmp_path / "busy.db"))
    turn = {"role": "user", "content": "I live in Oslo.", "idempotency_key": "k1"}
    async with client_for(srv) as client:
        with closing(sqlite3.connect(srv.db_path, isolation_level=None)) as holder:
            holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            busy = await client.post(
                "/v1/history/append", json={**HISTORY, "turns": [turn], "extract": False}
            )
            holder.execute("ROLLBACK")
        again = await client.post(
            "/v1/history/append", json={**HISTORY, "turns": [turn], "extract": False}
        )
    assert busy.status_code == 503, busy.text
    assert busy.json()["error"]["retry_after"] == 1
    assert busy.headers["retry-after"] == "1"
    assert again.status_code == 200, again.text


# --- a full disk: 507, reads work, writes resume, nothing acknowledged lost ----------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MiB tmpfs, unmounted after the test (and after its server stopped)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the classification test still runs)")
    where = tmp_path / "disk"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def _fill(path: Path) -> None:
    """Write ``path`` until the file system has no byte left."""
    with open(path, "wb", buffering=0) as handle:
        for chunk in (65536, 4096, 512, 1):
            while True:
                try:
                    handle.write(b"\0" * chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break


async def test_a_full_disk_is_507_reads_go_on_and_writes_resume_when_space_is_freed(
    small_disk: Path, make_local_server: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    srv = make_local_server(served=True, db_path=str(small_disk / "m.db"))
    acknowledged: list[str] = []
    filler = small_disk / "filler"

    async def append(client: Any, n: int) -> Any:
        text = f"turn {n}: " + "words that fill a page " * 80
        answer = await client.post(
            "/v1/history/append",
            json={**HISTORY, "turns": [{"role": "user", "content": text}], "extract": False},
        )
        if answer.status_code == 200:
            acknowledged.append(text)
        return answer

    async with client_for(srv, **{"X-End-User-ID": "ana"}) as client:
        for n in range(3):
            assert (await append(client, n)).status_code == 200
        _fill(filler)
        with caplog.at_level(logging.ERROR, logger="memorysync.local"):
            for n in range(3, 400):
                refused = await append(client, n)
                if refused.status_code != 200:
                    break
            fact = await client.post("/memory/add", json={"text": "I live in Oslo."})
        assert refused.status_code == 507, refused.text
        assert fact.status_code == 507, fact.text
        for answer in (refused, fact):
            error = answer.json()["error"]
            assert "storage is full" in error["message"]
            assert error["type"] == "storage_full"
            assert "retry_after" not in error
            assert "retry_after" not in answer.json()
            assert "retry-after" not in answer.headers
        logged = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert any("database or disk is full" in r.getMessage() for r in logged)

        listed = await client.post("/v1/history/list", json=HISTORY)  # reads go on
        assert listed.status_code == 200, listed.text
        assert [t["content"] for t in listed.json()["items"]] == acknowledged

        filler.unlink()  # the operator frees space: writes resume
        assert (await append(client, 1000)).status_code == 200
        listed = await client.post("/v1/history/list", json=HISTORY)
        assert [t["content"] for t in listed.json()["items"]] == acknowledged
    assert len(acknowledged) >= 4


# --- a damaged file: the server does not start ----------------------------------------


def test_a_corrupt_file_stops_the_server_from_starting_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "damaged.db"
    path.write_bytes(b"this was a database once " * 400)
    with pytest.raises(StorageCorrupt) as caught:
        embedded(str(path))
    assert str(path) in str(caught.value)
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--db", str(path), "--port", "0"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert str(path) in err
    assert "not a usable SQLite database" in err
    assert path.read_bytes() == b"this was a database once " * 400  # left as it was
