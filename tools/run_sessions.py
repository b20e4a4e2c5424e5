"""Run nox sessions a few at a time, each in its own process, and report them in order.

    python3 tools/run_sessions.py --nox-python PY (--tags TAG | --sessions S...) [--jobs N]

``dev.py test`` calls it. Most of the suite waits on sockets, subprocesses and servers,
so two cores serve three sessions at once nearly as fast as one; the tests themselves
are written to hold on a machine that busy (CONTRIBUTING.md, "Tests that hold on any
machine"). Each session writes its output to ``.nox/logs/<session>.log``; a line per
session says how it ended and how long it took, and the whole log of every failed
session is printed at the end, so a CI log shows each failure in full.

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / ".nox" / "logs"

# Started first: the longest sessions, so the run ends when the last short one does.
_LONG_FIRST = ("local", "cross", "typecheck", "compat", "docs", "packaging")


@dataclass(frozen=True)
class Outcome:
    """How one session ended."""

    session: str
    returncode: int
    seconds: float
    log: Path


def selected_sessions(nox: list[str], selector: list[str]) -> list[str]:
    """The sessions ``nox -l`` lists for ``selector`` (``--tags test``, ``-s a b``)."""
    listing = subprocess.run(
        [*nox, "--list", "--json", *selector], cwd=ROOT, capture_output=True, text=True
    )
    if listing.returncode != 0:
        raise SystemExit(f"nox could not list the sessions:\n{listing.stderr}")
    return [entry["session"] for entry in json.loads(listing.stdout)]


def _weight(session: str) -> int:
    text = session.replace("package='local'", "local")
    for rank, word in enumerate(_LONG_FIRST):
        if word in text:
            return rank
    return len(_LONG_FIRST)


def _log_name(session: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", session).strip("-") + ".log"


def run_session(nox: list[str], session: str, lock: threading.Lock) -> Outcome:
    """Run one session, its output to its own log file; say when it ends."""
    log = LOGS / _log_name(session)
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.call([*nox, "-s", session], cwd=ROOT, stdout=out, stderr=out)
    outcome = Outcome(session, code, time.monotonic() - started, log)
    with lock:
        verdict = "ok    " if code == 0 else "FAILED"
        print(f"{verdict} {session} ({outcome.seconds / 60:.1f} min)", flush=True)
    return outcome


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nox-python", required=True, help="the interpreter that has nox")
    parser.add_argument("--jobs", type=int, default=3, help="sessions at once (default 3)")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--tags", nargs="+")
    group.add_argument("--sessions", nargs="+")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    nox = [args.nox_python, "-m", "nox"]
    selector = ["--tags", *args.tags] if args.tags else ["-s", *args.sessions]
    sessions = sorted(selected_sessions(nox, selector), key=_weight)
    LOGS.mkdir(parents=True, exist_ok=True)
    print(f"{len(sessions)} sessions, {args.jobs} at a time; logs in {LOGS}", flush=True)
    started = time.monotonic()
    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = list(pool.map(lambda s: run_session(nox, s, lock), sessions))
    failed = [o for o in outcomes if o.returncode != 0]
    for outcome in failed:
        print(f"\n===== {outcome.session}: {outcome.log} =====", flush=True)
        print(outcome.log.read_text(errors="replace"), flush=True)
    minutes = (time.monotonic() - started) / 60
    print(
        f"\n{len(outcomes) - len(failed)} of {len(outcomes)} sessions passed in {minutes:.1f} min"
    )
    for outcome in failed:
        print(f"nox > Session {outcome.session} failed.")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
