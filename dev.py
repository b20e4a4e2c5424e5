"""One entry point for a fresh machine with only Python 3.10+ and pip.

    python3 dev.py test           # the whole test suite (what .ci/run runs)
    python3 dev.py test --quick   # this Python, newest frameworks only: a few minutes
    python3 dev.py stress-ci      # .ci/run on fresh clones, one core kept busy, 3 runs
    python3 dev.py demo           # the main example: agents that remember, offline
    python3 dev.py docs           # build the documentation site into site/
    python3 dev.py bench          # the benchmarks; writes bench/results.md
    python3 dev.py build          # the five wheels and sdists into dist/
    python3 dev.py screenshot     # docs/img/inspector.png, the local server's web inspector
    python3 dev.py postgres       # a throwaway PostgreSQL with pgvector until Ctrl-C
    python3 dev.py nox ARGS...    # any nox command, e.g. `python3 dev.py nox -l`

Each command works in its own virtual environment under ``.venv-dev/`` and
installs what it needs there; nothing is installed into your Python. An install
runs only when what it would install changed since the last one (a stamp file in
``.venv-dev/`` records it), so ``demo`` runs offline once it has run once.

This file uses the standard library only: nox and everything else run inside
``.venv-dev/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import venv
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv-dev"
TOOLS = ("nox==2026.10.20", "uv==0.13.9")
PACKAGES = (
    "packages/memorysync-core",
    "packages/memorysync-local",
    "packages/autogen-memorysync",
    "packages/ag2-memorysync",
)
DEMO_REQUIREMENTS = (
    *(arg for package in PACKAGES for arg in ("-e", package)),
    "autogen-agentchat==0.7.5",
    "autogen-ext[openai]==0.7.5",
    "autogen[openai]==0.14.1",
)


def _python() -> Path:
    bindir = "Scripts" if os.name == "nt" else "bin"
    return VENV / bindir / ("python.exe" if os.name == "nt" else "python")


def _fingerprint(requirements: Sequence[str]) -> str:
    """What an install depends on: the requirements, and the metadata of our packages."""
    digest = hashlib.sha256(json.dumps(list(requirements)).encode())
    for arg in requirements:
        pyproject = ROOT / arg / "pyproject.toml"
        if pyproject.is_file():
            digest.update(pyproject.read_bytes())
    return digest.hexdigest()


def _install_once(name: str, requirements: Sequence[str], installer: Sequence[str]) -> None:
    """Install ``requirements`` unless the stamp says exactly these are installed."""
    stamp = VENV / f".installed-{name}"
    wanted = _fingerprint(requirements)
    if stamp.is_file() and stamp.read_text() == wanted:
        return
    subprocess.run([*installer, *requirements], check=True, cwd=ROOT)
    stamp.write_text(wanted)


def _usable(python: Path) -> bool:
    """True when ``python`` runs and has pip (an interrupted creation leaves neither)."""
    if not python.exists():
        return False
    probe = subprocess.run([python, "-c", "import pip"], capture_output=True, cwd=ROOT)
    return probe.returncode == 0


def _ensure_venv() -> Path:
    """The development environment with nox and uv, made and filled on first use.

    A half-made environment (a run stopped while creating it) is made again.
    """
    python = _python()
    if not _usable(python):
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    _install_once("tools", TOOLS, [str(python), "-m", "pip", "install", "-q"])
    return python


def nox(*args: str) -> int:
    """Run nox from the development environment with ``args``."""
    python = _ensure_venv()
    return subprocess.call([python, "-m", "nox", *args], cwd=ROOT)


# ``test --quick``: this interpreter, the newest framework of each adapter, no packaging,
# docs or oldest-release sessions. The whole suite (``test``) is still what CI runs.
QUICK_SESSIONS = (
    "lint",
    "core",
    "local",
    "autogen(newest)",
    "ag2(newest)",
    "ag2_v1(newest)",
    "agent_framework(newest)",
    "cross",
)


def test(*args: str) -> int:
    """Run every session tagged ``test`` in noxfile.py, never the benchmarks.

    ``--quick`` runs :data:`QUICK_SESSIONS` only; ``--jobs N`` sets how many sessions
    run at once (default 3; tools/run_sessions.py says why).
    """
    options = list(args)
    quick = "--quick" in options
    if quick:
        options.remove("--quick")
    jobs = "3"
    if options[:1] == ["--jobs"] and len(options) == 2 and options[1].isdigit():
        jobs = options[1]
        options = []
    if options:
        print(f"dev.py test: unknown arguments {' '.join(args)!r}; expected --quick, --jobs N")
        return 2
    selector = ["--sessions", *QUICK_SESSIONS] if quick else ["--tags", "test"]
    runner = [sys.executable, str(ROOT / "tools" / "run_sessions.py")]
    python = _ensure_venv()
    return subprocess.call([*runner, "--nox-python", str(python), "--jobs", jobs, *selector])


def stress_ci(*args: str) -> int:
    """Run tools/stress_ci.py: .ci/run on fresh clones with one core busy (default 3 runs)."""
    return subprocess.call([sys.executable, str(ROOT / "tools" / "stress_ci.py"), *args])


def demo() -> int:
    """Run examples/remember_me.py on the embedded server."""
    python = _ensure_venv()
    uv = [str(python), "-m", "uv", "pip", "install", "-q", "--python", str(python)]
    _install_once("demo", DEMO_REQUIREMENTS, uv)
    return subprocess.call([python, "examples/remember_me.py"], cwd=ROOT)


def docs() -> int:
    """Build the documentation site (strict) into site/."""
    return nox("-s", "docs")


def bench() -> int:
    """Run the benchmarks; they write bench/results.md."""
    return nox("-s", "bench")


def build() -> int:
    """Build the five wheels and sdists into dist/."""
    return nox("-s", "build")


def postgres(*args: str) -> int:
    """A throwaway PostgreSQL with pgvector (tools/throwaway_postgres.py) until Ctrl-C."""
    return nox("-s", "postgres", "--", *args)


def screenshot() -> int:
    """Write docs/img/inspector.png (needs Chromium; installs it as root with apt-get)."""
    return nox("-s", "inspector_screenshot")


# The verbs, in the order the docstring lists them.
COMMANDS: dict[str, Callable[..., int]] = {
    "test": test,
    "demo": demo,
    "docs": docs,
    "bench": bench,
    "build": build,
    "screenshot": screenshot,
    "postgres": postgres,
    "stress-ci": stress_ci,
    "nox": nox,
}
# The verbs that take arguments; the others take none.
WITH_ARGUMENTS = {"nox", "test", "stress-ci", "postgres"}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS or (len(argv) > 1 and argv[0] not in WITH_ARGUMENTS):
        print(__doc__)
        return 2
    return COMMANDS[argv[0]](*argv[1:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
