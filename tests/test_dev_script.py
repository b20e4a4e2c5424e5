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
