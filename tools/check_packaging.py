"""Build, check and smoke-test the four distributions as a user would install them.

Run from anywhere (``nox -s packaging`` runs it); needs ``hatch``, ``twine`` and ``uv``
(the ``uv`` package or an ``uv`` on PATH). Steps:

1. ``hatch build`` every package under ``packages/`` into ``dist/`` (sdist and wheel).
2. ``twine check --strict dist/*`` and our own metadata checks (README rendered as
   Markdown, classifiers, Requires-Python, license, project URLs, CHANGELOG in the sdist).
3. For each wheel, a fresh virtual environment with only that wheel and what it declares
   (sibling wheels from ``dist/`` through ``--find-links``, everything else from PyPI);
   import it; then add what an application would have (its framework, and the
   ``memorysync-local`` wheel for an embedded server) and run a smoke test.

Exit status 0 when everything passes; the first failure stops the run with its output.
With ``--build-only`` it stops after step 1 (``python3 dev.py build`` runs it so).
"""

from __future__ import annotations

import email
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIST = ROOT / "dist"


def _written_version(folder: str, import_name: str) -> str:
    """The version as its one source, the package's ``_version.py``, writes it."""
    source = (ROOT / "packages" / folder / "src" / import_name / "_version.py").read_text()
    match = re.search(r'^__version__ = "([^"]+)"$', source, re.M)
    if match is None:
        raise SystemExit(f"no __version__ in {folder}'s _version.py")
    return match.group(1)


# The four distributions release together under one version (the core's).
VERSION = _written_version("memorysync-core", "memorysync_core")


@dataclass(frozen=True)
class Package:
    folder: str
    dist_name: str
    import_name: str
    # What an application installs next to the wheel to use it (the smoke test's needs).
    app_requirements: tuple[str, ...]
    smoke: str


_SMOKE_CORE = """
import asyncio, json
from importlib.metadata import version
import httpx
import memorysync_core as core

assert version("memorysync-core") == core.__version__, version("memorysync-core")

def handler(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/org/projects":
        return httpx.Response(200, json=[{"id": "p", "tenant_id": "t1"}])
    if request.url.path == "/v1/memory/recall":
        body = json.loads(request.content)
        assert body["tenant_id"] == "t1" and body["user_id"] == "u1", body
        return httpx.Response(200, json={
            "context": "- Allergic to peanuts",
            "memories": [{"memory_id": 1, "value": "Allergic to peanuts", "score": 0.9}],
        })
    return httpx.Response(404, json={"detail": "no route"})

async def main() -> None:
    api = core.MemorySyncAPI("ms_smoke", base_url="http://smoke.invalid",
                             transport=httpx.MockTransport(handler))
    memory = core.UserMemory(api, user_id="u1", session_id="s", surface="autogen")
    result = await memory.recall("What should I avoid eating?")
    assert "peanuts" in result.block, result
    await memory.aclose()
    print("core smoke: recalled", [m.text for m in result.memories])

asyncio.run(main())
"""

_SMOKE_LOCAL = """
import asyncio, subprocess, sys
import httpx
import memorysync_local

async def main() -> None:
    server = memorysync_local.embedded()
    headers = {"X-API-Key": server.api_key}
    async with httpx.AsyncClient(transport=server.transport, base_url=server.base_url,
                                 headers=headers) as client:
        tenant = (await client.get("/org/projects")).json()[0]["tenant_id"]
        added = await client.post("/v1/memory/add_turn", json={
            "tenant_id": tenant, "user_id": "u1", "text": "I'm allergic to peanuts.",
            "source": "smoke"})
        assert added.status_code == 200, added.text
        recalled = (await client.post("/v1/memory/recall", json={
            "tenant_id": tenant, "user_id": "u1", "prompt": "Am I allergic to anything?"})).json()
        assert "peanut" in recalled["context"].lower(), recalled
        print("local smoke: recalled", recalled["context"])

asyncio.run(main())
help_text = subprocess.run(["memorysync-local", "serve", "--help"], check=True,
                           capture_output=True, text=True).stdout
assert "--api-key" in help_text, help_text
"""

_SMOKE_AUTOGEN = """
import asyncio
import memorysync_local
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import UserMessage
from autogen_memorysync import MemorySyncMemory

async def main() -> None:
    server = memorysync_local.embedded()
    settings = dict(api_key=server.api_key, base_url=server.base_url,
                    transport=server.transport)
    first = MemorySyncMemory(user_id="smoke-user", session_id="one", **settings)
    await first.add_turn_pair("I'm allergic to peanuts.", "Noted, no peanuts.")
    await first.close()

    second = MemorySyncMemory(user_id="smoke-user", session_id="two", **settings)
    context = UnboundedChatCompletionContext()
    question = "Is peanut butter a good snack for me?"
    await context.add_message(UserMessage(content=question, source="user"))
    result = await second.update_context(context)
    texts = [str(item.content) for item in result.memories.results]
    assert any("peanut" in t.lower() for t in texts), texts
    await second.close()
    print("autogen smoke: recalled", texts)

asyncio.run(main())
"""

