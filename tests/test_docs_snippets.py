"""Every ```python block in docs/ and README.md runs, offline, against the embedded server.

Each block runs alone in a fresh interpreter (a reader copies one block, not a page), in
an empty working directory, with the MemorySync environment pointing at a closed
loopback port: a block that needs a server must bring the embedded one
(``memorysync_local.embedded()``). The few blocks that show the hosted-service setup
itself are marked with ``<!-- hosted-only -->`` on the line before the fence; they are
only compiled, and there may be at most ``MAX_HOSTED_ONLY`` of them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared.markdown import Block, doc_files, extract_blocks

ROOT = Path(__file__).resolve().parents[1]
MAX_HOSTED_ONLY = 5
# Loopback port 9 (discard) has no listener: anything that reaches for the hosted
# service instead of the embedded server fails to connect.
NOWHERE = "http://127.0.0.1:9"


def python_blocks() -> list[Block]:
    return [
        block
        for path in doc_files()
        if path.exists()
        for block in extract_blocks(path)
        if block.language in ("python", "py", "python3")
    ]


BLOCKS = python_blocks()
RUNNABLE = [block for block in BLOCKS if not block.hosted_only]
HOSTED = [block for block in BLOCKS if block.hosted_only]


def offline_env() -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MEMORYSYNC_") and key != "OPENAI_API_KEY"
    }
    # No MEMORYSYNC_API_KEY: getting started says every runnable block runs on the
    # embedded server, so a block that needs a key in the environment sets it itself.
    env["MEMORYSYNC_BASE_URL"] = NOWHERE
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def test_the_docs_have_runnable_python_blocks() -> None:
    # Guards the extractor: if it stopped finding blocks, every other test would pass.
    assert len(RUNNABLE) >= 10, [block.id for block in BLOCKS]


def test_only_a_few_blocks_are_exempt_as_hosted_only() -> None:
    assert len(HOSTED) <= MAX_HOSTED_ONLY, [block.id for block in HOSTED]


@pytest.mark.parametrize("block", HOSTED, ids=[block.id for block in HOSTED])
def test_hosted_only_block_is_valid_python(block: Block) -> None:
    compile(block.code, block.id, "exec")


def test_the_extractor_sees_fences_and_marks(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Intro\n\n```python\nprint(1)\n```\n\n<!-- hosted-only -->\n```python\nx = 2\n```\n"
        "\n```bash\nls\n```\n",
        encoding="utf-8",
    )
    blocks = extract_blocks(page)
    assert [(b.language, b.code, b.hosted_only, b.line) for b in blocks] == [
        ("python", "print(1)\n", False, 3),
        ("python", "x = 2\n", True, 8),
        ("bash", "ls\n", False, 12),
    ]


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.id for block in RUNNABLE])
def test_python_block_runs_offline(block: Block, tmp_path: Path) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(block.code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, (
        f"{block.id} failed ({proc.returncode})\n--- code\n{block.code}"
        f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )
