"""Run ``.ci/run`` as a new machine would, with one core kept busy, several times in a row.

    python3 tools/stress_ci.py [--runs N] [--burners K]   # or: python3 dev.py stress-ci

Each run clones the repository's committed ``HEAD`` into a new temporary folder, makes a
brand-new bare virtual environment whose ``python3`` goes first on ``PATH`` (standard
library and pip only), and runs ``CI=true bash .ci/run`` there while ``K`` (default 1)
CPU-bound processes spin beside it. It prints each run's time and every failing test and
session, keeps each run's full log, and exits non-zero unless every run passed.
Uncommitted changes are not part of the clone: commit first.

Standard library only (``dev.py`` imports nothing else either).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_FAILURE = re.compile(r"^(FAILED|ERROR) (\S+)|^nox > Session (.+) (failed|aborted)")
_BURN = "while True: pass"


@dataclass
class RunResult:
    """What one run of ``.ci/run`` did."""

    number: int
    seconds: float
    returncode: int
    log: Path
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.returncode == 0


def failures_in(log_text: str) -> list[str]:
    """The failing tests (``FAILED``/``ERROR`` lines) and failed nox sessions of a log."""
    found: list[str] = []
    for line in log_text.splitlines():
        match = _FAILURE.match(line.strip())
        if match is None:
            continue
        item = match.group(2) or f"session {match.group(3)}"
        if item not in found:
            found.append(item)
    return found


def _fresh_machine(workdir: Path) -> tuple[Path, dict[str, str]]:
    """A clone of HEAD and the environment of a new machine: a bare venv first on PATH."""
    clone = workdir / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    bare = workdir / "bare"
    venv.EnvBuilder(with_pip=True, clear=True).create(bare)
    env = dict(os.environ)
    env["PATH"] = f"{bare / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["CI"] = "true"
    for inherited in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(inherited, None)
    return clone, env


def run_once(number: int, burners: int, keep: Path) -> RunResult:
    """One run of ``.ci/run`` on a fresh clone with ``burners`` busy cores beside it."""
    workdir = Path(tempfile.mkdtemp(prefix=f"stress-ci-{number}-"))
    clone, env = _fresh_machine(workdir)
    log = keep / f"run-{number}.log"
    spinning = [subprocess.Popen([sys.executable, "-c", _BURN]) for _ in range(burners)]
    started = time.monotonic()
    try:
        with log.open("w") as out:
            proc = subprocess.run(
                ["bash", ".ci/run"], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT
            )
    finally:
        for burner in spinning:
            burner.kill()
            burner.wait()
    seconds = time.monotonic() - started
    return RunResult(number, seconds, proc.returncode, log, failures_in(log.read_text()))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs in a row (default 3)")
    parser.add_argument("--burners", type=int, default=1, help="busy processes (default 1)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.burners < 0:
        parser.error(f"--runs must be >= 1 and --burners >= 0, got {args.runs}, {args.burners}")
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    keep = Path(tempfile.mkdtemp(prefix="stress-ci-logs-"))
    print(f"stress-ci: {args.runs} run(s) of .ci/run on {head}, {args.burners} busy core(s)")
    print(f"stress-ci: logs in {keep}", flush=True)
    results = []
    for number in range(1, args.runs + 1):
        result = run_once(number, args.burners, keep)
        results.append(result)
        verdict = "passed" if result.passed else f"FAILED (exit {result.returncode})"
        print(f"run {number}: {verdict} in {result.seconds / 60:.1f} min", flush=True)
        for failure in result.failures:
            print(f"    {failure}", flush=True)
    passed = sum(r.passed for r in results)
    print(f"stress-ci: {passed} of {len(results)} runs passed on {head}")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
