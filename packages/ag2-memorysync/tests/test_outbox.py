"""The durable outbox for AG2-classic: a chat during an outage survives the process.

Real processes, real ``ConversableAgent`` chats, the real ``memorysync-local`` served on
loopback: a process chats while the server is down and is killed with SIGKILL (or closes
and exits); the server starts; the application starts again and delivers every turn,
once, in the order it was said.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared.local_server import stored_history

CHILD = Path(__file__).with_name("outbox_chat.py")
ROOT = Path(__file__).resolve().parents[3]
COUNT = 10  # messages from each agent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(**values: str) -> dict[str, str]:
    env = dict(os.environ, **values)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("MEMORYSYNC_OUTBOX", None)
    return env


def _chat_during_the_outage(end: str, env: dict[str, str], log: Path) -> None:
    with log.open("w") as errors:
        chat = subprocess.Popen(
            [sys.executable, str(CHILD)],
            env=_env(MODE="chat", END=end, **env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        try:
            assert chat.stdout is not None
            if end == "kill":
                lines = iter(chat.stdout.readline, "")  # AG2 prints its own lines too
                assert "captured" in (line.strip() for line in lines), log.read_text()
                os.kill(chat.pid, signal.SIGKILL)
                assert chat.wait(timeout=30) == -signal.SIGKILL
            else:
                out, _ = chat.communicate(timeout=120)
                assert chat.returncode == 0, log.read_text()
                report = json.loads(out.strip().splitlines()[-1])
                # The truth about the outage: nothing delivered, every turn pending.
                assert (report["delivered"], report["pending"]) == (0, 2 * COUNT)
        finally:
            if chat.poll() is None:
                chat.kill()
                chat.wait(timeout=30)
            for stream in (chat.stdin, chat.stdout):
                if stream is not None:
                    stream.close()


def _restart(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(CHILD)],
        env=_env(MODE="restart", **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.parametrize("end", ["kill", "exit"])
def test_a_chat_during_an_outage_is_stored_once_in_order_when_the_application_restarts(
    make_local_server: Any, tmp_path: Path, end: str
) -> None:
    port, outbox = _free_port(), tmp_path / "outbox.db"
    env = {"URL": f"http://127.0.0.1:{port}", "OUTBOX": str(outbox), "COUNT": str(COUNT)}
    env["KEY"] = "ms_local_dev_key"
    _chat_during_the_outage(end, env, tmp_path / "chat.log")
    server = make_local_server(served=True, port=port)  # the outage ends
    report = _restart(env)
    assert (report["delivered"], report["refused"], report["pending"]) == (2 * COUNT, 0, 0)
    said = [
        pair
        for n in range(COUNT)
        for pair in (("user", f"Message {n} from alice."), ("assistant", f"Reply {n} from bot."))
    ]
    stored = stored_history(server, "local", "alice", "ag2::outbox")  # in arrival order
    assert [(row["role"], row["content"]) for row in stored] == said
    assert [row["payload"]["name"] for row in stored] == ["alice", "bot"] * COUNT
    seqs = [row["seq"] for row in stored]
    assert seqs == sorted(seqs)
    assert _restart(env)["delivered"] == 0  # a later start finds nothing left
    assert len(stored_history(server, "local", "alice", "ag2::outbox")) == 2 * COUNT


def test_flush_before_any_agent_delivers_what_a_killed_process_left(
    make_local_server: Any, tmp_path: Path
) -> None:
    # docs/faults.md: an earlier process's turns go out on the first capture, flush()
    # or close() of the new one, attached to an agent or not (issue 33, item 16).
    port, outbox = _free_port(), tmp_path / "outbox.db"
    env = {"URL": f"http://127.0.0.1:{port}", "OUTBOX": str(outbox), "COUNT": str(COUNT)}
    env["KEY"] = "ms_local_dev_key"
    _chat_during_the_outage("kill", env, tmp_path / "chat.log")
    server = make_local_server(served=True, port=port)
    report = _restart({**env, "ATTACH": "no"})
    assert (report["delivered"], report["refused"], report["pending"]) == (2 * COUNT, 0, 0)
    assert len(stored_history(server, "local", "alice", "ag2::outbox")) == 2 * COUNT
