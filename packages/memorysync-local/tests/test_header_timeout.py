"""Reading a request's headers is bounded as reading its body is (issue 33, item 8): a
client that trickles header lines gets a 408 and its connection closed, on the served
server and on ``memorysync-local serve``.

The bound is the feature, so it is asserted, as ``timeout + SLACK``; the trickle itself
would go on far longer (``TRICKLE_FOR``).
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memorysync_local import ServedServer, create_app
from shared.timing import SLACK

KEY = "ms_local_dev_key"
HEAD_TIMEOUT = 0.5
TRICKLE_FOR = 30.0  # how long a client left alone would hold the connection
LINE_EVERY = 0.1  # the trickle's pace (under the timeout: each line "arrives in time")


@pytest.fixture
def quick_server(tmp_path: Path) -> Iterator[ServedServer]:
    """A served server that gives a request's head (and each piece of a body) 0.5 s."""
    app = create_app(str(tmp_path / "heads.db"), body_timeout=HEAD_TIMEOUT)
    server = ServedServer(app, api_key=KEY, tenant_id="local", db_path=str(tmp_path / "heads.db"))
    try:
        yield server
    finally:
        server.stop()


def address(base_url: str) -> tuple[str, int]:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def trickle_headers(where: tuple[str, int]) -> tuple[bytes, float]:
    """Send a request line, then one header line every ``LINE_EVERY`` s, never ending the
    head; what the server sent before closing, and how long after the first byte."""
    with socket.create_connection(where, timeout=TRICKLE_FOR + 10) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        line = 0
        while time.monotonic() - started < TRICKLE_FOR:
            # Waiting for the server's answer is the pace: no sleep.
            readable, _, _ = select.select([sock], [], [], LINE_EVERY)
            if readable:
                break
            try:
                sock.sendall(f"X-Slow-{line}: 1\r\n".encode())
            except OSError:  # the server closed first
                break
            line += 1
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
        return received, time.monotonic() - started


def test_a_trickled_head_gets_408_and_the_connection_closed(quick_server: ServedServer) -> None:
    received, took = trickle_headers(address(quick_server.base_url))
    assert received.startswith(b"HTTP/1.1 408"), received[:80]
    assert b"connection: close" in received.lower()
    assert b"headers: the request's headers did not arrive within 0.5 seconds" in received
    assert took <= HEAD_TIMEOUT + SLACK


def test_a_head_sent_in_pieces_in_time_is_served(quick_server: ServedServer) -> None:
    with socket.create_connection(address(quick_server.base_url), timeout=30) as sock:
        for piece in (b"GET /health HT", b"TP/1.1\r\nHost: x\r\n", b"Connection: close\r\n\r\n"):
            sock.sendall(piece)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received[:80]
    assert b'"status":"ok"' in received


def test_keep_alive_requests_each_get_their_own_head_time(quick_server: ServedServer) -> None:
    # Three requests on one connection: the clock restarts with each head.
    with socket.create_connection(address(quick_server.base_url), timeout=30) as sock:
        for _ in range(3):
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            received = b""
            while b'"capabilities"' not in received:
                received += sock.recv(65536)
            assert received.startswith(b"HTTP/1.1 200"), received[:80]


def test_a_connection_that_sends_nothing_is_closed(quick_server: ServedServer) -> None:
    with socket.create_connection(address(quick_server.base_url), timeout=60) as sock:
        started = time.monotonic()
        assert sock.recv(65536) == b""  # closed, with no answer to a request never made
        # An idle connection gets the keep-alive time (5 s), as between two requests.
        assert time.monotonic() - started <= 5 + SLACK


def test_the_cli_server_bounds_a_trickled_head(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memorysync_local._cli",
            "serve",
            "--db",
            str(tmp_path / "cli.db"),
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--api-key",
            KEY,
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MEMORYSYNC_LOCAL_API_KEYS": ""},
    )
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        port = int(banner.rsplit(":", 1)[1])
        received, took = trickle_headers(("127.0.0.1", port))
        assert received.startswith(b"HTTP/1.1 408"), received[:80]
        assert took <= 10 + SLACK  # the default body timeout bounds the head too
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