_SMOKE_AG2 = """
import memorysync_local
from autogen import ConversableAgent
from ag2_memorysync import MemorySyncCapability

server = memorysync_local.embedded()
settings = dict(api_key=server.api_key, base_url=server.base_url, transport=server.transport)
memory = MemorySyncCapability(user_id="smoke-user", session_id="one", **settings)
assistant = ConversableAgent("assistant", llm_config=False, human_input_mode="NEVER")
memory.add_to_agent(assistant)
outcome = memory.save("I'm allergic to peanuts.")
found = memory.search("peanuts")
texts = [item.text for item in found]
assert any("peanut" in t.lower() for t in texts), (outcome, texts)
memory.close()
print("ag2 smoke: found", texts)
"""

_SMOKE_AGENT_FRAMEWORK = """
import asyncio
import memorysync_local
from agent_framework import Agent, BaseChatClient, ChatResponse, Message
from agent_framework_memorysync import MemorySyncContextProvider

class Scripted(BaseChatClient):
    seen: list = []

    def _inner_get_response(self, *, messages, stream, options, **kwargs):
        self.seen.append(str(options.get("instructions", "")))

        async def reply():
            return ChatResponse(messages=[Message("assistant", ["Noted."])])

        return reply()

async def main() -> None:
    server = memorysync_local.embedded()
    async with MemorySyncContextProvider(user_id="smoke-user", api_key=server.api_key,
                                         base_url=server.base_url,
                                         transport=server.transport) as memory:
        client = Scripted()
        agent = Agent(client, instructions="Be brief.", context_providers=[memory])
        await agent.run("I'm allergic to peanuts.", session=agent.create_session())
        assert (await memory.flush()).all_delivered
        await agent.run("Is peanut butter a good snack for me?",
                        session=agent.create_session())
    assert "peanut" in client.seen[-1].lower(), client.seen
    print("agent-framework smoke: instructions", client.seen[-1].splitlines()[-3:])

asyncio.run(main())
"""

PACKAGES = (
    Package("memorysync-core", "memorysync-core", "memorysync_core", (), _SMOKE_CORE),
    Package("memorysync-local", "memorysync-local", "memorysync_local", (), _SMOKE_LOCAL),
    Package(
        "autogen-memorysync",
        "autogen-memorysync",
        "autogen_memorysync",
        ("autogen-agentchat==0.7.5", f"memorysync-local=={VERSION}"),
        _SMOKE_AUTOGEN,
    ),
    Package(
        "ag2-memorysync",
        "ag2-memorysync",
        "ag2_memorysync",
        ("autogen==0.14.1", f"memorysync-local=={VERSION}"),
        _SMOKE_AG2,
    ),
    Package(
        "agent-framework-memorysync",
        "agent-framework-memorysync",
        "agent_framework_memorysync",
        ("agent-framework-core==1.23.0", f"memorysync-local=={VERSION}"),
        _SMOKE_AGENT_FRAMEWORK,
    ),
)

REQUIRED_METADATA = ("Name", "Version", "Summary", "Requires-Python", "Description-Content-Type")


class CheckFailed(Exception):
    """One check failed; the message says which and why."""


# nox points these at its own session environment; uv (and hatch, which installs its build
# environment with uv) would then install into nox's environment instead of the one meant.
_INHERITED_TARGETS = ("VIRTUAL_ENV", "UV_PYTHON", "UV_PROJECT_ENVIRONMENT", "CONDA_PREFIX")


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _INHERITED_TARGETS}


