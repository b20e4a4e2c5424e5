"""The GitHub workflow runs what the test command runs, on every Python the packages claim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = (ROOT / ".github" / "workflows" / "ci.yml").read_text()


def tagged_test_sessions() -> set[str]:
    noxfile = (ROOT / "noxfile.py").read_text()
    return set(
        re.findall(r'@nox\.session\(tags=\["test"\][^)]*\)\n(?:@[^\n]*\n)*def (\w+)', noxfile)
    )


def claimed_pythons() -> set[str]:
    found: set[str] = set()
    for pyproject in (ROOT / "packages").glob("*/pyproject.toml"):
        found |= set(
            re.findall(r"Programming Language :: Python :: (3\.\d+)\"", pyproject.read_text())
        )
    return found


def test_every_session_of_the_test_command_is_a_workflow_job() -> None:
    sessions = tagged_test_sessions()
    assert {"lint", "core", "compat", "cross", "packaging"} <= sessions
    listed = set(re.findall(r"^\s+- (\w+)(?:\(\w+\))?$", WORKFLOW, re.M))
    assert sessions <= listed, sessions - listed


def test_the_workflow_covers_every_python_the_classifiers_claim() -> None:
    claimed = claimed_pythons()
    assert claimed == {"3.10", "3.11", "3.12", "3.13"}
    matrix = re.search(r"python: \[([^\]]+)\]", WORKFLOW)
    assert matrix is not None
    assert set(re.findall(r'"(3\.\d+)"', matrix.group(1))) == claimed
