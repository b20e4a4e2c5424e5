"""``memorysync-local serve``: flags, the generated key, real requests to the process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from memorysync_local._cli import build_parser, main

COMMAND = [sys.executable, "-m", "memorysync_local._cli"]


def test_help_documents_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    for flag in (
        "--db",
        "--host",
        "--port",
        "--api-key",
        "--eval-key",
        "--plan",
        "--async-extraction",
        "--log-level",
        "MEMORYSYNC_LOCAL_API_KEYS",
    ):
        assert flag in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--plan", "ms_a=gold:3", "--api-key", "ms_a"], "free:N"),
        (["serve", "--plan", "ms_ghost=free:3", "--api-key", "ms_a"], "not configured"),
        (["serve", "--api-key", "ms_a="], "TENANT"),
        (["serve", "--port", "http"], "--port"),
    ],
)
def test_bad_flags_exit_2_with_a_clear_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_parser_accepts_repeated_keys() -> None:
    args = build_parser().parse_args(
        ["serve", "--api-key", "ms_a", "--api-key", "ms_b=acme", "--eval-key", "ms_e"]
    )
    assert args.api_key == ["ms_a", "ms_b=acme"]
    assert args.eval_key == ["ms_e"]


def _start(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *COMMAND,
            "serve",
            "--db",
            str(tmp_path / "cli.db"),
            "--port",
            "0",
            "--log-level",
            "warning",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.terminate()
    out, err = proc.communicate(timeout=30)
    return out, err


def test_serve_without_keys_generates_one_and_prints_it_once(tmp_path: Path) -> None:
    proc = _start(tmp_path, env={"MEMORYSYNC_LOCAL_API_KEYS": ""})
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        key_line = proc.stdout.readline()
        base_url = banner.rsplit(" at ", 1)[1].strip()
        key = key_line.rsplit(": ", 1)[1].strip()
        assert base_url.startswith("http://127.0.0.1:")
        assert key.startswith("ms_local_")
        with httpx.Client(base_url=base_url, headers={"X-API-Key": key}, timeout=30) as client:
            assert client.get("/org/projects").json()[0]["tenant_id"] == "local"
            assert client.get("/org/projects", headers={"X-API-Key": "ms_x"}).status_code == 401
    finally:
        out, err = _stop(proc)
    assert key not in out + err  # shown once, never again (nor in any log line)


def test_serve_with_env_keys_and_an_eval_key(tmp_path: Path) -> None:
    proc = _start(
        tmp_path,
        "--eval-key",
        "ms_eval",
        "--api-key",
        "ms_b=acme",
        env={"MEMORYSYNC_LOCAL_API_KEYS": "ms_a,ms_c"},
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().rsplit(" at ", 1)[1].strip()
        with httpx.Client(base_url=base_url, timeout=30) as client:
            for key, tenant in (("ms_a", "local"), ("ms_c", "local"), ("ms_b", "acme")):
                answer = client.get("/org/projects", headers={"X-API-Key": key})
                assert answer.json()[0]["tenant_id"] == tenant
            assert client.get("/org/projects", headers={"X-API-Key": "ms_eval"}).status_code == 403
    finally:
        out, err = _stop(proc)
    assert "generated" not in out
    assert "ms_a" not in err
    assert "ms_eval" not in err
