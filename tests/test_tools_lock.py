"""The development tools come from tools.lock, and only provisioning changes the host."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXACT = re.compile(r"^[A-Za-z0-9_.-]+(\[[a-z,]+\])?==[0-9][0-9A-Za-z.]*$")


def lock_lines() -> list[str]:
    lines = (ROOT / "tools.lock").read_text(encoding="utf-8").splitlines()
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]


def name_of(requirement: str) -> str:
    return re.split(r"[\[=<>~!]", requirement, maxsplit=1)[0].lower()


def load_dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    return dev


def string_literals(path: Path) -> list[str]:
    # f-string pieces (a floor built from a pyproject) are not requirements of their own.
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pieces = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
              for part in node.values}  # fmt: skip
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in pieces
    ]


def test_every_lock_line_is_one_exact_version() -> None:
    lines = lock_lines()
    assert len(lines) >= 15
    assert [line for line in lines if not EXACT.match(line)] == []
    names = [name_of(line) for line in lines]
    assert len(names) == len(set(names)), "a tool is locked twice"


def test_no_tool_is_named_with_its_own_version_outside_the_lock() -> None:
    # A tool written as "pytest>=8" in the noxfile would bypass the lock.
    locked = {name_of(line) for line in lock_lines()}
    for path in (ROOT / "noxfile.py", ROOT / "dev.py"):
        stray = [
            text
            for text in string_literals(path)
            if re.match(r"^[A-Za-z0-9_.\[\],-]+(==|>=|~=|<)", text) and name_of(text) in locked
        ]
        assert stray == [], f"{path.name} pins a locked tool itself: {stray}"


def test_dev_py_installs_nox_and_uv_at_the_locked_versions() -> None:
    dev = load_dev()
    assert set(dev.TOOLS) <= set(lock_lines())
    assert [name_of(requirement) for requirement in dev.TOOLS] == ["nox", "uv"]


def test_the_noxfile_and_dev_py_claim_the_same_pythons() -> None:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    (pythons,) = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "PYTHONS" for t in node.targets)
    ]
    assert pythons == load_dev().PYTHONS


def test_importing_the_noxfile_runs_nothing_on_the_host() -> None:
    # Module level may define, read files and set PATH; it never starts a process, makes
    # a link or a folder. Sessions never install system packages either: provisioning does.
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    top_level_calls = [
        ast.unparse(node.func)
        for statement in tree.body
        if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        for node in ast.walk(statement)
        if isinstance(node, ast.Call)
    ]
    acting = re.compile(r"subprocess|symlink|mkdir|replace|unlink|system|Popen|run|install|_expose")
    assert [call for call in top_level_calls if acting.search(call)] == []
    assert "tool" in top_level_calls  # guards the walk: the lock is read at import
    text = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert "symlink" not in text
    assert "apt-get" not in text


def test_provision_links_a_hidden_interpreter_and_names_a_missing_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = load_dev()
    interpreter = tmp_path / "pyenv" / "versions" / "3.99.1" / "bin" / "python3.99"
    interpreter.parent.mkdir(parents=True)
    interpreter.write_text("#!/bin/sh\necho 3.99\n")
    interpreter.chmod(0o755)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(dev, "INTERPRETERS", tmp_path / "links")
    assert dev.link_interpreters(("3.99", "3.98")) == ["3.98"]
    link = tmp_path / "links" / "python3.99"
    assert link.resolve() == interpreter.resolve()
