"""Each package's sdist ships its sources, README and changelog, and no tests.

The tests import the repository's test kit (``shared/``) and, for PostgreSQL,
``bench/``, which belong to no package; an sdist that shipped them would ship tests that
cannot be collected. The sdist is built here with hatchling, the packages' build backend,
as ``python3 dev.py build`` builds it.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(path.parent for path in (ROOT / "packages").glob("*/pyproject.toml"))


def build_sdist(package: Path, into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(into)],
        cwd=package,
        check=True,
        capture_output=True,
        text=True,
    )
    (sdist,) = into.glob("*.tar.gz")
    return sdist


def members(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as archive:
        # "name-2.0.0/src/..." -> "src/..."
        return sorted(name.split("/", 1)[1] for name in archive.getnames() if "/" in name)


def test_there_are_five_packages() -> None:
    assert [path.name for path in PACKAGES] == [
        "ag2-memorysync",
        "agent-framework-memorysync",
        "autogen-memorysync",
        "memorysync-core",
        "memorysync-local",
    ]


@pytest.mark.parametrize("package", PACKAGES, ids=[path.name for path in PACKAGES])
def test_the_sdist_ships_sources_readme_and_changelog_and_no_tests(
    package: Path, tmp_path: Path
) -> None:
    names = members(build_sdist(package, tmp_path))
    assert {"README.md", "CHANGELOG.md", "pyproject.toml", "PKG-INFO"} <= set(names)
    assert any(name.startswith("src/") and name.endswith("/__init__.py") for name in names)
    assert any(name.endswith("/py.typed") for name in names), names
    shipped_tests = [name for name in names if name.split("/")[0].startswith("tests")]
    assert shipped_tests == []
    assert [name for name in names if "conftest" in name or name.startswith("shared/")] == []
