"""memorysync-local on loopback for the benchmarks, in its own process, with route delays.

The server runs in a child process (``python -m bench._server``) so that it never
shares the interpreter lock with the code being measured: a server thread in the same
process would show up as client latency and as event-loop lag. A control route
(``POST /_bench/delays``) makes chosen routes answer late.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType

import httpx

from ._stats import Section

API_KEY = "ms_bench_key_not_secret"
TENANT = "bench"
USER = "bench-user"
FACTS = (
    "I live in Porto.",
    "I am allergic to peanuts.",
    "My sister lives in Lisbon.",
    "I work as a nurse.",
    "I prefer window seats.",
    "I usually drink oolong in the morning.",
    "I am learning the cello.",
    "My partner is a chef.",
    "I plan to visit Kyoto next spring.",
    "I enjoy bouldering on weekends.",
)
PROMPT = "Plan a weekend for me: where should I eat and what should I avoid?"


class _Delays(dict[str, float]):
    """Route delays, pushed to the server process on every change."""

    def __init__(self, server: BenchServer) -> None:
        super().__init__()
        self._server = server

    def _push(self) -> None:
        self._server.control("/_bench/delays", dict(self))

    def __setitem__(self, key: str, value: float) -> None:
        super().__setitem__(key, value)
        self._push()

    def update(self, *args: object, **kwargs: float) -> None:
        super().update(*args, **kwargs)
        self._push()

    def clear(self) -> None:
        super().clear()
        self._push()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_listening(
    process: subprocess.Popen[bytes], base_url: str, *, timeout: float = 60
) -> None:
    """Poll ``GET /health`` until the child server answers (it has no other way to tell)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(base_url + "/health", timeout=1).raise_for_status()
            return
        except httpx.HTTPError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server at {base_url} did not start") from None
            time.sleep(0.1)


def stop_child(process: subprocess.Popen[bytes]) -> None:
    """Terminate a child server, killing it if it does not exit within 15 s."""
    process.terminate()
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


class BenchServer:
    """memorysync-local served by uvicorn on 127.0.0.1 in a child process.

    ``delays[path] = seconds`` makes that route answer late (0 = on time), so one server
    serves every benchmark: the normal case, a recall that takes 1 s, one that takes 5 s.
    """

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="memorysync-bench-")
        db_path = str(Path(self._tmp.name) / "bench.db")
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.api_key = API_KEY
        self.tenant_id = TENANT
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench._server", db_path, str(self.port)],
            cwd=str(Path(__file__).resolve().parent.parent),
        )
        wait_until_listening(self._process, self.base_url)
        self.delays = _Delays(self)

    def control(self, path: str, body: object) -> None:
        """Call a control route of the server process."""
        # The server checks the key before it reads any body, control routes included.
        headers = {"X-API-Key": API_KEY}
        httpx.post(self.base_url + path, json=body, headers=headers, timeout=10).raise_for_status()

    def seed(self, user_id: str = USER, facts: tuple[str, ...] = FACTS) -> None:
        """Store ``facts`` for ``user_id`` through the API."""
        headers = {"X-API-Key": API_KEY, "X-End-User-ID": user_id}
        with httpx.Client(base_url=self.base_url, headers=headers, timeout=30) as client:
            for fact in facts:
                client.post(
                    "/memory/add", json={"text": fact, "source": "bench"}
                ).raise_for_status()

    def recall_body(self, user_id: str = USER, prompt: str = PROMPT) -> dict[str, object]:
        """The body of the recall request the adapters send (k = 5)."""
        return {"tenant_id": TENANT, "user_id": user_id, "prompt": prompt, "k": 5}

    def stop(self) -> None:
        """Stop the server process and delete the database."""
        stop_child(self._process)
        self._tmp.cleanup()

    def __enter__(self) -> BenchServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _serve(db_path: str, port: int) -> None:
    """The child process: memorysync-local plus the delay middleware and control route."""
    import uvicorn
    from fastapi import Request, Response

    from memorysync_local import create_app

    app = create_app(db_path, api_keys={API_KEY: TENANT})
    delays: dict[str, float] = {}

    @app.middleware("http")
    async def delay(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        seconds = delays.get(request.url.path, 0.0)
        if seconds:
            await asyncio.sleep(seconds)
        return await call_next(request)

    @app.post("/_bench/delays", include_in_schema=False)
    def set_delays(body: dict[str, float]) -> dict[str, float]:
        delays.clear()
        delays.update(body)
        return delays

    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
    )


def established_connections_to(port: int) -> int:
    """ESTABLISHED TCP connections whose remote end is ``127.0.0.1:port`` (Linux)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote, state = fields[2], fields[3]
            if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def rss_mib() -> float:
    """This process's resident memory in MiB (Linux ``/proc/self/status``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))


def run_alone(
    prog: str, description: str | None, run: Callable[..., list[Section]], argv: list[str] | None
) -> int:
    """``python -m bench.<item>``: serve, seed, run one item, print its rows."""

    def served(quick: bool) -> list[Section]:
        with BenchServer() as server:
            server.seed()
            return run(server, quick=quick)

    return print_item(prog, description, served, argv)


def print_item(
    prog: str,
    description: str | None,
    measure: Callable[[bool], list[Section]],
    argv: list[str] | None,
) -> int:
    """``python -m bench.<item> [--quick]``: ``measure(quick)``, then its rows and series.

    Exit status 1 when a row misses its goal.
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    logging.basicConfig(level=logging.ERROR)
    sections = measure(args.quick)
    for section in sections:
        print(f"{section.title}: {section.setup}")
        for row in section.rows:
            verdict = "reported" if row.passed is None else "met" if row.passed else "MISSED"
            print(f"| {row.figure} | {row.ours} | {row.baseline} | {row.ratio} | {verdict} |")
        for series in section.stats:
            print(
                f"  {series.name}: p50 {series.p50:.3f} ms, p99 {series.p99:.3f} ms, n {series.n}"
            )
        for note in section.notes:
            print(f"  {note}")
    missed = any(row.passed is False for section in sections for row in section.rows)
    return 1 if missed else 0


async def interleaved_with_bare_post(
    server: BenchServer, one_call: Callable[[], Awaitable[object]], rounds: int
) -> tuple[list[float], object, list[float]]:
    """Time ``one_call`` against a bare recall POST, interleaved, on warm connections.

    Returns (``one_call``'s seconds, the last warm-up call's result, the POST's
    seconds) after 20 warm-up rounds of each.
    """
    body = server.recall_body()
    headers = {"X-API-Key": server.api_key, "Accept": "application/json"}
    ours: list[float] = []
    bare: list[float] = []
    warmed: object = None
    async with httpx.AsyncClient(base_url=server.base_url, headers=headers) as client:
        for _ in range(20):  # warm both connections and the tenant
            warmed = await one_call()
            (await client.post("/v1/memory/recall", json=body)).raise_for_status()
        for _ in range(rounds):
            started = time.perf_counter()
            await client.post("/v1/memory/recall", json=body)
            bare.append(time.perf_counter() - started)
            started = time.perf_counter()
            await one_call()
            ours.append(time.perf_counter() - started)
    return ours, warmed, bare
