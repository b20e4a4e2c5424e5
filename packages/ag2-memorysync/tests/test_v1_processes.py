"""ag2 1.x across processes: two conversations, the classic capability beside the middleware,
the quickstart example and the docs page's snippets; each process imports one framework only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ag2.middleware", reason="ag2 1.x is not installed (AG2-classic session)")

from shared.local_server import stored_history
from shared.markdown import extract_blocks

ROOT = Path(__file__).resolve().parents[3]
NOWHERE = "http://127.0.0.1:9"  # nothing listens: only the embedded server can answer

# One ag2 1.x conversation in a fresh interpreter that never imports AG2-classic.
V1_TURN = """
import asyncio, json, sys
from ag2 import Agent, MemoryStream
from ag2.testing import TestClient, TestConfig
from ag2_memorysync.v1 import MemorySyncMiddleware

PROMPTS = []

class Model(TestConfig):  # scripted, recording each call's prompt (any ag2 1.x)
    def create(self):
        class Client(TestClient):
            async def __call__(self, messages, context, **kwargs):
                PROMPTS.append(list(context.prompt))
                return await super().__call__(messages, context, **kwargs)
        return Client(*self.events)

async def main():
    base_url, api_key, session, message, scripted = sys.argv[1:6]
    timeout = float(sys.argv[6]) if len(sys.argv) > 6 else 1.2  # the recall budget
    memory = MemorySyncMiddleware(user_id="ana", session_id=session or None,
                                  api_key=api_key, base_url=base_url, recall_timeout=timeout)
    agent = Agent("assistant", "You help.", config=Model(scripted), middleware=[memory])
    reply = await agent.ask(message, stream=MemoryStream())
    report = await memory.aclose()
    history = await reply.context.stream.history.get_events()
    print(json.dumps({
        "prompt": PROMPTS[-1],
        "delivered": report.all_delivered,
        "history": [repr(event) for event in history],
        "classic_imported": "autogen" in sys.modules,
    }))

asyncio.run(main())
"""

# One AG2-classic chat in a fresh interpreter that never imports ag2 1.x.
CLASSIC_TURN = """
import json, sys
from autogen import ConversableAgent, UserProxyAgent
from autogen.testing import TestAgent
from ag2_memorysync import MemorySyncCapability

base_url, api_key, session, message, scripted = sys.argv[1:6]
memory = MemorySyncCapability(user_id="ana", session_id=session,
                              api_key=api_key, base_url=base_url)
llm_config = {"config_list": [{"model": "gpt-4o-mini", "api_key": "sk-test-not-used"}]}
assistant = ConversableAgent("assistant", llm_config=llm_config, human_input_mode="NEVER")
user = UserProxyAgent("ana", human_input_mode="NEVER", code_execution_config=False)
memory.add_to_agent(assistant)
seen = []
with TestAgent(assistant, [scripted]):
    create = assistant.client.create
    def recording_create(**params):
        seen.append(params["messages"])
        return create(**params)
    assistant.client.create = recording_create
    user.initiate_chat(assistant, message=message, max_turns=1, silent=True)
