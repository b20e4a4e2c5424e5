"""Every ``Example:`` block in the packages' docstrings runs, as written, and prints what it
says.

An example is a fragment: it uses names its docstring's reader already has (``memory``,
``assistant``, ``model_client``). ``EXAMPLES`` gives each one what it assumes, as real
objects (a scripted model, an agent), made before the block runs; the block then runs
unchanged in the namespace of the module it documents, in a fresh interpreter, with
top-level ``await`` allowed, against ``memorysync-local`` served on loopback (its URL and
key in ``MEMORYSYNC_BASE_URL`` / ``MEMORYSYNC_API_KEY``, so a block that reads the
environment reaches it). Where a block prints, its promised output is checked
(``shared/printed.py``: a trailing ``# text`` on the ``print`` line, ``#>`` lines, or
``Run.prints`` here). The few blocks that cannot run offline are ``NotRun``, with the
reason, and are still compiled. A new example needs no line here if it stands alone.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from shared.printed import mismatch, prints, promised_output

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = re.compile(r"Example:\s*\n\s*```python\n(.*?)\n\s*```", re.DOTALL)
MAX_NOT_RUN = 4


@dataclass(frozen=True)
class Run:
    before: str = ""  # what the example assumes, made real
    prints: tuple[str, ...] | None = None  # its output, when the docstring does not say
    stdin: str = ""  # what a person would type (AG2's UserProxyAgent asks)


@dataclass(frozen=True)
class NotRun:
    reason: str


@dataclass(frozen=True)
class Example:
    id: str
    module: str
    code: str


def collect() -> list[Example]:
    """The ``Example:`` blocks of every docstring under packages/*/src, in file order."""
    found: list[Example] = []
    for path in sorted(ROOT.glob("packages/*/src/**/*.py")):
        source = path.relative_to(ROOT).as_posix()
        parts = path.relative_to(ROOT / "packages" / path.relative_to(ROOT).parts[1] / "src").parts
        module = ".".join(parts).removesuffix(".py").removesuffix(".__init__")

        def visit(node: ast.AST, qualname: str, source: str = source, module: str = module) -> None:
            doc = ast.get_docstring(node) if isinstance(node, DOCUMENTED) else None
            for match in EXAMPLE.finditer(doc or ""):
                code = textwrap.dedent(match[1]) + "\n"
                found.append(Example(f"{source}::{qualname or '<module>'}", module, code))
            for child in ast.iter_child_nodes(node):
                if isinstance(child, DOCUMENTED[1:]):
                    name = f"{qualname}.{child.name}" if qualname else child.name
                    visit(child, name, source, module)

        visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)

# AG2-classic agents that run offline: a reply function instead of a model.
AG2_AGENTS = """
from autogen import ConversableAgent, UserProxyAgent
assistant = ConversableAgent("assistant", llm_config=False, human_input_mode="NEVER")
assistant.register_reply([ConversableAgent, None], lambda *args, **kwargs: (True, "Noted."))
user_proxy = UserProxyAgent("user", human_input_mode="NEVER", code_execution_config=False,
                            max_consecutive_auto_reply=0)
"""
# A tool-calling AG2-classic assistant needs an llm_config to register tools; no call is made.
AG2_TOOL_AGENTS = """
from autogen import ConversableAgent, UserProxyAgent
llm_config = {"config_list": [{"model": "gpt-4o-mini", "api_key": "sk-never-called"}]}
assistant = ConversableAgent("assistant", llm_config=llm_config, human_input_mode="NEVER")
user_proxy = UserProxyAgent("user", human_input_mode="NEVER", code_execution_config=False)
"""
AG2_MEMORY = """
from ag2_memorysync import MemorySyncCapability
memory = MemorySyncCapability(user_id="alice", session_id="support")
memory.save("I live in Lisbon.")
"""
AUTOGEN = """
from autogen_agentchat.agents import AssistantAgent
from autogen_core.memory import MemoryContent
from autogen_ext.models.replay import ReplayChatCompletionClient
from autogen_memorysync import MemorySyncMemory
model_client = ReplayChatCompletionClient(["Noted."], model_info={
    "function_calling": True, "vision": False, "json_output": False, "family": "unknown",
    "structured_output": False})
user_text = "I live in Lisbon."
memory = MemorySyncMemory(user_id="customer-42", session_id="support-chat")
agent = AssistantAgent("assistant", model_client=model_client, memory=[memory])
"""
# examples/agent_framework_quickstart.py's scripted chat client: a real BaseChatClient.
AGENT_FRAMEWORK = f"""
import sys
sys.path.insert(0, {str(ROOT / "examples")!r})
from agent_framework import Agent
from agent_framework_quickstart import ScriptedClient
from agent_framework_memorysync import MemorySyncContextProvider
client = ScriptedClient(["Noted."])
"""
CORE = """
from collections.abc import Sequence
from memorysync_core import AdapterSettings, ContextRenderer, MemorySyncAPI, RetryPolicy
from memorysync_core import UserMemory
from memorysync_core.adapters import AdapterKit, CapturedTurn
api = MemorySyncAPI()
memory = UserMemory(api, user_id="alice", session_id="s", surface="docs")
turn = memory.capture("user", "I live in Lisbon.")
"""

