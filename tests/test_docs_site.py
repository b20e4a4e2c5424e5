"""The documentation site's front matter names what ships: every package, every framework."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / "docs" / "index.md"
NUMBERS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}
PACKAGES_HEADING = re.compile(r"^## The (\w+) packages$")
FRAMEWORKS = ("AutoGen", "AG2", "Agent Framework")


def shipped_packages() -> list[str]:
    """The distributions in packages/: each folder with a pyproject.toml."""
    return sorted(p.parent.name for p in (ROOT / "packages").glob("*/pyproject.toml"))


def home_package_section() -> tuple[str, list[str]]:
    """The home page's "The N packages" heading word and the distributions its table lists."""
    lines = HOME.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        match = PACKAGES_HEADING.match(line)
        if match is None:
            continue
        names: list[str] = []
        for row in lines[i + 1 :]:
            if row.startswith("#"):
                break
            cell = re.match(r"^\|\s*`([^`]+)`\s*\|", row)
            if cell:
                names.append(cell[1])
        return match[1], names
    raise AssertionError(f'{HOME} has no "## The N packages" heading')


def test_the_home_page_lists_exactly_the_packages_in_the_repository() -> None:
    packages = shipped_packages()
    assert len(packages) >= 5, packages  # guards the glob: an empty list would match nothing
    word, listed = home_package_section()
    assert sorted(listed) == packages
    assert len(listed) == len(set(listed)), listed
    assert word == NUMBERS[len(packages)], f'heading says "{word}", packages/ has {len(packages)}'


def test_the_site_title_and_home_page_name_every_framework() -> None:
    mkdocs = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    site_name = re.search(r"^site_name: (.+)$", mkdocs, re.MULTILINE)
    assert site_name is not None
    title = HOME.read_text(encoding="utf-8").splitlines()[0]
    for framework in FRAMEWORKS:
        assert framework in site_name[1], (framework, site_name[1])
        assert framework in title, (framework, title)
    assert "ag2` 1.x" in HOME.read_text(encoding="utf-8")


def test_getting_started_has_a_runnable_example_for_each_framework() -> None:
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", page, flags=re.MULTILINE)
    imports = {
        "AutoGen": "from autogen_memorysync import",
        "AG2-classic": "from ag2_memorysync import",
        "AG2 1.x": "from ag2_memorysync.v1 import",
        "Agent Framework": "from agent_framework_memorysync import",
    }
    for heading, line in imports.items():
        section = next((s for s in sections if s.startswith(heading + "\n")), None)
        assert section is not None, f'getting-started.md has no "## {heading}" section'
        # The block itself runs in tests/test_docs_snippets.py; here: it is there.
        assert "```python\n" in section, heading
        assert line in section, heading
