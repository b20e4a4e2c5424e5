"""dev.py: standard library only, and an install runs only when what it installs changed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    return dev


def test_dev_py_runs_on_a_python_with_nothing_but_the_standard_library() -> None:
    # -I -S: no site-packages, no user site, no PYTHONPATH: nothing third-party to import.
    proc = subprocess.run(
        [sys.executable, "-I", "-S", str(ROOT / "dev.py"), "help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    assert "python3 dev.py test" in proc.stdout
    imported = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            "import runpy, sys; runpy.run_path(sys.argv[1]); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in {'nox', 'noxfile'}))",
            str(ROOT / "dev.py"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert imported.stdout.strip() == "[]", imported.stderr


def test_an_install_runs_once_and_again_only_when_its_requirements_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = load_dev()
    monkeypatch.setattr(dev, "VENV", tmp_path)
    log = tmp_path / "installs.log"
    # Stands in for pip: records each call and its arguments.
    installer = [
        sys.executable,
        "-c",
        "import sys; open(sys.argv[1], 'a').write(' '.join(sys.argv[2:]) + '\\n')",
        str(log),
    ]
    dev._install_once("demo", ("pkg-a==1",), installer)
    dev._install_once("demo", ("pkg-a==1",), installer)
    assert log.read_text().splitlines() == ["pkg-a==1"]
    dev._install_once("demo", ("pkg-a==2",), installer)
    assert log.read_text().splitlines() == ["pkg-a==1", "pkg-a==2"]


def test_a_changed_package_pyproject_triggers_a_new_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = load_dev()
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "pyproject.toml").write_text('dependencies = ["httpx>=0.25"]\n')
    monkeypatch.setattr(dev, "ROOT", tmp_path)
    before = dev._fingerprint(("-e", "pkg"))
    (package / "pyproject.toml").write_text('dependencies = ["httpx>=0.27"]\n')
    assert dev._fingerprint(("-e", "pkg")) != before


def test_a_failed_install_leaves_no_stamp_so_the_next_run_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = load_dev()
    monkeypatch.setattr(dev, "VENV", tmp_path)
    with pytest.raises(subprocess.CalledProcessError):
        dev._install_once("demo", ("pkg-a==1",), [sys.executable, "-c", "raise SystemExit(1)"])
    assert not (tmp_path / ".installed-demo").exists()


def load_tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


def test_a_half_made_environment_is_not_taken_for_a_usable_one(tmp_path: Path) -> None:
    dev = load_dev()
    # Stand-ins for an interpreter: one whose `import pip` fails (what a run stopped
    # during `venv` creation leaves), one whose `import pip` works.
    without_pip, with_pip = tmp_path / "without-pip", tmp_path / "with-pip"
    without_pip.write_text("#!/bin/sh\nexit 1\n")
    with_pip.write_text("#!/bin/sh\nexit 0\n")
    for script in (without_pip, with_pip):
        script.chmod(0o755)
    assert dev._usable(tmp_path / "missing") is False
    assert dev._usable(without_pip) is False
    assert dev._usable(with_pip) is True


@pytest.mark.parametrize(
    ("args", "selector"),
    [
        ((), ["--tags", "test"]),
        (("--quick",), ["--sessions", "lint", "core"]),
        (("--quick", "--jobs", "2"), ["--sessions", "lint", "core"]),
    ],
)
def test_test_runs_every_tagged_session_or_the_quick_ones(
    args: tuple[str, ...], selector: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = load_dev()
    calls: list[list[str]] = []
    monkeypatch.setattr(dev, "QUICK_SESSIONS", ("lint", "core"))
    monkeypatch.setattr(dev, "_ensure_venv", lambda: Path("/venv/python"))
    provisioned: list[bool] = []
    monkeypatch.setattr(dev, "provision", lambda: provisioned.append(True) or 0)
    monkeypatch.setattr(dev.subprocess, "call", lambda command, **_: calls.append(command) or 0)
    assert dev.test(*args) == 0
    assert provisioned == [True]  # host setup is an explicit step of the test command
    (command,) = calls
    assert command[-len(selector) :] == selector
    assert command[command.index("--jobs") + 1] == ("2" if "--jobs" in args else "3")


def test_test_refuses_unknown_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_dev().test("--quik") == 2
    assert "--quik" in capsys.readouterr().out


def test_stress_ci_names_the_failing_tests_and_sessions_of_a_log() -> None:
    stress = load_tool("stress_ci")
    log = "\n".join(
        [
            "ok     lint (0.1 min)",
            "FAILED tests/test_a.py::test_one - AssertionError: assert 1 == 2",
            "ERROR packages/x/tests/test_b.py::test_two - ResourceWarning",
            "FAILED tests/test_a.py::test_one - AssertionError: assert 1 == 2",
            "nox > Session cross failed.",
        ]
    )
    assert stress.failures_in(log) == [
        "tests/test_a.py::test_one",
        "packages/x/tests/test_b.py::test_two",
        "session cross",
    ]
    assert stress.failures_in("nox > Session lint was successful in 3 seconds.") == []


def test_the_session_runner_starts_the_longest_sessions_first() -> None:
    runner = load_tool("run_sessions")
    names = ["lint", "compat-3.10(package='core')", "cross", "compat-3.13(package='local')"]
    assert sorted(names, key=runner._weight) == [
        "compat-3.13(package='local')",
        "cross",
        "compat-3.10(package='core')",
        "lint",
    ]
