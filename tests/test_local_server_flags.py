"""Every flag of ``memorysync-local serve`` is in the local-server page's flag table."""

from __future__ import annotations

import argparse
from pathlib import Path

from memorysync_local._cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def serve_flags() -> set[str]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve = commands.choices["serve"]
    return {
        option
        for action in serve._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


def test_every_serve_flag_has_a_row_in_the_local_server_page() -> None:
    page = (ROOT / "docs" / "local-server.md").read_text(encoding="utf-8")
    flags = serve_flags()
    assert {"--db", "--otel", "--embedder", "--api-key-file"} <= flags
    missing = sorted(flag for flag in flags if f"| `{flag}" not in page)
    assert missing == []
