"""No import cycle among the modules of any package (issue 32, item 4).

The graph is read from the sources with ``ast``, not from ``sys.modules``: every
``import`` and ``from ... import`` of the package's own modules counts, at the top of a
module, inside a function (a deferred import) or under ``if TYPE_CHECKING`` (a type-only
one). A cycle closed only by a deferred or type-only import still ties the modules
together: neither can be understood, moved or tested without the other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "memorysync_core": "memorysync-core",
    "autogen_memorysync": "autogen-memorysync",
    "ag2_memorysync": "ag2-memorysync",
    "agent_framework_memorysync": "agent-framework-memorysync",
    "memorysync_local": "memorysync-local",
}


def module_name(top: Path, path: Path) -> str:
    parts = list(path.relative_to(top.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(node: ast.AST, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    """The package's own modules that one import statement loads."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names if alias.name in known)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        submodules = [f"{source}.{alias.name}" for alias in node.names]
        # ``from . import _telemetry`` loads the module only (its package is already
        # loading); ``from .pkg import name`` reads the package's namespace too.
        if not all(name in known for name in submodules) and source in known:
            yield source
        yield from (name for name in submodules if name in known)


def import_graph(top: Path) -> dict[str, set[str]]:
    """Each module of the package under ``top`` -> the package's modules it imports."""
    files = {module_name(top, path): path for path in sorted(top.rglob("*.py"))}
    known = set(files)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[module] = {
            target
            for node in ast.walk(tree)  # every statement: functions and TYPE_CHECKING too
            for target in imported(node, module, is_package, known)
            if target != module
        }
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (each one or more cycles)."""
    reach: dict[str, set[str]] = {}
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        reach[start] = seen
    groups = {
        tuple(sorted({m} | {n for n in reach[m] if m in reach[n]}))
        for m in graph
        if any(m in reach[n] for n in reach[m])
    }
    return [list(group) for group in sorted(groups) if len(group) > 1]


def write_package(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / next(iter(files)).split("/")[0]


def test_the_graph_sees_type_only_and_deferred_imports(tmp_path: Path) -> None:
    # Guards the reader: were it to miss one kind of import, every package would pass.
    top = write_package(
        tmp_path,
        {
            "pkg/__init__.py": "from .a import A\n",
            "pkg/a.py": "from .sub import b\nA = 1\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/b.py": "def f():\n    from ..c import C\n    return C\n",
            "pkg/c.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from . import a\n"
                "import pkg.d\nC = 1\n"
            ),
            "pkg/d.py": "",
        },
    )
    graph = import_graph(top)
    assert graph["pkg.sub.b"] == {"pkg.c"}  # deferred
    assert graph["pkg.c"] == {"pkg.a", "pkg.d"}  # type-only, and a plain ``import``
    assert cycles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]


@pytest.mark.parametrize("package", list(PACKAGES))
def test_no_import_cycle_among_a_packages_modules(package: str) -> None:
    top = ROOT / "packages" / PACKAGES[package] / "src" / package
    graph = import_graph(top)
    assert len(graph) > 3, f"no modules read under {top}"
    assert cycles(graph) == []