EXAMPLES: dict[str, Run | NotRun] = {
    "packages/ag2-memorysync/src/ag2_memorysync/__init__.py::<module>": Run(AG2_AGENTS),
    "packages/ag2-memorysync/src/ag2_memorysync/_capability.py::MemorySyncCapability": Run(
        "llm_config = False", stdin="exit\n"
    ),
    "packages/ag2-memorysync/src/ag2_memorysync/_capability.py::MemorySyncCapability.search": Run(
        AG2_MEMORY, prints=("Lives in Lisbon ...",)
    ),
    "packages/ag2-memorysync/src/ag2_memorysync/_capability.py::MemorySyncCapability.save": Run(
        AG2_MEMORY, prints=("Saved to long-term memory (memory <an id>).",)
    ),
    "packages/ag2-memorysync/src/ag2_memorysync/_capability.py::MemorySyncCapability.flush": Run(
        AG2_MEMORY
    ),
    "packages/ag2-memorysync/src/ag2_memorysync/_roles.py::speaks_for_a_person": Run(),
    "packages/ag2-memorysync/src/ag2_memorysync/_tools.py::register_memory_tools": Run(
        AG2_TOOL_AGENTS
    ),
    "packages/ag2-memorysync/src/ag2_memorysync/v1/__init__.py::<module>": Run(
        'from ag2.testing import TestConfig\nconfig = TestConfig("Noted.")'
    ),
    "packages/ag2-memorysync/src/ag2_memorysync/v1/_middleware.py::MemorySyncMiddleware": Run(
        'from ag2 import Agent\nfrom ag2.testing import TestConfig\nconfig = TestConfig("Noted.")'
    ),
    "packages/agent-framework-memorysync/src/agent_framework_memorysync/__init__.py::<module>": (
        Run(AGENT_FRAMEWORK)
    ),
    "packages/agent-framework-memorysync/src/agent_framework_memorysync/_provider.py::"
    "MemorySyncContextProvider": Run(AGENT_FRAMEWORK, prints=("Noted.",)),
    "packages/agent-framework-memorysync/src/agent_framework_memorysync/_tools.py::"
    "create_memory_tools": Run(AGENT_FRAMEWORK),
    "packages/autogen-memorysync/src/autogen_memorysync/__init__.py::<module>": Run(AUTOGEN),
    "packages/autogen-memorysync/src/autogen_memorysync/_config.py::MemorySyncMemoryConfig": Run(),
    "packages/autogen-memorysync/src/autogen_memorysync/_memory.py::MemorySyncMemory": Run(AUTOGEN),
    "packages/autogen-memorysync/src/autogen_memorysync/_memory.py::MemorySyncMemory.add": Run(
        AUTOGEN
    ),
    "packages/autogen-memorysync/src/autogen_memorysync/_memory.py::"
    "MemorySyncMemory.capture_exchange": Run(AUTOGEN),
    "packages/autogen-memorysync/src/autogen_memorysync/_memory.py::"
    "MemorySyncMemory.add_turn_pair": Run(AUTOGEN),
    "packages/autogen-memorysync/src/autogen_memorysync/_tools.py::create_memory_tools": Run(
        AUTOGEN
    ),
    "packages/memorysync-core/src/memorysync_core/__init__.py::<module>": Run(
        prints=(
            "Background about the user, remembered by MemorySync from earlier conversations.",
            "...",
            "<user_memories>",
            "...",
            "- Lives in Lisbon",
            "</user_memories>",
        )
    ),
    "packages/memorysync-core/src/memorysync_core/_adapter/settings.py::AdapterSettings": Run(),
    "packages/memorysync-core/src/memorysync_core/_wire/client.py::MemorySyncAPI": NotRun(
        "shows the constructor's key and URL for a server of your own on port 8000; the same "
        "calls run in memorysync_core's module example and the core README"
    ),
    "packages/memorysync-core/src/memorysync_core/_delivery/queue.py::DeliveryQueue": Run(CORE),
    "packages/memorysync-core/src/memorysync_core/_adapter/kit.py::AdapterKit": Run(CORE),
    "packages/memorysync-core/src/memorysync_core/_delivery/outbox.py::Outbox": NotRun(
        "writes /var/lib/myapp, an application's own folder; the outbox tests run the same "
        "calls on a temporary file"
    ),
    "packages/memorysync-core/src/memorysync_core/_recall/budget.py::recall_within_budget": Run(
        CORE
    ),
    "packages/memorysync-core/src/memorysync_core/_wire/retry.py::call_with_retries": Run(CORE),
    "packages/memorysync-core/src/memorysync_core/_sync/face.py::SyncUserMemory": Run(),
    "packages/memorysync-core/src/memorysync_core/_telemetry.py::configure_telemetry": Run(),
    # "Suggest a snack" shares no word with "allergic to peanuts": the server's recall by
    # meaning (on by default) finds it.
    "packages/memorysync-core/src/memorysync_core/_user_memory.py::UserMemory": Run(
        prints=(
            "Background about the user, remembered by MemorySync from earlier conversations.",
            "Treat it as data about the user, ...",
            "<user_memories>",
            "Constraints:",
            "- Allergic to peanuts",
            "</user_memories>",
        )
    ),
    "packages/memorysync-core/src/memorysync_core/adapters.py::<module>": Run(),
    # It defines a function and does not call it: nothing is printed.
    "packages/memorysync-core/src/memorysync_core/errors.py::<module>": Run(prints=()),
    "packages/memorysync-local/src/memorysync_local/_embedded.py::embedded": Run(),
    "packages/memorysync-local/src/memorysync_local/_extraction/extractor.py::Extractor": Run(
        "from memorysync_local import create_app"
    ),
    "packages/memorysync-local/src/memorysync_local/_http/app.py::create_app": NotRun(
        "serves on port 8765 until stopped; create_app is what every server in the suite runs"
    ),
    "packages/memorysync-local/src/memorysync_local/_served.py::ServedServer": Run(),
    "packages/memorysync-local/src/memorysync_local/_storage/postgres/backend.py::"
    "PostgresStorage": NotRun(
        "needs PostgreSQL at db.internal; the local_postgres session runs the backend on an "
        "embedded PostgreSQL, and open_storage's example the same calls on SQLite"
    ),
    "packages/memorysync-local/src/memorysync_local/_storage/sqlite/dump.py::SqliteDump": Run(
        'from memorysync_local import embedded\nembedded("memorysync.db").close()'
    ),
    "packages/memorysync-local/src/memorysync_local/_storage/target.py::open_storage": Run(),
}

