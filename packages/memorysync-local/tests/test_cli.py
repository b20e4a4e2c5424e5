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
        "--api-key-file",
        "--embedder",
        "--otel",
        "--workers",
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
        # More than one process needs a database they can share.
        (["serve", "--db", ":memory:", "--workers", "2"], "':memory:' is private"),
        (["serve", "--workers", "0"], "--workers must be at least 1"),
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
        # Recall by meaning is on by default: its line comes between.
        assert proc.stdout.readline().startswith("recall by meaning: model2vec:")
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


def test_help_recommends_the_key_file_over_a_key_in_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--api-key-file PATH" in text
    assert "ps" in text
    assert "prefer --api-key-file or MEMORYSYNC_LOCAL_API_KEYS" in text


def test_serve_reads_keys_from_a_file_and_keeps_them_out_of_the_command_line(
    tmp_path: Path,
) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text("# local keys\nms_file_a\n\nms_file_b = acme\n", encoding="utf-8")
    key_file.chmod(0o600)
    proc = _start(tmp_path, "--api-key-file", str(key_file), env={"MEMORYSYNC_LOCAL_API_KEYS": ""})
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().rsplit(" at ", 1)[1].strip()
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert b"ms_file" not in cmdline
        with httpx.Client(base_url=base_url, timeout=30) as client:
            for key, tenant in (("ms_file_a", "local"), ("ms_file_b", "acme")):
                answer = client.get("/org/projects", headers={"X-API-Key": key})
                assert answer.json()[0]["tenant_id"] == tenant
    finally:
        out, err = _stop(proc)
    assert "generated" not in out
    assert "warning" not in err
    assert "ms_file" not in out + err


def test_a_key_file_readable_by_others_is_used_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memorysync_local._cli.commands import _read_key_file

    key_file = tmp_path / "keys"
    key_file.write_text("ms_open\n", encoding="utf-8")
    key_file.chmod(0o644)
    assert _read_key_file(str(key_file)) == ["ms_open"]
    err = capsys.readouterr().err
    assert "readable by other users" in err
    assert "chmod 600" in err
    assert "ms_open" not in err


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read it"), ("# only a comment\n\n", "no key in it"), (b"\xff\xfe", "UTF-8")],
)
def test_a_bad_key_file_exits_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes | None, message: str
) -> None:
    key_file = tmp_path / "keys"
    if isinstance(content, bytes):
        key_file.write_bytes(content)
    elif content is not None:
        key_file.write_text(content, encoding="utf-8")
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--db", str(tmp_path / "x.db"), "--api-key-file", str(key_file)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert str(key_file) in err
    assert message in err


def test_the_access_log_never_shows_a_key_sent_in_the_query_string(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*COMMAND, "serve", "--db", str(tmp_path / "cli.db"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MEMORYSYNC_LOCAL_API_KEYS": "ms_query_key"},
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().rsplit(" at ", 1)[1].strip()
        with httpx.Client(base_url=base_url, timeout=30) as client:
            assert client.get("/health", params={"api_key": "ms_query_key"}).status_code == 200
            listed = client.get(
                "/v1/memory/local/ana/list",
                params={"api_key": "ms_query_key", "limit": 1},
                headers={"X-API-Key": "ms_query_key"},
            )
            assert listed.status_code == 200
            # Issue 26: a key in a path segment, the server's own or key-shaped.
            assert client.get("/nonexistent/ms_query_key").status_code == 404
            assert client.get("/nonexistent/ms_someone_elses_key_42").status_code == 404
    finally:
        out, err = _stop(proc)
    assert "ms_query_key" not in out + err
    assert "ms_someone_elses_key_42" not in out + err
    assert "/health?<query omitted>" in out + err  # the request is still logged
    assert "/v1/memory/local/ana/list?<query omitted>" in out + err
    assert "/nonexistent/<key omitted>" in out + err


def test_database_files_are_private_to_their_owner(tmp_path: Path) -> None:
    from memorysync_local import embedded

    previous = os.umask(0o022)  # the usual umask, under which SQLite makes files 0644
    try:
        path = tmp_path / "new" / "folder" / "memorysync.db"
        with embedded(str(path)) as server:
            names = sorted(p.name for p in path.parent.iterdir())
            modes = {p.name: p.stat().st_mode & 0o777 for p in path.parent.iterdir()}
            assert server.db_path == str(path)
    finally:
        os.umask(previous)
    assert names == ["memorysync.db", "memorysync.db-shm", "memorysync.db-wal"]
    assert set(modes.values()) == {0o600}, modes
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "new" / "folder").stat().st_mode & 0o777 == 0o700
