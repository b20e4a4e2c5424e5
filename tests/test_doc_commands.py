"""Every shell command the README and the docs give names something that exists.

Commands are the lines of ``bash``/``shell``/``sh``/``console`` blocks and the inline code
spans of two words or more that start with a command word. Each must be one of:

- ``python3 dev.py VERB`` with a verb dev.py has (the way to nox, docs, bench, build);
- ``python PATH`` or ``python -m MODULE`` for a file or a module folder in this repo;
- a console script we ship, with one of its subcommands;
- ``pip install`` of this repo's package folders or built wheels and of third-party
  packages; naming one of our distributions by its index name is only allowed in a
  block marked ``<!-- after-release -->`` (2.0.0 is not on the index yet: ``pip install
  autogen-memorysync`` installs the earlier 1.x release);
- ``pytest PATH``, ``bash PATH``, ``cd``, ``export``, ``git clone``, and any of these
  behind ``VAR=value`` or ``unshare -n``, chained with ``&&``.

Bare ``nox`` is refused: a new machine has none (``python3 dev.py nox ...`` runs it).
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from shared.markdown import AFTER_RELEASE, doc_files, extract_blocks

ROOT = Path(__file__).resolve().parents[1]
SHELL_LANGUAGES = {"bash", "shell", "sh", "console"}
COMMAND_WORDS = ("python3", "python", "pip", "nox", "memorysync-local", "pytest", "bash", "uv")
OUR_DISTRIBUTIONS = {
    path.parent.name: path for path in (ROOT / "packages").glob("*/pyproject.toml")
}
INLINE = re.compile(r"`([^`\n]+)`")


def markdown_files() -> list[Path]:
    extra = [ROOT / "CONTRIBUTING.md", ROOT / "examples" / "README.md"]
    packages = sorted((ROOT / "packages").glob("*/README.md"))
    return [*doc_files(), *(path for path in extra if path.exists()), *packages]


def found_commands() -> list[tuple[str, str, bool]]:
    """(where, command, after_release) for every command in the Markdown files."""
    commands: list[tuple[str, str, bool]] = []
    for path in markdown_files():
        where = path.relative_to(ROOT).as_posix()
        for block in extract_blocks(path):
            if block.language not in SHELL_LANGUAGES:
                continue
            for offset, line in enumerate(block.code.splitlines(), start=1):
                command = line.removeprefix("$ ").split(" #")[0].strip()
                if command and not command.startswith("#"):
                    after = block.mark == AFTER_RELEASE
                    commands.append((f"{where}:{block.line + offset}", command, after))
        text = path.read_text(encoding="utf-8")
        # Inline spans, outside fenced blocks.
        prose = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.M | re.S)
        for span in INLINE.findall(prose):
            words = span.split()
            if len(words) >= 2 and words[0] in COMMAND_WORDS:
                commands.append((where, span.strip(), False))
    return commands


def _dev_verbs() -> set[str]:
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    return set(dev.COMMANDS)


def _console_scripts() -> dict[str, str]:
    scripts: dict[str, str] = {}
    for pyproject in OUR_DISTRIBUTIONS.values():
        # tomllib is 3.11+; the [project.scripts] table is simple enough to read by line.
        section = pyproject.read_text().partition("[project.scripts]")[2].split("\n[")[0]
        scripts.update(re.findall(r'^([\w.-]+)\s*=\s*"([^"]+)"', section, re.M))
    return scripts


def _subcommands(script: str) -> set[str]:
    module = _console_scripts()[script].split(":")[0]
    # The script's module and its siblings named after it (``_cli.py``, ``_cli_data.py``),
    # or, for a package, its modules (``_cli/commands.py``, ``_cli/data_commands.py``).
    where = module.replace(".", "/")
    sources = [
        *(ROOT / "packages").glob(f"*/src/{where}*.py"),
        *(ROOT / "packages").glob(f"*/src/{where}/*.py"),
    ]
    text = "\n".join(path.read_text() for path in sources)
    # The data commands add their subcommands through a helper named ``command``.
    return set(re.findall(r'\b(?:add_parser|command)\(\s*"([^"]+)"', text))


def _distribution_name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def problem(command: str, after_release: bool) -> str | None:
    """Why ``command`` does not work on a fresh clone, or None when it does."""
    for part in re.split(r"\s*(?:&&|;)\s*", command):
        found = _problem_of_one(part, after_release)
        if found:
            return found
    return None


def _problem_of_one(command: str, after_release: bool) -> str | None:
    if re.fullmatch(r"[A-Za-z_]\w*=(\$\([^)]*\)|\S*)", command):  # an assignment only
        return None
    words = shlex.split(command)
    while words and re.match(r"^[A-Za-z_]\w*=", words[0]):  # VAR=value prefixes
        words = words[1:]
    if words[:2] == ["unshare", "-n"]:
        words = words[2:]
    if not words:
        return None
    head, args = words[0], words[1:]
    if head in {"cd", "export"} or words[:2] == ["git", "clone"]:
        return None
    if head == "nox":
        return "a new machine has no nox: write `python3 dev.py nox ...`"
    if head in {"python", "python3", ".venv-dev/bin/python"}:
        if args[:1] == ["dev.py"]:
            verb = args[1] if len(args) > 1 else ""
            return None if verb in _dev_verbs() else f"dev.py has no verb {verb!r}"
        if args[:1] == ["-m"]:
            module = args[1] if len(args) > 1 else ""
            path = ROOT / module.replace(".", "/")
            runnable = (path / "__main__.py").exists() or (
                path.with_suffix(".py").is_file()
                and 'if __name__ == "__main__":' in path.with_suffix(".py").read_text()
            )
            if runnable or module in {"pip", "venv"}:
                return None
            return f"no module {module!r} in the repo"
        return None if args and (ROOT / args[0]).exists() else f"no file {args[:1]}"
    if head in _console_scripts():
        sub = args[0] if args else ""
        return None if sub in _subcommands(head) else f"{head} has no subcommand {sub!r}"
    if head == "pip":
        if args[:1] != ["install"]:
            return "only `pip install` is documented"
        for arg in args[1:]:
            if arg.startswith("-"):
                continue
            if arg.startswith(("./", "dist/")):
                folder = ROOT / arg.split("[")[0]
                if arg.startswith("./") and not folder.is_dir():
                    return f"no folder {arg}"
                continue
            if _distribution_name(arg) in OUR_DISTRIBUTIONS and not after_release:
                return (
                    f"{arg} from the index is the earlier 1.x release: install "
                    f"./packages/{_distribution_name(arg)} or mark the block {AFTER_RELEASE}"
                )
        return None
    if head in {"pytest", "bash"}:
        paths = [arg.split("::")[0] for arg in args if not arg.startswith("-")]
        missing = [path for path in paths if "/" in path and not (ROOT / path).exists()]
        return f"no such path: {missing}" if missing else None
    return f"unknown command {head!r}"


COMMANDS = found_commands()


def test_the_docs_give_commands_and_the_list_is_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with capsys.disabled():
        print(f"\n{len(COMMANDS)} shell commands in README.md, docs/ and the package READMEs:")
        for where, command, after in COMMANDS:
            print(f"  {where}: {command}{'  [after release]' if after else ''}")
    assert any(command == "python3 dev.py test" for _, command, _ in COMMANDS)


@pytest.mark.parametrize(
    ("where", "command", "after_release"), COMMANDS, ids=[c for _, c, _ in COMMANDS]
)
def test_each_documented_command_names_something_that_exists(
    where: str, command: str, after_release: bool
) -> None:
    assert problem(command, after_release) is None, f"{where}: `{command}`: " + str(
        problem(command, after_release)
    )


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("nox -s docs", "no nox"),
        ("python3 dev.py lint", "no verb"),
        ("pip install autogen-memorysync", "earlier 1.x"),
        ("pip install ./packages/nothing-here", "no folder"),
        ("memorysync-local frobnicate", "no subcommand"),
        ("python examples/missing.py", "no file"),
    ],
)
def test_the_checker_refuses_what_a_new_machine_cannot_run(command: str, expected: str) -> None:
    assert expected in str(problem(command, after_release=False))


def test_the_bench_runs_without_the_test_tools() -> None:
    # `python3 dev.py bench` installs no pytest: the bench's fake chat endpoint
    # (shared.fake_server) must work without it (issue 33, item 21). Run the section
    # that uses it as `python -m bench.llm_extractor`, with pytest made unimportable.
    hide_pytest = (
        "import runpy, sys; sys.modules['pytest'] = None; "
        "runpy.run_module('bench.llm_extractor', run_name='__main__', alter_sys=True)"
    )
    done = subprocess.run(
        [sys.executable, "-c", hide_pytest],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "chat requests per turn" in done.stdout
