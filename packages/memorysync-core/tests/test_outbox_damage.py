"""A damaged outbox never costs a turn, never raises into the app, never repeats (issue 33).

Real files damaged as a disk or a copy damages them, the real ``memorysync-local`` as
the server: the turns captured meanwhile reach the server, the damaged file is moved
aside under a dated name (a WARNING naming both paths), a row that is not a turn is
set aside once.
"""

from __future__ import annotations

import logging
import random
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from memorysync_core import AdapterSettings
from memorysync_core._delivery.outbox import Outbox
from memorysync_core.adapters import AdapterKit, CapturedTurn
from shared.local_server import stored_history

FACTS = ["I live in Lisbon.", "I am a nurse.", "I have a dog named Rex."]


def _kit(server: Any, outbox: Path) -> AdapterKit:
    return AdapterKit(
        AdapterSettings.build(
            surface="outbox-test",
            user_id="alice",
            api_key=server.api_key,
            base_url=server.base_url,
            transport=server.transport,
            tenant_id=server.tenant_id,
            outbox=str(outbox),
        )
    )


def _said(server: Any) -> list[str]:
    return [row["content"] for row in stored_history(server, server.tenant_id, "alice")]


def _warnings(caplog: pytest.LogCaptureFixture, words: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and words in r.getMessage()
    ]


async def _capture_and_close(kit: AdapterKit, facts: list[str]) -> Any:
    assert kit.submit([kit.home.capture("user", fact) for fact in facts]) == len(facts)
    return await kit.aclose()


async def test_a_file_of_random_bytes_is_moved_aside_and_every_turn_delivered(
    local_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "outbox.db"
    junk = random.Random(33).randbytes(8192)
    path.write_bytes(junk)
    kit = _kit(local_server, path)  # the app can run turns
    [aside] = tmp_path.glob("outbox.db.damaged-*")
    assert aside.read_bytes() == junk  # kept for whoever wants to look
    [warning] = _warnings(caplog, "damaged")
    assert str(path) in warning
    assert str(aside) in warning
    report = await _capture_and_close(kit, FACTS)
    assert (report.delivered, report.refused, report.pending) == (3, 0, 0)
    assert _said(local_server) == FACTS
    assert kit.outbox is not None
    assert kit.outbox.pending() == 0  # the new file works
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA quick_check").fetchone() == ("ok",)


async def test_damaged_pages_cost_no_turn_and_close_does_not_raise(
    local_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "outbox.db"
    earlier = Outbox(path, destination="elsewhere")
    for n in range(50):
        earlier.keep(CapturedTurn.capture("user", f"Old turn {n}.", scope="outbox-test::old"))
    earlier.close()
    with path.open("r+b") as file:  # page 2 (the outbox table) overwritten
        file.seek(4096)
        file.write(random.Random(2).randbytes(4096))
    kit = _kit(local_server, path)
    report = await _capture_and_close(kit, FACTS)
    assert (report.delivered, report.refused, report.pending) == (3, 0, 0)
    assert _said(local_server) == FACTS
    [aside] = tmp_path.glob("outbox.db.damaged-*")
    [warning] = _warnings(caplog, "damaged")
    assert str(path) in warning
    assert str(aside) in warning
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_row_that_is_not_a_turn_is_set_aside_once_and_costs_no_turn(
    local_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "outbox.db"
    first = _kit(local_server, path)
    assert first.outbox is not None
    destination = first.outbox.destination
    await first.aclose()
    with closing(sqlite3.connect(path)) as db, db:  # a row an old or broken writer left
        db.execute(
            "INSERT INTO outbox VALUES (?, ?, ?, ?, ?, ?)",
            ("bad-row", destination, 1, "gone-host:1:x", 0.0, '{"role": "user", "te'),
        )
    for start, fact in enumerate(FACTS[:2]):  # two process starts
        kit = _kit(local_server, path)
        report = await _capture_and_close(kit, [fact])
        assert (report.delivered, report.refused, report.pending) == (1, 0, 0), start
    assert _said(local_server) == FACTS[:2]  # each start's first turn arrived
    assert len(_warnings(caplog, "could not be read as turns")) == 1  # said once
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT key FROM outbox_set_aside").fetchall() == [("bad-row",)]
        assert db.execute("SELECT COUNT(*) FROM outbox").fetchone() == (0,)


async def test_pages_damaged_while_the_app_runs_cost_no_turn(
    local_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "outbox.db"
    kit = _kit(local_server, path)
    assert kit.submit([kit.home.capture("user", FACTS[0])]) == 1
    assert (await kit.flush()).delivered == 1
    with closing(sqlite3.connect(path, isolation_level=None)) as other:
        other.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file
        with path.open("r+b") as file:  # then the outbox table's page overwritten
            file.seek(4096)
            file.write(random.Random(3).randbytes(4096))
        # Another process writes: the app's connection reads its pages anew.
        other.execute("CREATE TABLE another_process (x)")
    report = await _capture_and_close(kit, FACTS[1:])
    assert (report.delivered, report.refused, report.pending) == (3, 0, 0)
    assert _said(local_server) == FACTS
    [aside] = tmp_path.glob("outbox.db.damaged-*")
    [warning] = _warnings(caplog, "damaged")
    assert str(path) in warning
    assert str(aside) in warning
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