def _run(cmd: list[str], *, cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    shown = " ".join(cmd)
    print(f"$ {shown}", flush=True)
    env = _clean_env() if env is None else env
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CheckFailed(
            f"command failed ({proc.returncode}): {shown}\n--- stdout\n{proc.stdout}"
            f"\n--- stderr\n{proc.stderr}"
        )
    return proc.stdout


def _uv() -> list[str]:
    try:
        import uv  # type: ignore[import-not-found, unused-ignore]

        return [uv.find_uv_bin()]
    except ImportError:
        found = shutil.which("uv")
        if found is None:
            raise CheckFailed("uv is needed: pip install uv") from None
        return [found]


def _tool(name: str) -> list[str]:
    """A console tool installed next to this interpreter (nox's venv), else on PATH."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return [str(local)]
    found = shutil.which(name)
    if found is None:
        raise CheckFailed(f"{name} is needed: pip install {name}")
    return [found]


def build(workdir: Path) -> None:
    if DIST.exists():
        shutil.rmtree(DIST)
    DIST.mkdir()
    # A fresh data dir keeps a broken or stale build environment of an earlier run out.
    env = _clean_env()
    env["HATCH_DATA_DIR"] = str(workdir / "hatch-data")
    for package in PACKAGES:
        _run(
            [*_tool("hatch"), "build", str(DIST)],
            cwd=ROOT / "packages" / package.folder,
            env=env,
        )


def _artifacts(package: Package) -> tuple[Path, Path]:
    stem = package.dist_name.replace("-", "_")
    wheels = sorted(DIST.glob(f"{stem}-{VERSION}-py3-none-any.whl"))
    sdists = sorted(DIST.glob(f"{stem}-{VERSION}.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        found = sorted(p.name for p in DIST.iterdir())
        raise CheckFailed(f"{package.dist_name}: expected one wheel and one sdist, found {found}")
    return wheels[0], sdists[0]


def check_metadata() -> list[str]:
    """Every metadata problem of every package (empty when all is well)."""
    failures: list[str] = []
    _run([*_tool("twine"), "check", "--strict", *sorted(str(p) for p in DIST.iterdir())])
    for package in PACKAGES:
        wheel, sdist = _artifacts(package)
        with zipfile.ZipFile(wheel) as zf:
            meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            meta = email.message_from_string(zf.read(meta_name).decode())
            names = zf.namelist()
        problems = [f"missing {field}" for field in REQUIRED_METADATA if not meta.get(field)]
        written = _written_version(package.folder, package.import_name)
        if written != VERSION:
            problems.append(f"_version.py says {written!r}, the core says {VERSION!r}")
        if meta.get("Version") != VERSION:
            problems.append(f"Version is {meta.get('Version')!r}, expected {VERSION!r}")
        if meta.get("Requires-Python") != ">=3.10":
            problems.append(f"Requires-Python is {meta.get('Requires-Python')!r}")
        if meta.get("Description-Content-Type") != "text/markdown":
            problems.append("README is not declared as text/markdown")
        if len(meta.get_payload() or "") < 200:
            problems.append("the long description (README) is missing or tiny")
        if not (meta.get("License-Expression") or meta.get("License")):
            problems.append("no license")
        if not meta.get_all("Classifier"):
            problems.append("no classifiers")
        if not meta.get_all("Project-URL"):
            problems.append("no project URLs")
        if f"{package.import_name}/py.typed" not in names:
            problems.append("py.typed is not in the wheel")
        if package.dist_name in ("autogen-memorysync", "ag2-memorysync"):
            requires = meta.get_all("Requires-Dist") or []
            if not any(r.replace(" ", "").startswith("memorysync-core~=2.0") for r in requires):
                problems.append(f"does not depend on memorysync-core~=2.0: {requires}")
        with tarfile.open(sdist) as tf:
            members = tf.getnames()
        if not any(m.endswith("/CHANGELOG.md") for m in members):
            problems.append("CHANGELOG.md is not in the sdist")
        if problems:
            failures.append(f"{package.dist_name} metadata: " + "; ".join(problems))
        else:
            print(f"metadata ok: {wheel.name}, {sdist.name}")
    return failures


def smoke(package: Package, workdir: Path) -> None:
    wheel, _ = _artifacts(package)
    venv = workdir / package.dist_name
    _run([*_uv(), "venv", "--quiet", "--python", sys.executable, str(venv)])
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    # Our wheels keep their file names from one build to the next: never reuse a cached one.
    fresh = [arg for each in PACKAGES for arg in ("--refresh-package", each.dist_name)]
    install = [*_uv(), "pip", "install", "--quiet", "--python", str(python), *fresh]
    # Only the wheel and what it declares; siblings can only come from dist/.
    _run([*install, "--find-links", str(DIST), str(wheel)])
    _run([str(python), "-c", f"import {package.import_name}; print({package.import_name}.__all__)"])
    if package.app_requirements:
        _run([*install, "--find-links", str(DIST), *package.app_requirements])
    env = {k: v for k, v in _clean_env().items() if not k.startswith(("MEMORYSYNC_", "OPENAI_"))}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    script = workdir / f"smoke_{package.import_name}.py"
    script.write_text(textwrap.dedent(package.smoke))
    # Run outside the repository so that nothing is imported from the source tree.
    print(_run([str(python), str(script)], cwd=workdir, env=env).strip())


def main(argv: list[str]) -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="memorysync-packaging-") as tmp:
        try:
            build(Path(tmp))
            if argv == ["--build-only"]:
                print(f"\nbuilt into {DIST}: " + ", ".join(sorted(p.name for p in DIST.iterdir())))
                return 0
            failures = check_metadata()
        except CheckFailed as exc:
            print(f"\nPACKAGING CHECK FAILED: {exc}", file=sys.stderr)
            return 1
        for package in PACKAGES:
            try:
                smoke(package, Path(tmp))
            except CheckFailed as exc:
                failures.append(f"{package.dist_name} smoke test: {exc}")
    if failures:
        print("\nPACKAGING CHECK FAILED:\n" + "\n".join(failures), file=sys.stderr)
        return 1
    print(f"\npackaging ok: {len(PACKAGES)} packages in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
