"""What both backends' migrations decide alike about a database's schema version."""

from __future__ import annotations


def refuse_newer(current: int, supported: int) -> None:
    """Raise when a newer server migrated the database past the schema this one knows."""
    if current > supported:
        raise RuntimeError(
            f"database schema version {current} is newer than this server's "
            f"({supported}); upgrade memorysync-local"
        )
