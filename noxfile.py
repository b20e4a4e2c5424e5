"""Development sessions. The README's test command runs ``TEST_SESSIONS``.

Every session installs the packages editable from ``packages/`` and runs on
the interpreter that runs nox. Framework sessions are parametrized over the
oldest and the newest framework release each adapter supports.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = False

CORE = "packages/memorysync-core"
LOCAL = "packages/memorysync-local"
AUTOGEN = "packages/autogen-memorysync"
AG2 = "packages/ag2-memorysync"

TEST_TOOLS = ("pytest>=8", "pytest-asyncio>=0.24", "pytest-timeout>=2.3", "respx>=0.21")

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
BOTH_FRAMEWORKS = ("autogen-agentchat==0.7.5", "autogen-ext==0.7.5", "autogen[openai]==0.14.1")
AG2_VERSIONS = {
    "oldest": ("ag2[openai]==0.9.10",),
    "newest": ("autogen[openai]==0.14.1",),
}

# The explicit list the README's test command (and .ci/run) runs. Never bench.
TEST_SESSIONS = (
    "lint",
    "typecheck",
    "core",
    "local",
    "autogen(oldest)",
    "autogen(newest)",
    "ag2(oldest)",
    "ag2(newest)",
    "cross",
    "docs",
    "packaging",
)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff lint and format check over the whole repo."""
    session.install("ruff==0.14.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over every package's sources."""
    session.install("mypy==1.18.2", *TEST_TOOLS)
    session.install("-e", CORE, "-e", f"{LOCAL}", "-e", AUTOGEN, "-e", AG2)
    session.install(*BOTH_FRAMEWORKS)
    session.run(
        "mypy",
        "packages/memorysync-core/src/memorysync_core",
        "packages/memorysync-local/src/memorysync_local",
        "packages/autogen-memorysync/src/autogen_memorysync",
        "packages/ag2-memorysync/src/ag2_memorysync",
    )


@nox.session
def core(session: nox.Session) -> None:
    """memorysync-core's tests (respx, the fake server)."""
    session.install(*TEST_TOOLS)
    session.install("-e", CORE, "-e", LOCAL)
    session.run("pytest", f"{CORE}/tests", *session.posargs)


@nox.session
def local(session: nox.Session) -> None:
    """memorysync-local's tests, including the official client's interop test."""
    session.install(*TEST_TOOLS, "memorysync==1.10.1")
    session.install("-e", CORE, "-e", LOCAL)
    session.run("pytest", f"{LOCAL}/tests", *session.posargs)


@nox.session
@nox.parametrize("framework", [nox.param(name, id=name) for name in AUTOGEN_VERSIONS])
def autogen(session: nox.Session, framework: str) -> None:
    """autogen-memorysync on the oldest and the newest supported AutoGen."""
    session.install(*TEST_TOOLS)
    session.install(
        "-e", CORE, "-e", LOCAL, "-e", AUTOGEN, *AUTOGEN_VERSIONS[framework], *AUTOGEN_TEST_PINS
    )
    session.run("pytest", f"{AUTOGEN}/tests", *session.posargs)


@nox.session
@nox.parametrize("framework", [nox.param(name, id=name) for name in AG2_VERSIONS])
def ag2(session: nox.Session, framework: str) -> None:
    """ag2-memorysync on the oldest and the newest supported classic AG2."""
    session.install(*TEST_TOOLS)
    session.install("-e", CORE, "-e", LOCAL, "-e", AG2, *AG2_VERSIONS[framework])
    session.run("pytest", f"{AG2}/tests", *session.posargs)


@nox.session
def cross(session: nox.Session) -> None:
    """Cross-package tests: fault injection, secrets, examples, docs snippets."""
    session.install(*TEST_TOOLS, "schemathesis>=3.39,<4", "hypothesis==6.170.9")
    session.install("-e", CORE, "-e", LOCAL, "-e", AUTOGEN, "-e", AG2)
    session.install(*BOTH_FRAMEWORKS)
    session.run("pytest", "tests", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site in strict mode."""
    # pymdown-extensions 12+ breaks mkdocstrings' highlighting (Highlight.__init__ needs md).
    session.install(
        "mkdocs==1.6.1",
        "mkdocs-material>=9.5,<10",
        "mkdocstrings[python]>=0.26,<1",
        "pymdown-extensions>=10.2,<12",
    )
    session.install("-e", CORE, "-e", LOCAL, "-e", AUTOGEN, "-e", AG2)
    session.run("mkdocs", "build", "--strict", "--site-dir", "site")


@nox.session
def packaging(session: nox.Session) -> None:
    """Build every wheel and sdist, twine-check them, smoke-test each wheel alone."""
    session.install("hatch>=1.12", "twine>=5", "uv==0.13.9")
    session.run("python", "tools/check_packaging.py")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks; writes bench/results.md and the latency chart. Not a test."""
    session.install("matplotlib>=3.8")
    session.install("-e", CORE, "-e", LOCAL, "-e", AUTOGEN, "-e", AG2)
    session.install(*BOTH_FRAMEWORKS)
    session.run("python", "-m", "bench", *session.posargs)
