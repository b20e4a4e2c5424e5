"""``python -m bench``: run every benchmark, write ``bench/results.md`` and ``latency.png``.

Options::

    python -m bench                      # everything, server sizes 1k / 10k / 100k
    python -m bench --quick              # fewer repetitions (a smoke run)
    python -m bench --sizes 1000 10000   # other sizes for the server's own benchmark
    python -m bench --out /tmp/bench     # write the results elsewhere
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from pathlib import Path

from . import (
    ag2_v1,
    agent_framework,
    budget,
    capture,
    history,
    hot_paths,
    knowledge_updates,
    llm_extractor,
    locomo,
    loop_health,
    many_users,
    recall_quality,
    recall_speed,
    server_bench,
    telemetry,
)
from ._report import chart, markdown
from ._server import BenchServer
from ._stats import Section

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[1000, 10000, 100000],
        help="memory counts for the server benchmark (item 7)",
    )
    parser.add_argument("--out", type=Path, default=HERE, help="directory for the results")
    args = parser.parse_args(argv)

    warnings.simplefilter("ignore")
    logging.basicConfig(level=logging.ERROR)  # budget misses log warnings by design
    started = time.perf_counter()
    sections: list[Section] = []
    with BenchServer() as server:
        server.seed()
        for module in (
            hot_paths,
            budget,
            loop_health,
            many_users,
            capture,
            ag2_v1,
            agent_framework,
        ):
            step = time.perf_counter()
            print(f"running {module.__name__} ...", file=sys.stderr, flush=True)
            sections += module.run(server, quick=args.quick)
            print(f"  done in {time.perf_counter() - step:.1f} s", file=sys.stderr, flush=True)
    print("running the server benchmark (item 7) ...", file=sys.stderr, flush=True)
    sections.append(
        Section(
            title="7. memorysync-local at 1k / 10k / 100k memories",
            setup="From the server's own benchmark (`bench/server_bench.py`, `run(sizes)`).",
            markdown=server_bench.run(tuple(args.sizes)),
        )
    )
    print("running the history-length benchmark (item 8, embedded server) ...", file=sys.stderr)
    sections += history.run(quick=args.quick)
    print("running the recall-quality set (item 9, in-process) ...", file=sys.stderr)
    sections += recall_quality.run(quick=args.quick)
    print("running the knowledge-update set (item 14, in-process) ...", file=sys.stderr)
    sections += knowledge_updates.run(quick=args.quick)
    print("running the LLM extractor's cost per turn (item 15, scripted) ...", file=sys.stderr)
    sections += llm_extractor.run(quick=args.quick)
    print("running recall at 100k memories (item 10) ...", file=sys.stderr)
    sections += recall_speed.run(quick=args.quick)
    print("running LoCoMo (item 16, in-process) ...", file=sys.stderr)
    sections += locomo.run(quick=args.quick)
    # Last: it installs OpenTelemetry's SDK in this process, for good.
    print("running the telemetry overhead (item 11, embedded server) ...", file=sys.stderr)
    sections += telemetry.run(quick=args.quick)
    elapsed = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(markdown(sections, elapsed=elapsed, quick=args.quick))
    chart(sections, args.out / "latency.png")
    print(f"wrote {args.out / 'results.md'} and latency.png in {elapsed:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
