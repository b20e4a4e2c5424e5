"""examples/ag2_quickstart.py runs offline and shows session one's facts reaching the model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "ag2_quickstart.py"


def test_the_quickstart_runs_offline_and_recalls_session_ones_facts(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORYSYNC_", "OPENAI_"))}
    env["MEMORYSYNC_BASE_URL"] = "http://127.0.0.1:9"  # nothing listens: embedded server only
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "[monday] ana: I am vegetarian and I live in Lisbon." in out
    model_input = out.split("What the model received in session two:", 1)[1]
    assert "- Lives in Lisbon" in model_input
    assert "- Vegetarian" in model_input
    assert model_input.rstrip().endswith("Can you recommend a vegetarian dinner place in Lisbon?")
