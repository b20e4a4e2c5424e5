"""The published 1.1.0 adapters, measured as released: the figures the README gives them.

``bench/budget.py`` (item 3) and ``bench/loop_health.py`` (item 4) compare our adapters
with re-implemented patterns. This module measures the real
``autogen-memorysync==1.1.0`` and ``ag2-memorysync==1.1.0`` instead, under the same
conditions: the same benchmark server (``bench._server``, in its own process), the same
delays and budgets.

The published packages have the same import names as ours, so they run in a child
process with an interpreter of their own, which the caller provides::

    python3 -m venv /tmp/published-venv
    /tmp/published-venv/bin/pip install autogen-memorysync==1.1.0 \\
        ag2-memorysync==1.1.0 autogen-core==0.7.5 autogen==0.14.1 openai
    python -m bench.published_budget --python /tmp/published-venv/bin/python

What is measured (``--quick``: fewer repetitions):

- **Budget** (as item 3): ``recall_timeout`` 250 ms, the tenant lookup answers after
  100 ms and recall after 5 s; a fresh instance per trial, measured on its first recall
  (1.1.0 grants the first call ``max(recall_timeout, 3.0)``) and on a second one (tenant
  cached, strict budget). AutoGen through ``update_context`` with a real ``autogen_core``
  model context; AG2 through ``ConversableAgent.process_last_received_message``, the
  framework method that runs the capability's hook.
- **Event loop** (as item 4): a 1 ms heartbeat on the caller's loop. AG2: chats driven by
  ``a_initiate_chat`` whose recall takes 1 s (``recall_timeout`` 2 s). AutoGen: 50
  memories recall at once, repeated.
- **Construction**: the time to build one instance (each builds its own
  ``httpx.AsyncClient``).

Prints a markdown section; ``--out FILE`` also writes it.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import subprocess
import tempfile
import time
from pathlib import Path

from . import _heartbeat
from ._server import PROMPT, USER, BenchServer
from ._stats import Stat, ms, stat

BUDGET = 0.25  # the same figures as bench/budget.py
TENANT_DELAY = 0.1
RECALL_DELAY = 5.0
SLOW_RECALL = 1.0  # the same figure as bench/loop_health.py
AGENTS = 50

# Runs in the published packages' interpreter; prints one JSON object on stdout. It
# can import nothing of this repository (see _child), so it starts with the
# heartbeat's own source: the same heartbeat as item 4's.
CHILD = (
    inspect.getsource(_heartbeat)
    + r"""
import asyncio, json, logging, sys, time, warnings
from importlib import metadata

warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)  # the packages log every budget miss by design
args = json.loads(sys.argv[1])
BUDGET, TRIALS, PROMPT = args["budget"], args["trials"], args["prompt"]
CONN = {"api_key": args["key"], "base_url": args["url"]}
LLM_CONFIG = {"config_list": [{"model": "gpt-4o-mini", "api_key": "sk-bench-not-used"}]}

from autogen import ConversableAgent, UserProxyAgent
from autogen.testing import TestAgent
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import UserMessage
from autogen_memorysync import MemorySyncMemory
from ag2_memorysync import MemorySyncCapability


async def context():
    ctx = UnboundedChatCompletionContext()
    await ctx.add_message(UserMessage(content=PROMPT, source="user"))
    return ctx


async def autogen_budget():
    cold, warm = [], []
    ctx = await context()
    for i in range(TRIALS):
        # Built inside the running loop, as an application builds it (1.1.0 then
        # starts its own tenant warm-up task from the constructor).
        memory = MemorySyncMemory(
            user_id=f"{args['user']}-ag-{i}", session_id="budget", recall_timeout=BUDGET, **CONN
        )
        for series in (cold, warm):
            started = time.perf_counter()
            await memory.update_context(ctx)
            series.append(time.perf_counter() - started - BUDGET)
        await memory.close()
    return cold, warm


