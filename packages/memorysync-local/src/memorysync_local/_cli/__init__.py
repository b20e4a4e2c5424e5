"""The ``memorysync-local`` command line: ``serve`` (:mod:`.commands`) and the
users'-data commands (:mod:`.data_commands`: users, memories, sessions, history,
export, import, forget, stats)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from memorysync_local._cli import commands
from memorysync_local._cli.commands import build_parser

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memorysync-local`` console script.

    A reader that stops early (``memorysync-local users | head -4``) ends the command
    quietly, as other command-line tools do, instead of with a ``BrokenPipeError``
    traceback (status 1).
    """
    try:
        status = commands.main(argv)
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at exit
    except BrokenPipeError:
        # Python would flush stdout again at exit and print the error once more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return status
