"""``memorysync_core.adapters`` is exactly what the four adapters import from it.

Every name there is a semver promise, so a name no adapter calls is a promise kept for
nobody (issue 32, item 4), and a name an adapter reaches for elsewhere in the core's
private modules is one the module is missing.
"""

from __future__ import annotations

import ast
from pathlib import Path

from memorysync_core import adapters

ROOT = Path(__file__).resolve().parents[1]
# The four adapters: AG2's classic capability and its ag2 1.x middleware share a package.
ADAPTERS = ("autogen-memorysync", "ag2-memorysync", "agent-framework-memorysync")


def imported_from_the_core(package: str) -> tuple[set[str], set[str]]:
    """Names imported from ``memorysync_core.adapters``, and private core modules used."""
    names: set[str] = set()
    private: set[str] = set()
    for path in sorted((ROOT / "packages" / package / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "memorysync_core.adapters":
                    names.update(alias.name for alias in node.names)
                elif node.module.startswith("memorysync_core._"):
                    private.add(f"{path.name}: {node.module}")
            elif isinstance(node, ast.Import):
                private.update(
                    f"{path.name}: {a.name}"
                    for a in node.names
                    if a.name.startswith("memorysync_core._")
                )
    return names, private


def test_the_adapters_module_holds_exactly_what_the_adapters_import() -> None:
    used: set[str] = set()
    for package in ADAPTERS:
        names, private = imported_from_the_core(package)
        assert not private, f"{package} imports the core's private modules: {private}"
        used |= names
    assert used == set(adapters.__all__)
    assert len(used) == 8  # of 20 before issue 32