def ag2_budget():
    cold, warm = [], []
    for i in range(TRIALS):
        capability = MemorySyncCapability(
            user_id=f"{args['user']}-ag2-{i}", session_id="budget", recall_timeout=BUDGET, **CONN
        )
        assistant = ConversableAgent("assistant", llm_config=LLM_CONFIG, human_input_mode="NEVER")
        capability.add_to_agent(assistant)
        for series in (cold, warm):
            message = {"role": "user", "content": PROMPT, "name": "user"}
            started = time.perf_counter()
            assistant.process_last_received_message([message])
            series.append(time.perf_counter() - started - BUDGET)
        capability.close()
    return cold, warm


async def ag2_loop():
    capability = MemorySyncCapability(
        user_id=args["seeded_user"], session_id="loop", recall_timeout=args["slow"] + 1.0, **CONN
    )
    assistant = ConversableAgent("assistant", llm_config=LLM_CONFIG, human_input_mode="NEVER")
    capability.add_to_agent(assistant)

    async def chats():
        for _ in range(args["chats"]):
            user = UserProxyAgent("user", human_input_mode="NEVER", code_execution_config=False)
            with TestAgent(assistant, ["Noted."]):
                await user.a_initiate_chat(assistant, message=PROMPT, max_turns=1, silent=True)

    lags = await with_heartbeat(chats)
    capability.close()
    return lags


async def autogen_loop():
    memories = [
        MemorySyncMemory(user_id=args["seeded_user"], session_id=f"s{i}", **CONN)
        for i in range(args["agents"])
    ]
    contexts = [await context() for _ in memories]
    await asyncio.gather(*(m.update_context(c) for m, c in zip(memories, contexts)))  # warm

    async def rounds():
        for _ in range(args["rounds"]):
            await asyncio.gather(*(m.update_context(c) for m, c in zip(memories, contexts)))

    lags = await with_heartbeat(rounds)
    for memory in memories:
        await memory.close()
    return lags


async def construction():
    autogen, ag2 = [], []
    for i in range(TRIALS):
        started = time.perf_counter()
        memory = MemorySyncMemory(user_id=f"{args['user']}-c{i}", **CONN)
        autogen.append(time.perf_counter() - started)
        await memory.close()
    for i in range(TRIALS):
        started = time.perf_counter()
        capability = MemorySyncCapability(user_id=f"{args['user']}-c{i}", **CONN)
        ag2.append(time.perf_counter() - started)
        capability.close()
    return autogen, ag2


out = {
    "versions": {n: metadata.version(n) for n in (
        "autogen-memorysync", "ag2-memorysync", "autogen-core", "autogen", "httpx")},
    "python": sys.version.split()[0],
}
if args["phase"] == "budget":
    out["autogen_cold"], out["autogen_warm"] = asyncio.run(autogen_budget())
    out["ag2_cold"], out["ag2_warm"] = ag2_budget()
elif args["phase"] == "ag2_loop":
    out["ag2_loop"] = asyncio.run(ag2_loop())
elif args["phase"] == "autogen_loop":
    out["autogen_loop"] = asyncio.run(autogen_loop())
else:
    out["autogen_build"], out["ag2_build"] = asyncio.run(construction())
