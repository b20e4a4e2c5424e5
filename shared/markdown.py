"""Fenced code blocks of the project's Markdown files, for the tests that run or check them.

A block may carry a mark: an HTML comment alone on the last non-blank line before its
fence, e.g. ``<!-- hosted-only -->`` (a Python block that needs the hosted service) or
``<!-- after-release -->`` (a command for after 2.0.0 is on the package index).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOSTED_ONLY = "<!-- hosted-only -->"
AFTER_RELEASE = "<!-- after-release -->"
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\s`]*)")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    mark: str  # the HTML comment on the line before the fence, or ""

    @property
    def hosted_only(self) -> bool:
        return self.mark == HOSTED_ONLY

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def doc_files() -> list[Path]:
    """README.md and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def extract_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of one Markdown file, with their hosted-only marks."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    previous = ""  # the last non-blank line before the current fence
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        fence, indent = match["fence"], len(match["indent"])
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        blocks.append(
            Block(
                path=path,
                line=start + 1,
                language=match["info"].lower(),
                code="\n".join(body) + "\n",
                mark=previous if previous.startswith("<!--") else "",
            )
        )
        previous = ""
        i += 1
    return blocks
