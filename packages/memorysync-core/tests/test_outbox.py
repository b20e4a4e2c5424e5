"""The durable outbox (issue 23, item 2): captured turns survive kill -9 during an outage.

Real processes, the real ``memorysync-local`` served on loopback: processes capture
turns while the server is down, are killed with SIGKILL, the server starts, and a new
process delivers everything, once, in order.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memorysync_core import AdapterSettings
from memorysync_core._delivery.outbox import Outbox
from memorysync_core.adapters import AdapterKit, CapturedTurn
from shared.local_server import stored_history

CHILD = Path(__file__).with_name("outbox_child.py")
ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(**values: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **values)
    env.pop("MEMORYSYNC_OUTBOX", None)
    return env


def _capture_then_kill(sessions: list[str], **env: str) -> None:
    """Start one capturing process per session at once; SIGKILL each once it captured."""
    children = [
        subprocess.Popen(
            [sys.executable, str(CHILD)],
            env=_env(MODE="capture", SESSION=session, **env),
            stdout=subprocess.PIPE,
            text=True,
        )
        for session in sessions
    ]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "captured"
    for child in children:
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
        assert child.stdout is not None
        child.stdout.close()


def _deliver(count: int, **env: str) -> list[dict[str, Any]]:
    """Start ``count`` delivering processes at once; their reports."""
    children = [
        subprocess.Popen(
            [sys.executable, str(CHILD)],
            env=_env(MODE="deliver", **env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    reports = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def _said(server: Any, session: str) -> list[str]:
    rows = stored_history(server, server.tenant_id, "alice", f"outbox-test::{session}")
    return [row["content"] for row in rows]  # in arrival order


def test_fifty_turns_captured_during_an_outage_survive_kill_9(
    make_local_server: Any, tmp_path: Path
) -> None:
    port, outbox = _free_port(), str(tmp_path / "outbox.db")
    env = {"URL": f"http://127.0.0.1:{port}", "OUTBOX": outbox, "COUNT": "50"}
    env["KEY"] = "ms_local_dev_key"
    _capture_then_kill(["s"], **env)
    assert stat.S_IMODE(os.stat(outbox).st_mode) == 0o600
    server = make_local_server(served=True, port=port)  # the outage ends
    [report] = _deliver(1, **env)
    assert (report["delivered"], report["refused"], report["pending"]) == (50, 0, 0)
    assert _said(server, "s") == [f"Turn {n} of s." for n in range(50)]
    [again] = _deliver(1, **env)  # a later start finds nothing left
    assert again["delivered"] == 0
    assert len(_said(server, "s")) == 50


def test_two_processes_share_one_outbox_and_every_turn_is_stored_once(
    make_local_server: Any, tmp_path: Path
) -> None:
    port, outbox = _free_port(), str(tmp_path / "outbox.db")
    env = {"URL": f"http://127.0.0.1:{port}", "OUTBOX": outbox, "COUNT": "50"}
    env["KEY"] = "ms_local_dev_key"
    _capture_then_kill(["a", "b"], **env)  # two processes writing one file at once
    server = make_local_server(served=True, port=port)
    reports = _deliver(2, **env)  # two processes taking over at once
    assert sum(r["delivered"] for r in reports) == 100
    assert all(r["refused"] == r["pending"] == 0 for r in reports)
    for session in ("a", "b"):
        assert _said(server, session) == [f"Turn {n} of {session}." for n in range(50)]


def _kit(server: Any, outbox: Path, **settings: Any) -> AdapterKit:
    values: dict[str, Any] = {
        "api_key": server.api_key,
        "base_url": server.base_url,
        "transport": server.transport,
        "tenant_id": server.tenant_id,
        "outbox": str(outbox),
    }
    values.update(settings)
    return AdapterKit(AdapterSettings.build(surface="outbox-test", user_id="alice", **values))


async def test_the_environment_variable_turns_the_outbox_on(
    local_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYSYNC_OUTBOX", str(tmp_path / "from-env.db"))
    kit = AdapterKit(
        AdapterSettings.build(
            surface="outbox-test",
            user_id="alice",
            api_key=local_server.api_key,
            base_url=local_server.base_url,
            transport=local_server.transport,
        )
    )
    assert kit.outbox is not None
    assert kit.outbox.path == tmp_path / "from-env.db"
    kit.submit([kit.home.capture("user", "I live in Lisbon.")])
    assert kit.outbox.pending() == 1
    assert (await kit.aclose()).delivered == 1
    assert kit.outbox.pending() == 0  # acknowledged: forgotten


async def test_a_wrong_key_keeps_the_turns_for_a_start_with_the_right_key(
    local_server: Any, tmp_path: Path
) -> None:
    wrong = _kit(local_server, tmp_path / "o.db", api_key="ms_wrong_key_for_this_test")
    wrong.submit([wrong.home.capture("user", "I live in Lisbon.")])
    report = await wrong.aclose()
    assert (report.refused, report.delivered) == (1, 0)
    right = _kit(local_server, tmp_path / "o.db")
    assert (await right.aclose(timeout=10)).delivered == 0  # aclose takes nothing over
    assert (await right.flush(timeout=10)).delivered == 1  # flush does
    assert [r["content"] for r in stored_history(local_server, "local", "alice")] == [
        "I live in Lisbon."
    ]
    await right.aclose()


async def test_a_full_outbox_keeps_new_turns_in_memory_with_a_warning_and_a_count(
    local_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    # One patch: the kit reads the limit through the outbox's module (issue 32 item 4).
    monkeypatch.setattr("memorysync_core._delivery.outbox.MAX_OUTBOX_TURNS", 2)
    kit = _kit(local_server, tmp_path / "o.db")
    assert kit.outbox is not None
    turns = [kit.home.capture("user", f"Fact number {n}.") for n in range(3)]
    assert kit.submit(turns) == 3  # all queued in memory...
    assert kit.outbox.overflowed == 1  # ...the third not on disk
    full = [r for r in caplog.records if "is full" in r.getMessage()]
    assert [r.levelname for r in full] == ["WARNING"]
    assert "(2 turns)" in full[0].getMessage()  # the patched limit, read once
    assert "(1 so far)" in full[0].getMessage()
    assert (await kit.aclose()).delivered == 3


def test_a_bad_outbox_path_is_a_value_error_naming_it(local_server: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(ValueError, match=r"outbox .*a-file/outbox\.db"):
        _kit(local_server, blocker / "outbox.db")


def test_a_row_left_by_this_process_under_another_owner_is_taken_over(tmp_path: Path) -> None:
    first = Outbox(tmp_path / "o.db", destination="d")
    turn = CapturedTurn.capture("user", "Kept.", scope="outbox-test::s", user_id="alice")
    assert first.keep(turn)
    second = Outbox(tmp_path / "o.db", destination="d")
    assert second.take_over() == []  # the first owner is alive and holds a lease
    first.close()  # a clean close releases its rows
    assert second.take_over() == [turn]  # the same turn: same seed, capture id, seq
    assert Outbox(tmp_path / "o.db", destination="other").take_over() == []
    second.close()