print(json.dumps(out))
"""
)


def _child(python: str, args: dict[str, object], timeout: float) -> dict[str, object]:
    # An empty working directory: the child must import the installed 1.1.0
    # packages, never this repository's sources.
    with tempfile.TemporaryDirectory() as empty:
        proc = subprocess.run(
            [python, "-c", CHILD, json.dumps(args)],
            cwd=empty,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"the published packages' run failed:\n{proc.stderr}")
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def measure(server: BenchServer, python: str, *, quick: bool) -> dict[str, object]:
    """Run every phase in ``python`` (an interpreter with the 1.1.0 packages)."""
    base: dict[str, object] = {
        "budget": BUDGET,
        "trials": 10 if quick else 50,
        "prompt": PROMPT,
        "user": f"{USER}-published",  # no memories: every budget trial is cold
        "seeded_user": USER,  # the memories server.seed() stored, as in item 4
        "key": server.api_key,
        "url": server.base_url,
        "slow": SLOW_RECALL,
        "chats": 1 if quick else 3,
        "agents": AGENTS,
        "rounds": 3 if quick else 10,
    }
    result: dict[str, object] = {"trials": base["trials"], "chats": base["chats"]}
    phases: list[tuple[str, dict[str, float]]] = [
        ("budget", {"/org/projects": TENANT_DELAY, "/v1/memory/recall": RECALL_DELAY}),
        ("ag2_loop", {"/v1/memory/recall": SLOW_RECALL}),
        ("autogen_loop", {}),
        ("construction", {}),
    ]
    for phase, delays in phases:
        server.delays.clear()
        if delays:
            server.delays.update(delays)
        try:
            result.update(_child(python, {**base, "phase": phase}, timeout=1800))
        finally:
            server.delays.clear()
    return result


def _line(s: Stat) -> str:
    return f"| {s.name} | {s.n} | {ms(s.p50)} | {ms(s.p99)} | {ms(s.max)} |"


SERIES = (
    ("autogen-memorysync 1.1.0: overshoot, first recall of an instance", "autogen_cold"),
    ("autogen-memorysync 1.1.0: overshoot, second recall", "autogen_warm"),
    ("ag2-memorysync 1.1.0: overshoot, first recall of an instance", "ag2_cold"),
    ("ag2-memorysync 1.1.0: overshoot, second recall", "ag2_warm"),
    ("ag2-memorysync 1.1.0: heartbeat lag, a_initiate_chat, recall takes 1 s", "ag2_loop"),
    (f"autogen-memorysync 1.1.0: heartbeat lag, {AGENTS} concurrent recalls", "autogen_loop"),
    ("autogen-memorysync 1.1.0: construction of one instance", "autogen_build"),
    ("ag2-memorysync 1.1.0: construction of one instance", "ag2_build"),
)


def report(result: dict[str, object], *, elapsed: float) -> str:
    """The measurements as a markdown section."""
    series = [stat(label, result[key]) for label, key in SERIES]  # type: ignore[arg-type]
    versions = result["versions"]
    assert isinstance(versions, dict)
    return "\n".join(
        [
            "## The published 1.1.0 adapters, measured",
            "",
            f"Overshoot: recall_timeout = {BUDGET * 1000:.0f} ms; the server answers recall "
            f"after {RECALL_DELAY:.0f} s and the tenant lookup after "
            f"{TENANT_DELAY * 1000:.0f} ms; {result['trials']} fresh instances per adapter, "
            "each measured on its first and its second recall. Heartbeat lag: a 1 ms "
            f"heartbeat on the caller's loop; AG2: {result['chats']} chat(s) under "
            f"`a_initiate_chat` whose recall takes {SLOW_RECALL:.0f} s (recall_timeout "
            f"{SLOW_RECALL + 1:.0f} s); AutoGen: {AGENTS} memories recall at once, repeated. "
            "Packages: "
            + ", ".join(f"{name} {version}" for name, version in versions.items())
            + f", Python {result['python']}. `python -m bench.published_budget`, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {elapsed:.0f} s.",
            "",
            "| series | n | median | p99 | max |",
            "| --- | ---: | ---: | ---: | ---: |",
            *(_line(s) for s in series),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.published_budget --python PATH [--quick] [--out FILE]``."""
    parser = argparse.ArgumentParser(prog="python -m bench.published_budget", description=__doc__)
    parser.add_argument("--python", required=True, help="interpreter with the 1.1.0 packages")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--out", type=Path, help="also write the markdown section here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    started = time.perf_counter()
    with BenchServer() as server:
        server.seed()
        result = measure(server, args.python, quick=args.quick)
    text = report(result, elapsed=time.perf_counter() - started)
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
