"""examples/autogen_quickstart.py runs offline and shows the recall across sessions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "autogen_quickstart.py"


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
    proc = subprocess.run(
        [sys.executable, "-W", "error", str(EXAMPLE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    recalled = [line for line in lines if line.startswith("[dinner] recalled: ")]
    assert any("Vegetarian" in line for line in recalled), proc.stdout
    assert any("Lisbon" in line for line in recalled), proc.stdout
    assert not any(line.startswith("[booking] recalled: ") for line in lines)
