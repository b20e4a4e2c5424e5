"""Count each package's code lines and hold the framework adapters to a size limit.

A code line is a non-blank source line of a ``src/`` Python file that is not only a
comment and not part of a docstring (a module, class or function docstring). Tests,
examples and documentation are not counted.

Usage::

    python tools/code_lines.py              # every package's count; limit 500
    python tools/code_lines.py --limit 450

Prints one line per package under ``packages/``. The adapter packages
(``autogen-memorysync``, ``ag2-memorysync`` and any ``*-memorysync`` other than the
core and the local server) must stay at or under ``--limit``: the exit status is 1 when
one does not, 0 otherwise. A seam listed in ``SEAMS`` (a sub-package of an adapter,
e.g. ag2-memorysync's ``ag2`` 1.x middleware in ``v1/``) is counted on its own line,
held to its own limit, and left out of its package's count. Standard library only.
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_ADAPTERS = frozenset({"memorysync-core", "memorysync-local"})
# package -> {sub-package under src/<module>/: its own limit}
SEAMS = {"ag2-memorysync": {"ag2_memorysync/v1": 300}}
# Adapters held to a limit of their own instead of --limit (the issue that made them).
OWN_LIMITS = {"agent-framework-memorysync": 300}


def _docstring_lines(tree: ast.AST) -> set[int]:
    """Line numbers covered by module, class and function docstrings."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            first = body[0]
            end = first.end_lineno if first.end_lineno is not None else first.lineno
            lines.update(range(first.lineno, end + 1))
    return lines


def count_code_lines(source: str) -> int:
    """The number of code lines in ``source`` (a Python module's text)."""
    docstrings = _docstring_lines(ast.parse(source))
    code: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (
            tokenize.COMMENT,
            tokenize.NL,
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.ENDMARKER,
        ):
            continue
        # A token spanning lines (a multi-line string) makes each of its lines code.
        for line in range(token.start[0], token.end[0] + 1):
            if line not in docstrings:
                code.add(line)
    return len(code)


def package_lines(package: Path, under: str = "", skip: tuple[str, ...] = ()) -> int:
    """Code lines of the ``.py`` files under ``package/src/under``, minus ``skip`` folders."""
    src = package / "src"
    return sum(
        count_code_lines(path.read_text(encoding="utf-8"))
        for path in sorted((src / under).rglob("*.py"))
        if not any(path.is_relative_to(src / folder) for folder in skip)
    )


def is_adapter(name: str) -> bool:
    """True for a framework adapter package (held to the limit)."""
    return name.endswith("-memorysync") and name not in NOT_ADAPTERS


def main(argv: list[str] | None = None) -> int:
    """Print the counts; 1 when an adapter exceeds the limit."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=500, help="adapter limit (default 500)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository root")
    args = parser.parse_args(argv)
    packages = sorted(p for p in (args.root / "packages").iterdir() if (p / "src").is_dir())
    failed = []
    for package in packages:
        seams = SEAMS.get(package.name, {})
        limit = OWN_LIMITS.get(package.name, args.limit)
        rows = [(package.name, package_lines(package, skip=tuple(seams)), limit)]
        rows += [
            (f"{package.name} ({folder})", package_lines(package, folder), limit)
            for folder, limit in seams.items()
        ]
        for name, lines, limit in rows:
            verdict = ""
            if is_adapter(package.name):
                ok = lines <= limit
                verdict = f"  (adapter, limit {limit}: {'ok' if ok else 'OVER'})"
                if not ok:
                    failed.append(name)
            print(f"{name:24} {lines:6}{verdict}")
    if failed:
        print(f"over the limit: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