report = memory.close()
print(json.dumps({
    "model_input": json.dumps(seen[-1]),
    "delivered": report.all_delivered,
    "v1_imported": "ag2.middleware" in sys.modules,
}))
"""


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORYSYNC_", "OPENAI_"))}
    env["MEMORYSYNC_BASE_URL"] = NOWHERE
    return env


def run(
    script: str, server: Any, session: str, message: str, scripted: str, *extra: str
) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            server.base_url,
            server.api_key,
            session,
            message,
            scripted,
            *extra,
        ],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_second_conversation_in_another_process_recalls_the_first(served_local_server):
    first = run(V1_TURN, served_local_server, "", "I am vegetarian and I live in Lisbon.", "Ok!")
    second = run(
        V1_TURN,
        served_local_server,
        "",
        "Can you recommend a vegetarian dinner place in Lisbon?",
        "Try Alfama.",
    )
    assert first["delivered"]
    assert second["delivered"]
    assert not first["classic_imported"]
    blocks = [part for part in second["prompt"] if "<user_memories>" in part]
    assert len(blocks) == 1
    assert "Lives in Lisbon" in blocks[0]
    assert not any("user_memories" in event for event in second["history"])
    sessions = {r["session_id"] for r in stored_history(served_local_server, "local", "ana")}
    assert len(sessions) == 2  # each conversation (stream) its own transcript


def test_classic_capability_and_v1_middleware_share_one_users_memories(served_local_server):
    server = served_local_server
    classic = run(CLASSIC_TURN, server, "trip", "I am vegetarian and I live in Lisbon.", "Ok!")
    v1 = run(
        V1_TURN,
        server,
        "trip",
        "I am allergic to peanuts. Any vegetarian dinner in Lisbon?",
        "Try Alfama.",
    )
    back = run(
        CLASSIC_TURN, server, "trip", "Which snacks are safe for my peanut allergy?", "Fruit."
    )

    assert classic["delivered"]
    assert v1["delivered"]
    assert back["delivered"]
    assert not classic["v1_imported"]
    assert not v1["classic_imported"]
    assert "Lives in Lisbon" in "\n".join(v1["prompt"])  # what the classic chat stored
    assert "peanut" in back["model_input"].lower().split("which snacks")[0]  # v1's fact
    rows = stored_history(server, "local", "ana")
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "I am vegetarian and I live in Lisbon."),
        ("assistant", "Ok!"),
        ("user", "I am allergic to peanuts. Any vegetarian dinner in Lisbon?"),
        ("assistant", "Try Alfama."),
        ("user", "Which snacks are safe for my peanut allergy?"),
        ("assistant", "Fruit."),
    ]
    assert {(r["session_id"], r["source"]) for r in rows} == {("ag2::trip", "ag2")}
    assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows)


async def test_a_move_replaces_the_old_city_and_the_export_keeps_both(served_local_server):
    """Issue 25 through ag2 1.x: each conversation in its own process; the third's block
    names Toronto, not Lisbon; the middleware's export holds both, Lisbon superseded."""
    from ag2_memorysync.v1 import MemorySyncMiddleware

    server = served_local_server
    # A generous recall budget: what is recalled is the point here, not how fast.
    run(V1_TURN, server, "monday", "I live in Lisbon.", "Noted.", "30")
    run(V1_TURN, server, "tuesday", "I moved to Toronto last year.", "Noted.", "30")
    third = run(V1_TURN, server, "wednesday", "Where do I live now?", "Toronto.", "30")
    [block] = [part for part in third["prompt"] if "<user_memories>" in part]
    assert "Toronto" in block
    assert "Lisbon" not in block

    memory = MemorySyncMiddleware(user_id="ana", api_key=server.api_key, base_url=server.base_url)
    try:
        export = await memory.export()
    finally:
        await memory.aclose()
    by_text = {m["text"]: m for m in export["memories"]}
    # "last year" is kept as said, with the year it names (said_at's year minus one).
    moved = next(text for text in by_text if text.startswith("Moved to Toronto"))
    lisbon, toronto = by_text["Lives in Lisbon"], by_text[moved]
    assert moved == f"Moved to Toronto last year ({int(toronto['said_at'][:4]) - 1})"
    assert set(by_text) == {"Lives in Lisbon", moved}
    assert lisbon["state"] == "superseded"
    assert lisbon["superseded_by"] == toronto["memory_id"]
    assert toronto["state"] == "current"


def test_the_v1_quickstart_runs_offline_and_shows_mondays_facts_on_tuesday(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "ag2_v1_quickstart.py")],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "[tuesday] memories in the agent's history: 0" in out
    prompt = out.split("The system prompt of the model's call in conversation two:", 1)[1]
    assert "- Lives in Lisbon" in prompt
    assert "- Vegetarian" in prompt
    assert "All turns delivered: True" in out


DOC_BLOCKS = [
    block
    for block in extract_blocks(ROOT / "docs" / "ag2-v1.md")
    if block.language in ("python", "py", "python3") and not block.hosted_only
]


@pytest.mark.parametrize("block", DOC_BLOCKS, ids=[block.id for block in DOC_BLOCKS])
def test_the_docs_pages_python_blocks_run_offline(block: Any, tmp_path: Path) -> None:
    env = clean_env()
    env["MEMORYSYNC_API_KEY"] = "ms_docs_test_key_that_reaches_nothing"
    done = subprocess.run(
        [sys.executable, "-c", block.code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_importing_the_package_never_imports_a_framework_and_v1_names_what_it_needs():
    probe = (
        "import sys\n"
        "sys.modules['ag2'] = None\n"  # as if ag2 1.x were not installed
        "import ag2_memorysync\n"
        "assert 'autogen' not in sys.modules\n"
        "try:\n"
        "    import ag2_memorysync.v1\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "needs ag2 1.x" in done.stdout
    assert "MemorySyncCapability" in done.stdout
