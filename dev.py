"""One entry point for a fresh machine with only Python 3.10+ and pip.

    python3 dev.py test    # the whole test suite (what .ci/run runs)
    python3 dev.py demo    # the main example: agents that remember, offline

Each command makes its own virtual environment under ``.venv-dev/`` and
installs what it needs there; nothing is installed into your Python.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv-dev"
TOOLS = ("nox==2026.10.20", "uv==0.13.9")
DEMO_PACKAGES = (
    "-e",
    "packages/memorysync-core",
    "-e",
    "packages/memorysync-local",
    "-e",
    "packages/autogen-memorysync",
    "-e",
    "packages/ag2-memorysync",
    "autogen-agentchat==0.7.5",
    "autogen-ext[openai]==0.7.5",
    "autogen[openai]==0.14.1",
)


def _python() -> Path:
    bindir = "Scripts" if os.name == "nt" else "bin"
    return VENV / bindir / ("python.exe" if os.name == "nt" else "python")


def _ensure_venv() -> Path:
    python = _python()
    if not python.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    subprocess.run([python, "-m", "pip", "install", "-q", *TOOLS], check=True, cwd=ROOT)
    return python


def test() -> int:
    """Run every session the test suite is made of, never the benchmarks."""
    python = _ensure_venv()
    sys.path.insert(0, str(ROOT))
    from noxfile import TEST_SESSIONS

    return subprocess.call([python, "-m", "nox", "-s", *TEST_SESSIONS], cwd=ROOT)


def demo() -> int:
    """Run examples/remember_me.py on the embedded server."""
    python = _ensure_venv()
    subprocess.run(
        [python, "-m", "uv", "pip", "install", "-q", "--python", python, *DEMO_PACKAGES],
        check=True,
        cwd=ROOT,
    )
    return subprocess.call([python, "examples/remember_me.py"], cwd=ROOT)


def main(argv: list[str]) -> int:
    commands = {"test": test, "demo": demo}
    if len(argv) != 1 or argv[0] not in commands:
        print(__doc__)
        return 2
    return commands[argv[0]]()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
