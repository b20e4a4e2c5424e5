"""``memorysync-local serve``: the server on a socket, configured from flags."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import secrets
import sys
from collections.abc import Sequence

from fastapi import FastAPI

from memorysync_local._cli.data_commands import DATA_COMMANDS, add_data_commands, run_data_command
from memorysync_local._cli.migrate_command import add_migrate_command, run_migrate
from memorysync_local._cli.serving import ServeSettings, run_uvicorn
from memorysync_local._cli.workers import prepare, serve_workers
from memorysync_local._http.app import create_app
from memorysync_local._http.otel import instrument, start_sdk
from memorysync_local._plans import DEFAULT_TENANT, KeyRing, Plan
from memorysync_local._recall.embedder_setting import load_embedder
from memorysync_local._recall.embedding import DEFAULT_EMBEDDER, Embedder, EmbedderUnavailable
from memorysync_local._served import bind_socket, bind_sockets
from memorysync_local._storage.errors import StorageError
from memorysync_local._storage.target import is_private_memory, shown
from memorysync_local._version import __version__

ENV_KEYS = "MEMORYSYNC_LOCAL_API_KEYS"
logger = logging.getLogger("memorysync.local")


def build_parser() -> argparse.ArgumentParser:
    """The ``memorysync-local`` argument parser: ``serve`` and the users'-data commands."""
    parser = argparse.ArgumentParser(
        prog="memorysync-local",
        description="A MemorySync-compatible server on SQLite (offline use and tests) or "
        "PostgreSQL (several servers on one database).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve the HTTP API with uvicorn",
        description="Serve the MemorySync HTTP API over SQLite or PostgreSQL with uvicorn. "
        "Without any key, a key is generated and printed once on standard output.",
    )
    serve.add_argument(
        "--db",
        default="./memorysync.db",
        help="SQLite file (default ./memorysync.db; ':memory:' keeps everything in memory "
        "until the server stops), or a postgresql://USER@HOST:PORT/DB URL: several server "
        "processes on one PostgreSQL (pip install 'memorysync-local[postgres]'; the "
        "password from PGPASSWORD or ~/.pgpass, not the URL; see docs/deploying.md)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="TCP port (default 8765; 0 = free)")
    serve.add_argument(
        "--api-key-file",
        action="append",
        default=[],
        metavar="PATH",
        help="read full keys from PATH, one KEY[=TENANT] a line ('#' comments and blank "
        "lines ignored); recommended, with the environment variable "
        f"{ENV_KEYS} (comma-separated), because neither shows in `ps` (repeatable)",
    )
    serve.add_argument(
        "--api-key",
        action="append",
        default=[],
        metavar="KEY[=TENANT]",
        help="a full key, of tenant 'local' unless =TENANT is given (repeatable). Visible "
        "to every local user in `ps`: prefer --api-key-file or "
        f"{ENV_KEYS}",
    )
    serve.add_argument(
        "--eval-key",
        action="append",
        default=[],
        metavar="KEY",
        help="an evaluation key: GET /org/projects answers 403, tenant 'default' (repeatable)",
    )
    serve.add_argument(
        "--plan",
        action="append",
        default=[],
        metavar="KEY=MODE:N",
        help="monthly add limit N for KEY; MODE 'free' (silent: writes skipped, reads empty) or "
        "'evaluation' (429 with retry_after) (repeatable)",
    )
    serve.add_argument(
        "--async-extraction",
        action="store_true",
        help="answer add_turn with 'distilling' and extract in the background, as the hosted "
        "service does (default: inline, readable as soon as answered)",
    )
    serve.add_argument(
        "--embedder",
        default=DEFAULT_EMBEDDER,
        metavar="none|model2vec[:MODEL]|sentence-transformers[:MODEL_OR_PATH]|openai[:MODEL]",
        help="recall by meaning, fused with word recall; default model2vec: the static model "
        "the package ships (all-MiniLM-L6-v2 distilled, 128 dims, offline, no torch); "
        "model2vec:MODEL another static model (a folder, or a model-hub id downloaded once); "
        "sentence-transformers (pip install 'memorysync-local[transformers]', torch) loads a "
        "folder or a cached model offline, default sentence-transformers/all-MiniLM-L6-v2; "
        "none: word recall only",
    )
    serve.add_argument(
        "--extractor",
        default="rules",
        metavar="rules|openai[:MODEL]",
        help="who decides the facts and their updates: the rules (default), or an "
        "OpenAI-compatible chat model (OPENAI_BASE_URL, OPENAI_API_KEY; default model "
        "gpt-4o-mini), with the rules taking over on any failure",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="serving processes, all on one port and one database (default 1): a recall "
        "runs on one CPU in one process, so N processes answer up to N at once; the "
        "start-up work is done once, before they start (a file or PostgreSQL, not "
        "':memory:'; see docs/local-server.md)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="uvicorn log level (default info)",
    )
    serve.add_argument(
        "--otel",
        action="store_true",
        help="a span per request, exported over OTLP/HTTP (OTEL_EXPORTER_OTLP_* variables); "
        "needs pip install 'memorysync-local[otel]'",
    )
    add_data_commands(commands)
    add_migrate_command(commands)
    return parser


def _parse_keys(values: Sequence[str]) -> dict[str, str]:
    keys: dict[str, str] = {}
    for value in values:
        key, sep, tenant = value.strip().partition("=")
        key = key.strip()
        if not key:
            raise ValueError("--api-key needs a non-empty KEY")
        if sep and not tenant.strip():
            raise ValueError("--api-key KEY=TENANT needs a non-empty TENANT")
        keys[key] = tenant.strip() if sep else DEFAULT_TENANT
    return keys


def _read_key_file(path: str) -> list[str]:
    """The ``KEY[=TENANT]`` lines of a key file (the error names the file, never a key)."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise ValueError(f"--api-key-file {path}: cannot read it ({reason})") from None
    entries = [line.strip() for line in lines]
    entries = [line for line in entries if line and not line.startswith("#")]
    if not entries:
        raise ValueError(f"--api-key-file {path}: no key in it")
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0
    if mode & 0o077:
        print(
            f"warning: {path} is readable by other users (mode {mode & 0o777:o}); chmod 600 it",
            file=sys.stderr,
            flush=True,
        )
    return entries


def _embedder(spec: str) -> Embedder | None:
    """The ``--embedder`` asked for, or None with one line saying why it is off."""
    try:
        return load_embedder(spec)
    except EmbedderUnavailable as exc:
        print(f"semantic recall is off, serving lexical recall: {exc}", file=sys.stderr, flush=True)
        return None


def _parse_plans(values: Sequence[str]) -> dict[str, Plan]:
    plans: dict[str, Plan] = {}
    for value in values:
        key, sep, spec = value.partition("=")
        if not sep or not key:
            raise ValueError("--plan must look like KEY=free:N or KEY=evaluation:N")
        plans[key] = Plan.parse(spec)
    return plans


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memorysync-local`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in DATA_COMMANDS:
        return run_data_command(args)
    if args.command == "migrate":
        return run_migrate(args)
    env_keys = [k for k in os.environ.get(ENV_KEYS, "").split(",") if k.strip()]
    app: FastAPI | None = None
    try:
        workers = _workers(args)
        file_keys = [entry for path in args.api_key_file for entry in _read_key_file(path)]
        keys = _parse_keys([*env_keys, *file_keys, *args.api_key])
        plans = _parse_plans(args.plan)
        generated = None
        if not keys and not args.eval_key:
            generated = f"ms_local_{secrets.token_urlsafe(24)}"
            keys = {generated: DEFAULT_TENANT}
        embedder = _embedder(args.embedder)
        settings = ServeSettings(
            db=args.db,
            keys=keys,
            eval_keys=tuple(args.eval_key),
            plans=plans,
            async_extraction=args.async_extraction,
            embedder=args.embedder if embedder is not None else "none",
            extractor=args.extractor,
            log_level=args.log_level,
            otel=args.otel,
        )
        if workers == 1:
            app = create_app(
                args.db,
                api_keys=keys,
                eval_keys=args.eval_key,
                plans=plans,
                async_extraction=args.async_extraction,
                embedder=embedder,
                extractor=args.extractor,
            )
            store = app.state.store
        else:
            KeyRing(keys, args.eval_key, plans)  # the keys' errors, before any worker starts
            store = prepare(settings, embedder)
    except (ValueError, TypeError, RuntimeError, StorageError) as exc:
        parser.error(str(exc))
    try:
        sockets = bind_sockets(args.host, args.port, workers) if workers > 1 else []
        sock = sockets[0] if sockets else bind_socket(args.host, args.port)
    except OSError as exc:
        store.close()
        parser.error(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    if app is not None and args.otel and instrument(app):
        print(start_sdk(), flush=True)
    host, port = sock.getsockname()[:2]
    where = f"[{host}]" if ":" in host else host
    serving = shown(args.db)  # a URL's password is never printed
    print(f"memorysync-local {__version__} serving {serving} at http://{where}:{port}", flush=True)
    if embedder is not None:
        print(f"recall by meaning: {embedder.name} (fused with word recall)", flush=True)
    extractor = store.extractor
    if extractor.features.related_memories:
        print(f"facts decided by {extractor.name} (the rules on any failure)", flush=True)
    if generated is not None:
        print(f"API key (generated, shown once): {generated}", flush=True)
    if not _is_loopback(args.host):
        print(
            "warning: listening beyond loopback; anyone who can reach it needs only a key",
            file=sys.stderr,
            flush=True,
        )
    if app is not None:
        run_uvicorn(app, sock, settings)
        return 0
    store.close()  # the start-up work is done: each worker opens its own
    del store, embedder  # each worker loads its own model: no copy kept here
    return serve_workers(settings, sockets)


def _workers(args: argparse.Namespace) -> int:
    """``--workers``, checked: at least 1, and more only on a database they can share."""
    workers = int(args.workers)
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    if workers > 1 and not sys.platform.startswith("linux"):
        # Elsewhere SO_REUSEPORT sockets share a port without sharing its connections.
        raise ValueError("--workers above 1 needs Linux, whose kernel spreads connections")
    if workers > 1 and is_private_memory(args.db):
        raise ValueError(
            "--workers above 1 needs a database file or PostgreSQL: ':memory:' is private "
            "to one process"
        )
    return workers


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