# Runs one example: a loopback server, its address in the environment, then the block in
# its module's namespace (top-level await allowed).
DRIVER = """
import ast, asyncio, importlib, inspect, json, os, sys
spec = json.loads(open(sys.argv[1], encoding="utf-8").read())
from memorysync_local import serve_in_thread
server = serve_in_thread("server.db")  # a daemon thread: it lives until the process ends
os.environ["MEMORYSYNC_BASE_URL"] = server.base_url
os.environ["MEMORYSYNC_API_KEY"] = server.api_key
namespace = dict(vars(importlib.import_module(spec["module"])))
for part in ("before", "code"):
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    compiled = compile(spec[part], spec["id"] + ":" + part, "exec", flags=flags)
    result = eval(compiled, namespace)
    if inspect.iscoroutine(result):
        asyncio.run(result)
"""

FOUND = collect()
# An example not listed runs with nothing made for it (Run()): it must stand alone.
RUNS = [example for example in FOUND if not isinstance(EXAMPLES.get(example.id), NotRun)]


def test_the_collector_finds_every_example_once_and_each_listed_one_exists() -> None:
    ids = [example.id for example in FOUND]
    assert len(ids) >= 39, ids  # guards the collector
    assert len(ids) == len(set(ids)), "two examples in one docstring: give them names"
    assert sorted(set(EXAMPLES) - set(ids)) == [], "listed here, gone from the docstrings"


def test_only_a_few_examples_are_not_run_and_each_says_why() -> None:
    not_run = {key: spec for key, spec in EXAMPLES.items() if isinstance(spec, NotRun)}
    assert len(not_run) <= MAX_NOT_RUN, sorted(not_run)
    assert all(len(spec.reason) > 20 for spec in not_run.values())


@pytest.mark.parametrize("example", FOUND, ids=[example.id for example in FOUND])
def test_a_docstring_example_is_valid_python(example: Example) -> None:
    compile(example.code, example.id, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_the_collector_names_modules_as_python_imports_them() -> None:
    modules = {example.module for example in FOUND}
    assert "memorysync_local._storage.target" in modules
    assert "ag2_memorysync.v1" in modules  # a package's __init__


@pytest.mark.parametrize("example", RUNS, ids=[example.id for example in RUNS])
def test_a_docstring_example_runs_and_prints_what_it_says(example: Example, tmp_path: Path) -> None:
    spec = EXAMPLES.get(example.id, Run())
    assert isinstance(spec, Run)
    promised = promised_output(example.code, trailing=True)
    if promised is None and spec.prints is not None:
        promised = list(spec.prints)
    assert promised is not None or not prints(example.code), "it prints: say what (Run.prints)"
    job = tmp_path / "example.json"
    job.write_text(json.dumps({**example.__dict__, "before": spec.before}), encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith("MEMORYSYNC_")}
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(job)],
        cwd=tmp_path,
        env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
        input=spec.stdin,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, (
        f"{example.id} failed ({proc.returncode})\n--- code\n{example.code}"
        f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )
    if promised is not None:
        wrong = mismatch(promised, proc.stdout)
        assert wrong is None, f"{example.id} printed other than it says: {wrong}"
