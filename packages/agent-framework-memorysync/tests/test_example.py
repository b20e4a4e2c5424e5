"""examples/agent_framework_quickstart.py runs offline and shows the recall across sessions.

The repository's ``tests/test_examples.py`` runs in an environment without Agent
Framework, so this package's tests run this example.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "agent_framework_quickstart.py"


def test_quickstart_runs_offline_and_session_two_recalls_session_ones_facts(
    tmp_path: Path,
) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MEMORYSYNC_") and key != "OPENAI_API_KEY"
    }
    # Anything that reached for the hosted service would fail to connect.
    env["MEMORYSYNC_BASE_URL"] = "http://127.0.0.1:9"
    # Older agent-framework-core releases announce experimental features on import.
    quiet = ["-W", "ignore:[SKILLS]", "-W", "ignore:[HARNESS]"]
    proc = subprocess.run(
        [sys.executable, "-W", "error", *quiet, str(EXAMPLE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    dinner = lines.index(
        "[dinner] user: Can you recommend a vegetarian restaurant in Lisbon for tonight?"
    )
    recalled = [line for line in lines[dinner:] if line.startswith("  recalled: ")]
    assert any("Vegetarian" in line for line in recalled), proc.stdout
    assert any("Lisbon" in line for line in recalled), proc.stdout
    assert not any(line.startswith("  recalled: ") for line in lines[:dinner])
    assert lines[-1].startswith("[dinner] assistant: ")
