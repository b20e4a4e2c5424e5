"""One version number: each package writes it once, in its ``_version.py``."""

from __future__ import annotations

import importlib
import re
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "memorysync-core": "memorysync_core",
    "memorysync-local": "memorysync_local",
    "autogen-memorysync": "autogen_memorysync",
    "ag2-memorysync": "ag2_memorysync",
    "agent-framework-memorysync": "agent_framework_memorysync",
}


@pytest.mark.parametrize(("dist", "module"), PACKAGES.items())
def test_each_package_reports_the_version_its_distribution_was_built_with(
    dist: str, module: str
) -> None:
    assert importlib.import_module(module).__version__ == version(dist)
    pyproject = (ROOT / "packages" / dist / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert f'path = "src/{module}/_version.py"' in pyproject
    assert not re.search(r"^version\s*=", pyproject, re.M), f"{dist} writes a static version"


def test_the_four_packages_release_under_one_version() -> None:
    versions = {importlib.import_module(module).__version__ for module in PACKAGES.values()}
    assert len(versions) == 1, versions


def test_no_other_python_file_writes_the_version_number() -> None:
    current = importlib.import_module("memorysync_core").__version__
    literal = re.compile(rf"""["']{re.escape(current)}["']""")
    writers = [
        str(path.relative_to(ROOT))
        for folder in ("packages", "tests", "tools", "examples", "bench")
        for path in (ROOT / folder).rglob("*.py")
        if path.name != "_version.py" and literal.search(path.read_text(encoding="utf-8"))
    ]
    assert writers == []
