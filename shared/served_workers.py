"""``memorysync-local serve --workers 2`` in a child process, for tests (SQLite or
PostgreSQL), and the few requests they make.

To know which worker answers, a test stops all but one with SIGSTOP (:meth:`only`):
a stopped process cannot accept, so a connection that gets an answer was accepted by
the one left running. The pids are the ones the parent prints once every worker serves.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

KEY = "ms_workers_test_key"
DEADLINE = 60.0
# How long a new connection's first request may wait before another connection is tried.
PROBE_SECONDS = 1.0


class ServedWorkers:
    """``serve --workers 2`` on a free loopback port, over ``db``."""

    def __init__(self, db: str | Path, *extra: str) -> None:
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "memorysync_local._cli", "serve", "--db", str(db)),
                *("--port", "0", "--log-level", "warning", "--workers", "2", *extra),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "MEMORYSYNC_LOCAL_API_KEYS": KEY},
        )
        assert self.process.stdout is not None
        banner = self.process.stdout.readline()
        assert " at " in banner, banner
        self.base_url = banner.rsplit(" at ", 1)[1].strip()
        # Printed once every worker serves.
        line = self.process.stdout.readline()
        while line and not line.startswith("2 worker processes serving: pids "):
            line = self.process.stdout.readline()
        assert line, self.process.stderr.read() if self.process.stderr else ""
        self.workers = [int(pid) for pid in line.rsplit("pids ", 1)[1].split(", ")]

    def replacement(self) -> tuple[int, int]:
        """(the pid that exited, the pid serving in its place), once the parent says so."""
        assert self.process.stderr is not None
        line = self.process.stderr.readline()
        while line and "serves in its place" not in line:
            line = self.process.stderr.readline()
        assert line, "the parent exited without replacing a worker"
        words = line.split()
        gone = int(words[words.index("(pid") + 1].rstrip(")"))
        return gone, int(words[words.index("serves") - 1])

    def client(self) -> httpx.Client:
        """A client on a new connection (a keep-alive one stays with its worker)."""
        return httpx.Client(base_url=self.base_url, headers={"X-API-Key": KEY}, timeout=30)

    @contextmanager
    def only(self, pid: int) -> Iterator[httpx.Client]:
        """A client whose connection worker ``pid`` accepted: the others are stopped.

        Each worker listens on a socket of its own (``SO_REUSEPORT``), and the kernel
        picks one for each new connection: one picked for a stopped worker waits in its
        queue. So new connections are tried until one answers ``/health``; the ones left
        waiting only ever carry that read-only probe.
        """
        others = [other for other in self.workers if other != pid]
        for other in others:
            os.kill(other, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + DEADLINE
            while True:
                client = self.client()
                try:
                    client.get("/health", timeout=PROBE_SECONDS).raise_for_status()
                    break
                except httpx.TimeoutException:
                    client.close()  # picked for a stopped worker (or slow): another one
                    assert time.monotonic() < deadline, f"worker {pid} never answered"
            try:
                yield client
            finally:
                client.close()
        finally:
            for other in others:
                os.kill(other, signal.SIGCONT)

    def stop(self) -> tuple[int, str]:
        for pid in self.workers:  # never leave a worker stopped
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.process.terminate()
        _, err = self.process.communicate(timeout=DEADLINE)
        return self.process.returncode, err


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def keep(client: httpx.Client, user: str, text: str) -> None:
    body = {"tenant_id": "local", "user_id": user, "text": text, "source": "test"}
    client.post("/v1/memory/add_turn", json=body).raise_for_status()


def recall(client: httpx.Client, user: str, prompt: str) -> list[str]:
    body = {"tenant_id": "local", "user_id": user, "prompt": prompt, "k": 3}
    answer = client.post("/v1/memory/recall", json=body)
    answer.raise_for_status()
    return [memory["text"] for memory in answer.json()["memories"]]


def facts_once_extracted(client: httpx.Client, user: str, count: int) -> list[str]:
    """The user's memories once ``count`` are in (polled: extraction is in the background)."""
    deadline = time.monotonic() + DEADLINE
    while True:
        listed = client.get(f"/v1/memory/local/{user}/list")
        listed.raise_for_status()
        texts = sorted(memory["text"] for memory in listed.json()["memories"])
        if len(texts) >= count or time.monotonic() > deadline:
            return texts
        time.sleep(0.1)  # extraction runs on the server's own thread: polled, not raced
