"""Every script in examples/ runs offline and prints what it promises.

Each example runs in a fresh interpreter, in an empty working directory, without
``OPENAI_API_KEY`` (so the scripted models answer) and with the MemorySync environment
pointing at a closed loopback port (so only the embedded or loopback server it starts
itself can answer). The assertions read the output: what was recalled, and whose.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Examples for frameworks the cross session does not install run in their own package's
# session, by a test there that names the example.
RUN_ELSEWHERE = {
    "agent_framework_quickstart.py": "packages/agent-framework-memorysync/tests/test_example.py",
    "ag2_v1_quickstart.py": "packages/ag2-memorysync/tests (the ag2_v1 session)",
}
EXAMPLES = sorted(
    path for path in (ROOT / "examples").glob("*.py") if path.name not in RUN_ELSEWHERE
)
NOWHERE = "http://127.0.0.1:9"


def run_example(path: Path, cwd: Path) -> str:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MEMORYSYNC_", "OPENAI_"))
    }
    env["MEMORYSYNC_BASE_URL"] = NOWHERE
    env["MEMORYSYNC_API_KEY"] = "ms_examples_test_key_that_reaches_nothing"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run(
        [sys.executable, str(path)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, (
        f"{path.name} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n"
        f"{proc.stderr}"
    )
    return proc.stdout


def section(output: str, title: str) -> str:
    """The lines of ``output`` from the header containing ``title`` to the next header."""
    match = re.search(
        rf"^=== [^\n]*{re.escape(title)}[^\n]*\n(.*?)(?=^=== |\Z)", output, re.M | re.S
    )
    assert match is not None, f"no section {title!r} in:\n{output}"
    return match.group(1)


def test_the_examples_the_docs_name_exist() -> None:
    names = {path.stem for path in EXAMPLES}
    expected = {
        "remember_me",
        "memory_tools",
        "multi_user_service",
        "autogen_quickstart",
        "ag2_quickstart",
    }
    assert expected <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_every_example_runs_offline(path: Path, tmp_path: Path) -> None:
    output = run_example(path, tmp_path)
    assert output.strip(), f"{path.name} printed nothing"
    assert not list(tmp_path.iterdir()), f"{path.name} left files in the working directory"


def test_remember_me_recalls_monday_in_friday_sessions_on_both_frameworks(
    tmp_path: Path,
) -> None:
    output = run_example(ROOT / "examples" / "remember_me.py", tmp_path)
    monday_autogen = section(output, "Monday, AutoGen")
    monday_ag2 = section(output, "Monday, AG2")
    friday_autogen = section(output, "Friday, AutoGen")
    friday_ag2 = section(output, "Friday, AG2")
    # Nothing is known before Monday's first message, and a reply never recalls the
    # message it answers.
    assert "recalled:" not in monday_autogen
    assert "recalled:" not in monday_ag2
    # On Friday, new agents over a reopened database recall Monday's facts.
    assert re.search(r"^recalled: .*allergic to peanuts", friday_autogen, re.M | re.I)
    assert re.search(r"^recalled: .*daughter is called Ana", friday_ag2, re.M)
    # Each recall is about the question asked, not everything known.
    assert "Ana" not in friday_autogen
    assert "both agents recalled what Alice said" in output


def test_remember_me_says_done_only_when_friday_recalled_and_exits_non_zero_otherwise(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location(
        "remember_me", ROOT / "examples" / "remember_me.py"
    )
    assert spec is not None
    assert spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(demo, "OPENAI_KEY", None)
    real_embedded = demo.memorysync_local.embedded
    # Every server is a new, empty database: Friday's agents have nothing to recall.
    monkeypatch.setattr(
        demo.memorysync_local, "embedded", lambda path=None, **kwargs: real_embedded(**kwargs)
    )
    assert demo.main() == 1
    output = capsys.readouterr().out
    assert "Done:" not in output
    assert "Failed: AutoGen did not recall 'peanuts'; AG2 did not recall 'Ana'." in output


def test_memory_tools_saves_then_finds_the_preference_through_tool_calls(
    tmp_path: Path,
) -> None:
    output = run_example(ROOT / "examples" / "memory_tools.py", tmp_path)
    first = section(output, "Conversation 1")
    second = section(output, "Conversation 2")
    assert 'tool call: save_memory({"text": "The user prefers window seats."})' in first
    assert re.search(r"^tool result: Saved to long-term memory", first, re.M)
    assert "tool call: search_memory(" in second
    assert re.search(r"^tool result: - .*prefers window seats", second, re.M | re.I)


def test_multi_user_service_shares_one_client_and_keeps_users_apart(tmp_path: Path) -> None:
    output = run_example(ROOT / "examples" / "multi_user_service.py", tmp_path)
    assert "each user recalled their own city and nobody else's: yes" in output
    assert "user-07 recalled: ['Lives in Helsinki']" in output

    def number(label: str) -> float:
        match = re.search(rf"^{re.escape(label)}: ([0-9.]+)", output, re.M)
        assert match is not None, f"no {label!r} in:\n{output}"
        return float(match.group(1))

    assert number("memory objects created") == 40
    assert number("httpx.AsyncClient objects alive at most") == 1
    # One pool: at most one connection per concurrent request (20 users), reused by the
    # second round, far fewer than one per memory object or per request.
    assert 1 <= number("TCP connections opened to the server") <= 20
    assert number("requests to the server") >= 80
    # What construction costs is measured in bench/ (many users in one process).
    assert re.search(r"mean construction ([0-9.]+) ms", output) is not None


def test_autogen_quickstart_recalls_the_booking_facts_at_dinner(tmp_path: Path) -> None:
    output = run_example(ROOT / "examples" / "autogen_quickstart.py", tmp_path)
    assert re.search(r"^\[dinner\] recalled: .*Lisbon", output, re.M)
    assert re.search(r"^\[dinner\] recalled: .*[Vv]egetarian", output, re.M)


def test_ag2_quickstart_shows_mondays_facts_to_the_model_on_tuesday(tmp_path: Path) -> None:
    output = run_example(ROOT / "examples" / "ag2_quickstart.py", tmp_path)
    _, _, model_input = output.partition("What the model received in session two:")
    assert "- Lives in Lisbon" in model_input
    assert "- Vegetarian" in model_input
    assert model_input.rstrip().endswith("Can you recommend a vegetarian dinner place in Lisbon?")
