"""The ``memorysync-local`` command line: ``serve`` (:mod:`.commands`) and the
users'-data commands (:mod:`.data_commands`: users, memories, sessions, history,
export, forget, stats)."""

from memorysync_local._cli.commands import build_parser, main

__all__ = ["build_parser", "main"]
