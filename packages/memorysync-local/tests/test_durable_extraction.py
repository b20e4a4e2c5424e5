"""``--async-extraction`` never loses a turn it acknowledged (issue 12, item 2).

The server runs as the real ``memorysync-local serve`` process, with the rule-based
extractor slowed down on its background thread only (a model-backed extractor is
that slow), so a burst of turns is acknowledged long before it is extracted. The
process is then killed (``kill -9``) or stopped (SIGTERM, SIGINT) with jobs still
queued; a new server over the same file must end with every acknowledged turn's
facts, each stored once.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from memorysync_local import embedded
from memorysync_local._plans import Caller
from memorysync_local._storage.sqlite.database import SCHEMA_VERSION
from shared.local_server import stored_memories

TURNS = 40
KEY = "ms_durable"
# The CLI with the extractor slowed on the background thread only: requests stay fast.
SLOW_SERVER = """
import sys, threading, time
from memorysync_local import _cli
from memorysync_local._extraction.rules import RuleBasedExtractor
fast = RuleBasedExtractor.extract
def slow(self, text, *, explicit=False):
    if threading.current_thread().name.startswith("memorysync-extract"):
        time.sleep(0.2)
    return fast(self, text, explicit=explicit)
RuleBasedExtractor.extract = slow
sys.exit(_cli.main(sys.argv[1:]))
"""


def start(db: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SLOW_SERVER,
            "serve",
            "--db",
            str(db),
            "--port",
            "0",
            "--log-level",
            "warning",
            "--async-extraction",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MEMORYSYNC_LOCAL_API_KEYS": KEY},
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().rsplit(" at ", 1)[1].strip()


def burst(base_url: str) -> None:
    """TURNS acknowledged turns, half through add_turn and half through history."""
    with httpx.Client(base_url=base_url, headers={"X-API-Key": KEY}, timeout=30) as client:
        for i in range(TURNS):
            text = f"I live in City{i}."
            if i % 2:
                answer = client.post(
                    "/v1/memory/add_turn",
                    json={"tenant_id": "local", "user_id": "ana", "text": text, "source": "t"},
                )
                assert answer.json()["processing_status"] == "distilling"
            else:
                answer = client.post(
                    "/v1/history/append",
                    json={
                        "tenant_id": "local",
                        "user_id": "ana",
                        "session_id": "s",
                        "turns": [{"role": "user", "content": text}],
                    },
                )
                assert len(answer.json()["request_ids"]) == 1
            assert answer.status_code == 200


def jobs_left(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM extraction_jobs").fetchone()[0])


def assert_every_turn_extracted_once(db: Path) -> None:
    with embedded(str(db), async_extraction=True) as server:
        assert server.wait_for_extraction(timeout=120)
    texts = sorted(m["text"] for m in stored_memories(db, "local", "ana"))
    assert texts == sorted(f"Lives in City{i}" for i in range(TURNS))
    assert jobs_left(db) == 0


def test_kill_9_mid_burst_loses_no_acknowledged_turn(tmp_path: Path) -> None:
    db = tmp_path / "kill.db"
    proc, base_url = start(db)
    try:
        burst(base_url)
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    left = jobs_left(db)
    assert 0 < left <= TURNS  # the kill did land with acknowledged turns unextracted
    assert_every_turn_extracted_once(db)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_mid_burst_closes_cleanly_and_loses_nothing(
    tmp_path: Path, stop: signal.Signals
) -> None:
    db = tmp_path / "stop.db"
    proc, base_url = start(db)
    try:
        burst(base_url)
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "KeyboardInterrupt" not in err
    # The store was closed: the WAL was checkpointed away with the last connection.
    assert not Path(f"{db}-wal").exists()
    assert_every_turn_extracted_once(db)


def test_a_job_is_stored_with_its_turn_and_resumed_by_the_next_server(tmp_path: Path) -> None:
    db = tmp_path / "resume.db"
    with embedded(str(db), async_extraction=True) as server:
        # No worker: what a crash right after the commit leaves behind.
        server.store._jobs.stop(0)
        answer = server.store.add_turn(
            Caller("k", "local", False, None),
            user_id="ana",
            text="I live in Porto.",
            role="user",
            speaker=None,
            occurred_at=None,
            metadata=None,
            source="t",
        )
        assert answer["processing_status"] == "distilling"
        assert jobs_left(db) == 1
        assert stored_memories(db, "local", "ana") == []
    with embedded(str(db), async_extraction=False) as server:
        # Even a server started without --async-extraction finishes what was stored.
        assert server.wait_for_extraction(timeout=60)
    assert [m["text"] for m in stored_memories(db, "local", "ana")] == ["Lives in Porto"]
    assert jobs_left(db) == 0


def test_a_version_3_file_gains_the_jobs_table_and_keeps_everything(tmp_path: Path) -> None:
    """``tests/data/schema_v3.sqlite3`` was written by the version-3 server (the same
    turns and facts as ``schema_v1.sqlite3``, see test_ordering)."""
    db = tmp_path / "v3.db"
    shutil.copy(Path(__file__).parent / "data" / "schema_v3.sqlite3", db)
    before = stored_memories(db, "local", "ana")
    with embedded(str(db), async_extraction=True) as server:
        with closing(sqlite3.connect(db)) as conn:
            versions = [r[0] for r in conn.execute("SELECT version FROM schema_version")]
        assert versions[-1] == SCHEMA_VERSION
        assert jobs_left(db) == 0
        answer = server.store.add_turn(
            Caller("k", "local", False, None),
            user_id="ana",
            text="I live in Braga.",
            role="user",
            speaker=None,
            occurred_at=None,
            metadata=None,
            source="t",
        )
        assert answer["processing_status"] == "distilling"
        assert server.wait_for_extraction(timeout=60)
        found = server.store.search("local", "ana", "shellfish", 5)
    assert [m["text"] for m in found] == ["Allergic to shellfish"]
    after = stored_memories(db, "local", "ana")
    assert after[: len(before)] == before
    assert [m["text"] for m in after[len(before) :]] == ["Lives in Braga"]
