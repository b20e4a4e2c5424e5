"""One logger tree: every package logs under ``memorysync``, and the docs list each logger."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Module-level loggers (``x = logging.getLogger("name")``): a package's own; the server
# also filters uvicorn's access logger, which it does not own.
GET_LOGGER = re.compile(r"""^\w+ = logging\.getLogger\(\s*["']([^"']+)["']\s*\)""", re.M)


def package_loggers() -> set[str]:
    names: set[str] = set()
    for source in (ROOT / "packages").glob("*/src/**/*.py"):
        names.update(GET_LOGGER.findall(source.read_text(encoding="utf-8")))
    return names


def test_every_package_logger_is_in_the_memorysync_tree() -> None:
    names = package_loggers()
    assert "memorysync.local" in names
    assert all(name == "memorysync" or name.startswith("memorysync.") for name in names), names


def test_the_observability_page_documents_every_logger() -> None:
    page = (ROOT / "docs" / "observability.md").read_text(encoding="utf-8")
    missing = {name for name in package_loggers() if f"`{name}`" not in page}
    assert missing == set()
